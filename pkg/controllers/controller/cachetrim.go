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

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	mzac "github.com/materializeinc/orchestratord/pkg/client/applyconfiguration/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	mzinformers "github.com/materializeinc/orchestratord/pkg/client/informers/externalversions"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/unreadable"
	"github.com/materializeinc/orchestratord/pkg/kubeclient"
)

// NewInformers returns the informers every reconciler reads from
// (Deps): Kubernetes objects only if they carry the resource id label (the
// operator's children: memory does not grow with the cluster), every
// custom resource, each trimmed by TrimForCache. A custom resource the Go
// types cannot read is cached as a placeholder (pkg/controllers/unreadable)
// instead of failing the whole list.
func NewInformers(kube kubeclient.Interface, mz versioned.Interface) (*ChildInformers, mzinformers.SharedInformerFactory) {
	return newChildInformers(kube), mzinformers.NewSharedInformerFactoryWithOptions(unreadable.Clientset(mz), 0, mzinformers.WithTransform(TrimForCache))
}

// TrimForCache is the informers' transform. The operator's children
// (ServiceAccount, RoleBinding, NetworkPolicy, ConfigMap, Service,
// StatefulSet, Deployment) are cached as Stubs, which their Listers read:
// the metadata and the few spec and status fields the reconcilers read, and
// the digest of the fields this operator owns, which is all the no-op
// check needs. Pod templates, data, rules, labels (but a NetworkPolicy's
// resource id label, which the reconciler lists them by) and every
// managedFields entry stay out of memory. The custom resources are read
// whole. A Materialize keeps no managedFields (its status check compares
// the status itself); a Balancer or Console keeps neither labels nor
// managedFields, but the digest of this operator's fields (digested). A
// child whose owned fields cannot be extracted is kept whole, with this
// operator's entries.
// Objects that are not Kubernetes objects (a tombstone) pass through.
func TrimForCache(obj any) (any, error) {
	switch o := obj.(type) {
	case *Stub:
		// Informers may transform what they hold again (a resync).
		return o, nil
	case *v1alpha1.Materialize:
		o.ManagedFields = nil
		return withoutDigest(o), nil
	case *v1alpha1.Balancer:
		return digested(o, ExtractBalancer), nil
	case *v1alpha1.Console:
		return digested(o, ExtractConsole), nil
	}
	if s, err := stubOf(obj, ""); err == nil && s != nil {
		return s, nil
	}
	return withoutDigest(dropOtherManagers(obj)), nil
}

// The operator's fields of the Balancer and Console the materialize
// reconciler applied, so that a field removed from the Materialize is
// removed from them too.
var (
	ExtractBalancer = apply.ExtractDeduced[*v1alpha1.Balancer](mzac.Balancer)
	ExtractConsole  = apply.ExtractDeduced[*v1alpha1.Console](mzac.Console)
)

// stubOf is the Stub of a child of a kind the informers stub, without
// changing obj; nil for other kinds, an error when its owned fields cannot
// be extracted. digest, when not empty, is the digest of the fields this
// operator owns in obj, known already: they are not extracted.
func stubOf(obj any, digest string) (*Stub, error) {
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		return stub(o, corev1ac.ExtractServiceAccount, nil, digest)
	case *rbacv1.RoleBinding:
		return stub(o, rbacv1ac.ExtractRoleBinding, nil, digest)
	case *networkingv1.NetworkPolicy:
		// The reconciler lists a Materialize's NetworkPolicies by the
		// resource id label; other children are found by name.
		var id any
		if v, ok := o.Labels[children.ResourceIDLabel]; ok {
			id = resourceID(v)
		}
		return stub(o, networkingv1ac.ExtractNetworkPolicy, id, digest)
	case *corev1.ConfigMap:
		return stub(o, corev1ac.ExtractConfigMap, nil, digest)
	case *corev1.Service:
		return stub(o, corev1ac.ExtractService, clusterIP(o.Spec.ClusterIP), digest)
	case *appsv1.StatefulSet:
		return stub(o, appsv1ac.ExtractStatefulSet, keepStatefulSet(o), digest)
	case *appsv1.Deployment:
		// FixSelector GETs the whole Deployment before it changes one.
		return stub(o, appsv1ac.ExtractDeployment, keepDeployment(o), digest)
	}
	return nil, nil
}

// digested keeps a custom resource whole but for its labels and
// managedFields: in their place, the digest of the fields this operator
// owns, which the materialize reconciler's no-op check compares, marked as
// a stub's is (the annotation, and no creation time). No reconciler reads
// a Balancer's or Console's labels or creation time; their own
// reconcilers' status checks read the status (apply.Status). When the
// owned fields cannot be extracted, only this operator's entries are kept.
func digested[T metav1.Object, AC any](o T, extract func(T, string) (AC, error)) any {
	if _, cached := apply.CachedDigest(o); cached {
		// Informers may transform what they hold again; an object from
		// the API server has a creation time.
		return o
	}
	withoutDigest(o)
	digest, err := ownedDigest(o, extract)
	if err != nil {
		return dropOtherManagers(o)
	}
	o.SetManagedFields(nil)
	o.SetCreationTimestamp(metav1.Time{})
	// Their reconcilers label children from the name and resource id.
	o.SetLabels(nil)
	annotations := o.GetAnnotations()
	if annotations == nil {
		annotations = make(map[string]string, 1)
	}
	annotations[apply.OwnedDigestAnnotation] = digest
	o.SetAnnotations(annotations)
	return o
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

// stub returns the Stub of live: the metadata the reconcilers read
// (identity, ownership, deletion), the digest of the fields this operator
// owns in live, and kept of its kind; an error when the owned fields
// cannot be extracted.
func stub[T metav1.Object, AC any](live T, extract func(T, string) (AC, error), kept any, digest string) (*Stub, error) {
	if digest == "" {
		var err error
		if digest, err = ownedDigest(live, extract); err != nil {
			return nil, err
		}
	}
	return newStub(live, digest, kept)
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
// this operator's (kube-controller-manager's status updates, a user's
// kubectl) and this operator's of the status subresource: its no-op checks
// extract the main resource's fields, and compare a status with the status.
func dropOtherManagers(obj any) any {
	o, err := meta.Accessor(obj)
	if err != nil {
		return obj
	}
	entries := o.GetManagedFields()
	kept := entries[:0]
	for _, e := range entries {
		if e.Manager == apply.FieldManager && e.Subresource == "" {
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
