package component

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/kubeclient"
)

// SelectorFixPoll is how often a Deployment whose selector is being
// replaced is looked at again.
const SelectorFixPoll = 2 * time.Second

// FixSelector replaces the selector of a live Deployment made with an older
// one (by an earlier upstream orchestratord or an earlier version of this
// operator), which cannot be changed in place, without taking its pods
// down, as upstream's fix_deployment does:
//  1. the live Deployment gets the desired pod template, rolling the pods to
//     ones the new selector matches (upstream changes only the labels and
//     rolls again when it applies; the whole template means one rollout);
//  2. once that rollout completes, the Deployment is deleted orphaning its
//     ReplicaSets, so the pods keep running;
//  3. the caller's apply then creates the Deployment with the new selector,
//     which adopts the ReplicaSet whose pods it matches.
//
// Upstream waits in place; here each step is a reconcile, so fixed reports
// whether the caller may apply now and, if not, when to look again.
func FixSelector(ctx context.Context, kube kubeclient.Interface, owner metav1.Object, live *appsv1.Deployment, found bool,
	selector map[string]string, template *corev1ac.PodTemplateSpecApplyConfiguration,
) (fixed bool, requeue time.Duration, err error) {
	if fixed, requeue, settled := selectorSettled(live, found, selector); settled {
		return fixed, requeue, nil
	}
	if err := mustOwn(owner, live, "Deployment"); err != nil {
		return false, 0, err
	}
	// The cache holds a stub without the pod template
	// (controller.TrimForCache): the rest reads the whole object (on each
	// poll of a migration), which may be newer than the cache, so the
	// checks above are made again on it.
	deployments := kube.AppsV1().Deployments(live.Namespace)
	fresh, err := deployments.Get(ctx, live.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, SelectorFixPoll, nil
	case err != nil:
		return false, 0, fmt.Errorf("reading deployment %s to replace its selector: %w", live.Name, err)
	case fresh.UID != live.UID:
		// Recreated since the cache saw it: look again once it has.
		return false, SelectorFixPoll, nil
	}
	if fixed, requeue, settled := selectorSettled(fresh, true, selector); settled {
		return fixed, requeue, nil
	}
	if err := mustOwn(owner, fresh, "Deployment"); err != nil {
		return false, 0, err
	}
	live = fresh
	want, err := typedTemplate(template)
	if err != nil {
		return false, 0, err
	}
	if !holds(live.Spec.Template, want) {
		d := live.DeepCopy()
		d.Spec.Template = want
		// Nil leaves the server's record of managed fields as it is.
		d.ManagedFields = nil
		out, err := deployments.Update(ctx, d, metav1.UpdateOptions{FieldManager: apply.FieldManager})
		if err != nil {
			return false, 0, fmt.Errorf("relabelling the pods of deployment %s for its new selector: %w", live.Name, err)
		}
		if out.Generation != live.Generation {
			return false, SelectorFixPoll, nil
		}
		// The template did not change (an admission webhook may add what
		// makes it differ from ours): go on to the rollout wait.
		live = out
	}
	if !rolledOut(live) {
		return false, SelectorFixPoll, nil
	}
	orphan := metav1.DeletePropagationOrphan
	err = deployments.Delete(ctx, live.Name, metav1.DeleteOptions{
		PropagationPolicy: &orphan,
		Preconditions:     &metav1.Preconditions{UID: &live.UID, ResourceVersion: &live.ResourceVersion},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, 0, fmt.Errorf("deleting deployment %s to replace its selector: %w", live.Name, err)
	}
	// The informer has to see the delete before the apply can create it.
	return false, SelectorFixPoll, nil
}

// selectorSettled tells whether a Deployment needs nothing done before the
// caller's apply (fixed), or must be waited for (requeue): settled is false
// when its selector has to be replaced.
func selectorSettled(live *appsv1.Deployment, found bool, selector map[string]string) (fixed bool, requeue time.Duration, settled bool) {
	if found && live.DeletionTimestamp != nil {
		// Being deleted (by step 2, or by someone): apply once it is gone.
		return false, SelectorFixPoll, true
	}
	if !found || live.Spec.Selector == nil || (len(live.Spec.Selector.MatchExpressions) == 0 && maps.Equal(live.Spec.Selector.MatchLabels, selector)) {
		return true, 0, true
	}
	return false, 0, false
}

// rolledOut tells whether the deployment controller has seen the latest
// spec and every replica is updated and available (what upstream waits for
// with kube-rs' is_deployment_completed).
func rolledOut(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation {
		return false
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want
}

// holds tells whether the live template has every field of want (the API
// server adds defaults to what was written).
func holds(live, want corev1.PodTemplateSpec) bool {
	var l, w any
	for _, c := range []struct {
		v   corev1.PodTemplateSpec
		out *any
	}{{live, &l}, {want, &w}} {
		raw, err := json.Marshal(c.v)
		if err != nil || json.Unmarshal(raw, c.out) != nil {
			return false
		}
	}
	return covers(w, l)
}

// covers is apply.Subset with lists compared element by element, so that
// defaults inside list elements (a container's terminationMessagePath) do
// not count as a difference.
func covers(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if gv, present := g[k]; !present || !covers(v, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !covers(w[i], g[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, got)
	}
}

// typedTemplate is the pod template an apply configuration describes.
func typedTemplate(ac *corev1ac.PodTemplateSpecApplyConfiguration) (corev1.PodTemplateSpec, error) {
	var out corev1.PodTemplateSpec
	raw, err := json.Marshal(ac)
	if err == nil {
		err = json.Unmarshal(raw, &out)
	}
	return out, err
}

// FixHeadless deletes a live Service that has a cluster IP (made by an
// earlier version of this operator), since upstream's Services are headless
// and a cluster IP cannot be removed in place; the caller's apply then
// creates the headless one. Clients resolve the name to the pods from then
// on. fixed reports whether the caller may apply now.
func FixHeadless(ctx context.Context, kube kubeclient.Interface, owner metav1.Object, live *corev1.Service, found bool) (fixed bool, requeue time.Duration, err error) {
	if !found || live.Spec.ClusterIP == "" || live.Spec.ClusterIP == corev1.ClusterIPNone {
		return true, 0, nil
	}
	if err := mustOwn(owner, live, "Service"); err != nil {
		return false, 0, err
	}
	if live.DeletionTimestamp == nil {
		err = kube.CoreV1().Services(live.Namespace).Delete(ctx, live.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &live.UID, ResourceVersion: &live.ResourceVersion},
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, 0, fmt.Errorf("deleting service %s to make it headless: %w", live.Name, err)
		}
	}
	return false, SelectorFixPoll, nil
}

// mustOwn refuses to replace an object that is not the owner's child: two
// custom resources may share a resource id, and then a name.
func mustOwn(owner, obj metav1.Object, kind string) error {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return nil
		}
	}
	return fmt.Errorf("%s %s/%s is not a child of this object (uid %s): not replacing it", kind, obj.GetNamespace(), obj.GetName(), owner.GetUID())
}
