package controller

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	mzinformers "github.com/materializeinc/orchestratord/pkg/client/informers/externalversions"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
)

// NewInformerFactories returns the informer factories every reconciler
// reads from (Deps): Kubernetes objects only if they carry the resource id
// label (the operator's children: memory does not grow with the cluster),
// every custom resource, each trimmed by TrimForCache.
func NewInformerFactories(kube kubernetes.Interface, mz versioned.Interface) (informers.SharedInformerFactory, mzinformers.SharedInformerFactory) {
	return informers.NewSharedInformerFactoryWithOptions(kube, 0,
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = children.ResourceIDLabel }),
			informers.WithTransform(TrimForCache)),
		mzinformers.NewSharedInformerFactoryWithOptions(mz, 0, mzinformers.WithTransform(TrimForCache))
}

// TrimForCache is the informers' transform. The operator's children
// (ServiceAccount, Role, RoleBinding, NetworkPolicy, ConfigMap, Service,
// StatefulSet, Deployment) are cached as stubs: the metadata and the few
// spec and status fields the reconcilers read, and the digest of the
// fields this operator owns (apply.OwnedDigestAnnotation), which is all
// the no-op check needs. Pod templates, data, rules, labels (but a
// NetworkPolicy's resource id label, which the reconciler lists them by)
// and every managedFields entry stay out of memory. The custom
// resources are read whole. A Materialize keeps no managedFields (its
// status check compares the status itself); a Balancer or Console keeps
// this operator's entries, which the materialize reconciler's no-op check
// of them extracts (their own reconcilers' status checks read the status,
// so a digest on the object would not serve both), as does a child whose
// owned fields cannot be extracted.
// Objects that are not Kubernetes objects (a tombstone) pass through.
func TrimForCache(obj any) (any, error) {
	var out any
	var err error
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		out, err = stub(o, corev1ac.ExtractServiceAccount, func(m metav1.ObjectMeta) any {
			return &corev1.ServiceAccount{ObjectMeta: m}
		})
	case *rbacv1.Role:
		out, err = stub(o, rbacv1ac.ExtractRole, func(m metav1.ObjectMeta) any { return &rbacv1.Role{ObjectMeta: m} })
	case *rbacv1.RoleBinding:
		out, err = stub(o, rbacv1ac.ExtractRoleBinding, func(m metav1.ObjectMeta) any { return &rbacv1.RoleBinding{ObjectMeta: m} })
	case *networkingv1.NetworkPolicy:
		// The reconciler lists a Materialize's NetworkPolicies by the
		// resource id label; other children are found by name.
		out, err = stub(o, networkingv1ac.ExtractNetworkPolicy, func(m metav1.ObjectMeta) any {
			if id, ok := o.Labels[children.ResourceIDLabel]; ok {
				m.Labels = map[string]string{children.ResourceIDLabel: id}
			}
			return &networkingv1.NetworkPolicy{ObjectMeta: m}
		})
	case *corev1.ConfigMap:
		out, err = stub(o, corev1ac.ExtractConfigMap, func(m metav1.ObjectMeta) any { return &corev1.ConfigMap{ObjectMeta: m} })
	case *corev1.Service:
		// The cluster IP tells a headless Service (component.FixHeadless).
		out, err = stub(o, corev1ac.ExtractService, func(m metav1.ObjectMeta) any {
			return &corev1.Service{ObjectMeta: m, Spec: corev1.ServiceSpec{ClusterIP: o.Spec.ClusterIP}}
		})
	case *appsv1.StatefulSet:
		// Readiness reads the status (materialize's statefulSetReady).
		out, err = stub(o, appsv1ac.ExtractStatefulSet, func(m metav1.ObjectMeta) any {
			return &appsv1.StatefulSet{ObjectMeta: m, Status: o.Status}
		})
	case *v1alpha1.Materialize:
		o.ManagedFields = nil
		return withoutDigest(o), nil
	case *appsv1.Deployment:
		// The selector check, the rollout wait and readiness read these
		// (component.FixSelector, which GETs the whole Deployment before
		// it changes one, rolledOut, ReadyFromDeployment).
		out, err = stub(o, appsv1ac.ExtractDeployment, func(m metav1.ObjectMeta) any {
			return &appsv1.Deployment{ObjectMeta: m, Spec: appsv1.DeploymentSpec{Selector: o.Spec.Selector, Replicas: o.Spec.Replicas}, Status: o.Status}
		})
	}
	if err == nil && out != nil {
		return out, nil
	}
	return withoutDigest(dropOtherManagers(obj)), nil
}

// withoutDigest removes a digest annotation someone wrote on an object
// that is not a stub: the no-op check would trust it.
func withoutDigest(obj any) any {
	if o, err := meta.Accessor(obj); err == nil {
		if a := o.GetAnnotations(); a != nil {
			delete(a, apply.OwnedDigestAnnotation)
		}
	}
	return obj
}

// stub returns what newStub builds from the metadata the reconcilers read
// (identity, ownership, deletion), annotated with the digest of the fields this
// operator owns in live; an error when they cannot be extracted.
func stub[T metav1.Object, AC any](live T, extract func(T, string) (AC, error), newStub func(metav1.ObjectMeta) any) (any, error) {
	if _, stubbed := apply.CachedDigest(live); stubbed {
		// Already a stub: informers may transform what they hold again (a
		// resync), and a stub has no owned fields left to extract.
		return live, nil
	}
	digest, err := ownedDigest(live, extract)
	if err != nil {
		return nil, err
	}
	return newStub(metav1.ObjectMeta{
		Name:              live.GetName(),
		Namespace:         live.GetNamespace(),
		UID:               live.GetUID(),
		ResourceVersion:   live.GetResourceVersion(),
		Generation:        live.GetGeneration(),
		OwnerReferences:   live.GetOwnerReferences(),
		DeletionTimestamp: live.GetDeletionTimestamp(),
		Annotations:       map[string]string{apply.OwnedDigestAnnotation: digest},
	}), nil
}

// ownedDigest is apply.OwnedDigest; client-go's extractors panic on
// managedFields they cannot decode (the API server never sends such),
// which is an error here.
func ownedDigest[T any, AC any](live T, extract func(T, string) (AC, error)) (digest string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("extracting owned fields: %v", p)
		}
	}()
	return apply.OwnedDigest(live, extract)
}

// dropOtherManagers drops the managedFields entries of every manager but
// this operator's: kube-controller-manager's status updates, a user's
// kubectl.
func dropOtherManagers(obj any) any {
	o, err := meta.Accessor(obj)
	if err != nil {
		return obj
	}
	entries := o.GetManagedFields()
	kept := entries[:0]
	for _, e := range entries {
		if e.Manager == apply.FieldManager {
			kept = append(kept, e)
		}
	}
	if len(kept) < len(entries) {
		// A fresh slice: the dropped entries' fieldsV1 must not stay
		// reachable through the old backing array.
		o.SetManagedFields(append(kept[:0:0], kept...))
	}
	return obj
}
