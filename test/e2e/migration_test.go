//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/test/upstream"
)

// The switch from upstream orchestratord, on a real cluster: an environment
// whose objects are as upstream left them (its finalizer on the
// Materialize, its field manager and owner references without a controller
// on the Balancer's and Console's children, the Console's Deployment with an
// earlier, narrower selector) is taken over by this operator starting up:
// no new environmentd generation, balancerd's Deployment untouched, the
// Console's selector replaced without new pods, both Ready, and a delete
// that completes.
func TestMigrationFromUpstreamOrchestratord(t *testing.T) {
	ctx := context.Background()
	ns := contractNamespace(t, nil)
	createMaterialize(t, ns, standinV26_35, v1alpha1.AuthenticatorNone)
	mz := waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
	id := mz.Status.ResourceID
	balancerd, console := "mz"+id+"-balancerd", "mz"+id+"-console"
	waitComponentReady(t, ns, "Balancer")
	waitComponentReady(t, ns, "Console")
	balancerCR, err := c.Materialize.MaterializeV1alpha1().Balancers(ns).Get(ctx, "mz", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	consoleCR, err := c.Materialize.MaterializeV1alpha1().Consoles(ns).Get(ctx, "mz", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Upstream runs; this operator does not.
	restore := scaleControllers(t, 0)

	// The Materialize as upstream keeps it: its finalizer.
	if _, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Patch(ctx, "mz", types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, upstream.Finalizer)), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// balancerd as upstream's code makes it for this Balancer, under its
	// field manager, with its owner reference.
	// The chart's flags, as the operator rendered them: upstream's chart
	// defaults with the resources hack/cluster/run.sh sets.
	settings := upstream.ChartDefaults(corev1.PullNever)
	settings.DefaultResources = &deployment(t, ns, balancerd).Spec.Template.Spec.Containers[0].Resources
	bOwner := upstream.Owner{APIVersion: "materialize.cloud/v1alpha1", Kind: "Balancer", Name: "mz", Namespace: ns, UID: balancerCR.UID, ResourceID: id}
	upstreamApply(t, ns, upstream.BalancerDeployment(bOwner, settings, balancerCR.Spec.BalancerdImageRef, *balancerCR.Spec.Replicas,
		balancerCR.Spec.StaticRouting.EnvironmentdServiceName, balancerCR.Spec.StaticRouting.EnvironmentdNamespace))
	upstreamApply(t, ns, upstream.BalancerService(bOwner))
	dropControllerFlag(t, ns, "deployments", balancerd)
	dropControllerFlag(t, ns, "services", balancerd)
	balancerBefore := deployment(t, ns, balancerd)

	// The Console's Deployment from an earlier upstream: the selector and
	// the pod labels are only materialize.cloud/name, and a selector cannot
	// be changed in place.
	cOwner := upstream.Owner{APIVersion: "materialize.cloud/v1alpha1", Kind: "Console", Name: "mz", Namespace: ns, UID: consoleCR.UID, ResourceID: id}
	consoleSettings := settings
	consoleSettings.DefaultResources = &deployment(t, ns, console).Spec.Template.Spec.Containers[0].Resources
	old := upstream.ConsoleDeployment(cOwner, consoleSettings, consoleCR.Spec.ConsoleImageRef, *consoleCR.Spec.Replicas,
		consoleCR.Spec.Balancerd.ServiceName, consoleCR.Spec.Balancerd.Namespace)
	old.Spec.Selector.MatchLabels = map[string]string{"materialize.cloud/name": console}
	old.Spec.Template.Labels = map[string]string{"materialize.cloud/name": console}
	foreground := metav1.DeletePropagationForeground
	if err := c.Kube.AppsV1().Deployments(ns).Delete(ctx, console, metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the Console's Deployment deleted", time.Minute, func() (bool, error) {
		_, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, console, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	upstreamApply(t, ns, old)
	poll(t, "the old-selector Console Deployment rolled out", 3*time.Minute, func() (bool, error) {
		d := deployment(t, ns, console)
		return d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == *d.Spec.Replicas &&
			d.Status.UpdatedReplicas == *d.Spec.Replicas, nil
	})
	consoleRS := replicaSetsOf(t, ns, deployment(t, ns, console))
	if len(consoleRS) != 1 {
		t.Fatalf("the Console's Deployment has ReplicaSets %v, want one", consoleRS)
	}

	// This operator starts.
	restore()
	poll(t, "the Console's Deployment on upstream's selector", 3*time.Minute, func() (bool, error) {
		d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, console, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return len(d.Spec.Selector.MatchLabels) == 6 && d.Spec.Selector.MatchLabels["app"] == "console", nil
	})
	waitComponentReady(t, ns, "Balancer")
	waitComponentReady(t, ns, "Console")

	after := waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", time.Minute)
	if after.Status.ActiveGeneration != mz.Status.ActiveGeneration {
		t.Errorf("active generation %d -> %d: the switch rolled environmentd out", mz.Status.ActiveGeneration, after.Status.ActiveGeneration)
	}
	sets, err := c.Kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets.Items {
		if s.Labels["app.kubernetes.io/name"] == "clusterd" {
			continue // environmentd's own, not the operator's
		}
		if s.Name != fmt.Sprintf("mz%s-environmentd-%d", id, mz.Status.ActiveGeneration) {
			t.Errorf("StatefulSet %s exists after the switch", s.Name)
		}
	}
	if b := deployment(t, ns, balancerd); b.UID != balancerBefore.UID || b.Generation != balancerBefore.Generation {
		t.Errorf("balancerd's Deployment changed (uid %s -> %s, generation %d -> %d): its pods restarted",
			balancerBefore.UID, b.UID, balancerBefore.Generation, b.Generation)
	}
	// One rollout put the new pod labels on the old Deployment's pods; the
	// new Deployment adopted that ReplicaSet instead of rolling again.
	newConsole := deployment(t, ns, console)
	poll(t, "the Console's relabelled ReplicaSet adopted", time.Minute, func() (bool, error) {
		adopted := replicaSetsOf(t, ns, newConsole)
		return len(adopted) == 1 && !slices.Contains(consoleRS, adopted[0]), nil
	})
	all, err := c.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "materialize.cloud/name=" + console})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 2 {
		t.Errorf("%d console ReplicaSets, want 2 (the old one and the relabelled one): a second rollout ran", len(all.Items))
	}
	events, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		// The Console is NotReady for the moment its new Deployment has not
		// yet reported the adopted pods available; anything else is a fault.
		if e.Type == corev1.EventTypeWarning && e.Source.Component == "orchestratord" &&
			(e.Reason != "NotReady" || e.InvolvedObject.Kind != "Console") {
			t.Errorf("warning event %s on %s: %s", e.Reason, e.InvolvedObject.Name, e.Message)
		}
	}

	// Deleting the Materialize completes: upstream's finalizer is released
	// and garbage collection removes the rest.
	if err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Delete(ctx, "mz", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the Materialize deleted", time.Minute, func() (bool, error) {
		_, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Get(ctx, "mz", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	poll(t, "the Balancer and Console collected", 2*time.Minute, func() (bool, error) {
		_, errB := c.Materialize.MaterializeV1alpha1().Balancers(ns).Get(ctx, "mz", metav1.GetOptions{})
		_, errC := c.Materialize.MaterializeV1alpha1().Consoles(ns).Get(ctx, "mz", metav1.GetOptions{})
		return apierrors.IsNotFound(errB) && apierrors.IsNotFound(errC), nil
	})
}

func poll(t *testing.T, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(context.Context) (bool, error) {
		return cond()
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := c.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// replicaSetsOf are the names of the ReplicaSets d controls.
func replicaSetsOf(t *testing.T, ns string, d *appsv1.Deployment) []string {
	t.Helper()
	list, err := c.Kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rs := range list.Items {
		if metav1.IsControlledBy(&rs, d) {
			names = append(names, rs.Name)
		}
	}
	slices.Sort(names)
	return names
}

func waitComponentReady(t *testing.T, ns, kind string) {
	t.Helper()
	poll(t, kind+" Ready", 3*time.Minute, func() (bool, error) {
		var conds []metav1.Condition
		switch kind {
		case "Balancer":
			b, err := c.Materialize.MaterializeV1alpha1().Balancers(ns).Get(context.Background(), "mz", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			conds = b.Status.Conditions
		default:
			co, err := c.Materialize.MaterializeV1alpha1().Consoles(ns).Get(context.Background(), "mz", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			conds = co.Status.Conditions
		}
		return meta.IsStatusConditionTrue(conds, "Ready"), nil
	})
}

// upstreamApply writes obj as upstream's apply_resource does.
func upstreamApply(t *testing.T, ns string, obj any) {
	t.Helper()
	body, opts, err := upstream.ApplyPatch(obj)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	switch o := obj.(type) {
	case *appsv1.Deployment:
		_, err = c.Kube.AppsV1().Deployments(ns).Patch(ctx, o.Name, types.ApplyPatchType, body, opts)
	case *corev1.Service:
		_, err = c.Kube.CoreV1().Services(ns).Patch(ctx, o.Name, types.ApplyPatchType, body, opts)
	default:
		err = fmt.Errorf("upstreamApply: %T", obj)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// dropControllerFlag leaves the owner references as upstream writes them:
// blockOwnerDeletion, no controller.
func dropControllerFlag(t *testing.T, ns, resource, name string) {
	t.Helper()
	ctx := context.Background()
	var refs []metav1.OwnerReference
	switch resource {
	case "deployments":
		refs = deployment(t, ns, name).OwnerReferences
	case "services":
		s, err := c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		refs = s.OwnerReferences
	}
	for i := range refs {
		refs[i].Controller = nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs}})
	var err error
	switch resource {
	case "deployments":
		_, err = c.Kube.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	case "services":
		_, err = c.Kube.CoreV1().Services(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// scaleControllers scales the controllers' Deployment to n, waits for its
// pods to match, and returns a function that scales it back and waits.
func scaleControllers(t *testing.T, n int32) (restore func()) {
	t.Helper()
	ctx := context.Background()
	deployments := c.Kube.AppsV1().Deployments(operatorNS)
	scale, err := deployments.GetScale(ctx, controllers, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	was := scale.Spec.Replicas
	set := func(replicas int32) {
		s, err := deployments.GetScale(ctx, controllers, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Replicas = replicas
		if _, err := deployments.UpdateScale(ctx, controllers, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, fmt.Sprintf("%s at %d pods", controllers, replicas), 3*time.Minute, func() (bool, error) {
			p, err := c.Pods(ctx, controllers)
			if err != nil {
				return false, nil
			}
			d := deployment(t, operatorNS, controllers)
			return int32(len(p)) == replicas && d.Status.ReadyReplicas == replicas, nil
		})
	}
	set(n)
	restored := false
	restore = func() {
		if !restored {
			restored = true
			set(was)
		}
	}
	t.Cleanup(restore)
	return restore
}
