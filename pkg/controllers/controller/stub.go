package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
)

// Stub is a child object as the informers cache it (TrimForCache): the
// metadata the reconcilers read, the digest of the fields this operator
// owns, and the few fields of its kind the reconcilers read. It is about a
// quarter of the typed object it stands for (a Deployment is a 1.2 KB Go
// struct, mostly its empty pod template); a Lister rebuilds that object
// on each read, so the reconcilers see the types they always did.
type Stub struct {
	metav1.ObjectMeta
	// OwnedDigest is apply.OwnedDigest of the whole object: the rebuilt
	// object carries it as apply.OwnedDigestAnnotation.
	OwnedDigest string
	// ClusterIP tells a headless Service (component.FixHeadless).
	ClusterIP string
	// A Deployment's selector (component.FixSelector) and replicas (the
	// rollout wait).
	Selector *metav1.LabelSelector
	Replicas *int32
	// A Deployment's rollout and readiness (rolledOut,
	// component.ReadyFromDeployment), a StatefulSet's readiness
	// (materialize's statefulSetReady).
	DeploymentStatus  *appsv1.DeploymentStatus
	StatefulSetStatus *appsv1.StatefulSetStatus
}

// meta is the rebuilt object's metadata: the stub's, annotated with the
// digest (a map of its own, so a reader cannot change the cache's).
func (s *Stub) meta() metav1.ObjectMeta {
	m := s.ObjectMeta
	m.Annotations = map[string]string{apply.OwnedDigestAnnotation: s.OwnedDigest}
	return m
}

// deploymentStatus keeps what the rollout wait and readiness read: the
// counts, the observed generation and the Available condition.
func deploymentStatus(s appsv1.DeploymentStatus) *appsv1.DeploymentStatus {
	var available []appsv1.DeploymentCondition
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			available = []appsv1.DeploymentCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}}
		}
	}
	s.Conditions = available
	return &s
}

// statefulSetStatus keeps what readiness reads: no conditions.
func statefulSetStatus(s appsv1.StatefulSetStatus) *appsv1.StatefulSetStatus {
	s.Conditions = nil
	return &s
}

// Lister reads one kind of child from its informer's cache, as the typed
// object: a stub rebuilt, or the whole object that TrimForCache kept when
// it could not make a stub. The objects must not be changed.
type Lister[T metav1.Object] struct {
	indexer  cache.Indexer
	resource schema.GroupResource
	rebuild  func(*Stub) T
}

// In reads the children in namespace.
func (l Lister[T]) In(namespace string) NamespaceLister[T] {
	return NamespaceLister[T]{l: l, namespace: namespace}
}

// NamespaceLister reads one namespace's children of one kind.
type NamespaceLister[T metav1.Object] struct {
	l         Lister[T]
	namespace string
}

// Get returns the named child, or a NotFound error as a typed lister does.
func (n NamespaceLister[T]) Get(name string) (T, error) {
	obj, exists, err := n.l.indexer.GetByKey(n.namespace + "/" + name)
	if err != nil {
		return *new(T), err
	}
	if !exists {
		return *new(T), errors.NewNotFound(n.l.resource, name)
	}
	return n.l.typed(obj), nil
}

// List returns the children whose labels match selector (a stub keeps
// labels only where a reconciler lists by them: NetworkPolicies).
func (n NamespaceLister[T]) List(selector labels.Selector) ([]T, error) {
	var out []T
	err := cache.ListAllByNamespace(n.l.indexer, n.namespace, selector, func(obj any) {
		out = append(out, n.l.typed(obj))
	})
	return out, err
}

func (l Lister[T]) typed(obj any) T {
	if s, ok := obj.(*Stub); ok {
		return l.rebuild(s)
	}
	return obj.(T)
}

func newLister[T metav1.Object](inf cache.SharedIndexInformer, resource schema.GroupResource, rebuild func(*Stub) T) Lister[T] {
	return Lister[T]{indexer: inf.GetIndexer(), resource: resource, rebuild: rebuild}
}

// The listers of the children, over f's informers (which must have been
// made by NewInformerFactories, whose transform makes the stubs).

func DeploymentLister(f informers.SharedInformerFactory) Lister[*appsv1.Deployment] {
	return newLister(f.Apps().V1().Deployments().Informer(), appsv1.Resource("deployments"), func(s *Stub) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: s.meta(), Spec: appsv1.DeploymentSpec{Selector: s.Selector, Replicas: s.Replicas}}
		if s.DeploymentStatus != nil {
			d.Status = *s.DeploymentStatus
		}
		return d
	})
}

func StatefulSetLister(f informers.SharedInformerFactory) Lister[*appsv1.StatefulSet] {
	return newLister(f.Apps().V1().StatefulSets().Informer(), appsv1.Resource("statefulsets"), func(s *Stub) *appsv1.StatefulSet {
		sts := &appsv1.StatefulSet{ObjectMeta: s.meta()}
		if s.StatefulSetStatus != nil {
			sts.Status = *s.StatefulSetStatus
		}
		return sts
	})
}

func ServiceLister(f informers.SharedInformerFactory) Lister[*corev1.Service] {
	return newLister(f.Core().V1().Services().Informer(), corev1.Resource("services"), func(s *Stub) *corev1.Service {
		return &corev1.Service{ObjectMeta: s.meta(), Spec: corev1.ServiceSpec{ClusterIP: s.ClusterIP}}
	})
}

func ConfigMapLister(f informers.SharedInformerFactory) Lister[*corev1.ConfigMap] {
	return newLister(f.Core().V1().ConfigMaps().Informer(), corev1.Resource("configmaps"), func(s *Stub) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: s.meta()}
	})
}

func ServiceAccountLister(f informers.SharedInformerFactory) Lister[*corev1.ServiceAccount] {
	return newLister(f.Core().V1().ServiceAccounts().Informer(), corev1.Resource("serviceaccounts"), func(s *Stub) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: s.meta()}
	})
}

func RoleLister(f informers.SharedInformerFactory) Lister[*rbacv1.Role] {
	return newLister(f.Rbac().V1().Roles().Informer(), rbacv1.Resource("roles"), func(s *Stub) *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: s.meta()}
	})
}

func RoleBindingLister(f informers.SharedInformerFactory) Lister[*rbacv1.RoleBinding] {
	return newLister(f.Rbac().V1().RoleBindings().Informer(), rbacv1.Resource("rolebindings"), func(s *Stub) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: s.meta()}
	})
}

func NetworkPolicyLister(f informers.SharedInformerFactory) Lister[*networkingv1.NetworkPolicy] {
	return newLister(f.Networking().V1().NetworkPolicies().Informer(), networkingv1.Resource("networkpolicies"), func(s *Stub) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: s.meta()}
	})
}
