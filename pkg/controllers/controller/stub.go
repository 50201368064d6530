package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
)

// Stub is a child object as the informers cache it (TrimForCache): the
// metadata the reconcilers read, the digest of the fields this operator
// owns, and the few fields of its kind the reconcilers read. It is a
// metav1.Object of 144 bytes where a Deployment is a 1.2 KB Go struct
// (mostly its empty pod template): its owner references are interned (the
// 17 or so children of a Materialize share one), as is its namespace, and
// the digest is kept as bytes. A Lister rebuilds the typed object on each
// read, so the reconcilers see the types they always did. Setting a field
// a stub does not keep (annotations, finalizers, managedFields, labels but
// a NetworkPolicy's resource id) does nothing.
type Stub struct {
	name            string
	namespace       unique.Handle[string]
	uid             types.UID
	resourceVersion string
	generation      int64
	owners          []unique.Handle[ownerReference]
	deletion        *metav1.Time
	// ownedDigest is apply.OwnedDigest of the whole object: the rebuilt
	// object carries it, hex-encoded, as apply.OwnedDigestAnnotation.
	ownedDigest [sha256.Size]byte
	// What its kind keeps: a clusterIP (a Service: component.FixHeadless
	// tells a headless one), a resourceID (a NetworkPolicy, which the
	// reconciler lists by that label), *deploymentFields or
	// *appsv1.StatefulSetStatus.
	kept any
}

// clusterIP is a Service's spec.clusterIP.
type clusterIP string

// resourceID is a NetworkPolicy's children.ResourceIDLabel.
type resourceID string

// deploymentFields are what the reconcilers read of a Deployment: its
// selector (component.FixSelector), replicas (the rollout wait), rollout
// and readiness (rolledOut, component.ReadyFromDeployment).
type deploymentFields struct {
	// matchLabels are the selector's matchLabels as sorted key, value
	// pairs (a map is some 300 bytes more); selector is the whole
	// selector when it has matchExpressions.
	matchLabels []string
	selector    *metav1.LabelSelector
	replicas    *int32
	status      appsv1.DeploymentStatus
}

// ownerReference is a metav1.OwnerReference as a comparable value, which
// unique interns.
type ownerReference struct {
	apiVersion, kind, name         string
	uid                            types.UID
	controller, blockOwnerDeletion optionalBool
}

type optionalBool uint8

const (
	unset optionalBool = iota
	isFalse
	isTrue
)

func optional(b *bool) optionalBool {
	switch {
	case b == nil:
		return unset
	case *b:
		return isTrue
	default:
		return isFalse
	}
}

func (o optionalBool) pointer() *bool {
	if o == unset {
		return nil
	}
	b := o == isTrue
	return &b
}

func internOwners(refs []metav1.OwnerReference) []unique.Handle[ownerReference] {
	if len(refs) == 0 {
		return nil
	}
	owners := make([]unique.Handle[ownerReference], len(refs))
	for i, r := range refs {
		owners[i] = unique.Make(ownerReference{
			apiVersion: r.APIVersion, kind: r.Kind, name: r.Name, uid: r.UID,
			controller: optional(r.Controller), blockOwnerDeletion: optional(r.BlockOwnerDeletion),
		})
	}
	return owners
}

// newStub is the stub of live, whose owned fields digest to the
// hex-encoded ownedDigest, keeping kept of its kind.
func newStub(live metav1.Object, ownedDigest string, kept any) (*Stub, error) {
	s := &Stub{
		name:            live.GetName(),
		namespace:       unique.Make(live.GetNamespace()),
		uid:             live.GetUID(),
		resourceVersion: live.GetResourceVersion(),
		generation:      live.GetGeneration(),
		owners:          internOwners(live.GetOwnerReferences()),
		deletion:        live.GetDeletionTimestamp(),
		kept:            kept,
	}
	if n, err := hex.Decode(s.ownedDigest[:], []byte(ownedDigest)); err != nil || n != sha256.Size {
		return nil, fmt.Errorf("owned fields digest %q is not a hex SHA-256", ownedDigest)
	}
	return s, nil
}

// meta is the rebuilt object's metadata, annotated with the digest. Its
// maps and slices are its own; the pointers it shares with the cache (the
// deletion time here, a selector with expressions, a status's counters)
// must not be written through, as no reconciler does.
func (s *Stub) meta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              s.name,
		Namespace:         s.GetNamespace(),
		UID:               s.uid,
		ResourceVersion:   s.resourceVersion,
		Generation:        s.generation,
		OwnerReferences:   s.GetOwnerReferences(),
		DeletionTimestamp: s.deletion,
		Labels:            s.GetLabels(),
		Annotations:       map[string]string{apply.OwnedDigestAnnotation: hex.EncodeToString(s.ownedDigest[:])},
	}
}

// A Stub is a metav1.Object, as the informers' key functions and the
// reconcilers' event handlers read it.

func (s *Stub) GetNamespace() string          { return s.namespace.Value() }
func (s *Stub) SetNamespace(namespace string) { s.namespace = unique.Make(namespace) }
func (s *Stub) GetName() string               { return s.name }
func (s *Stub) SetName(name string)           { s.name = name }
func (s *Stub) GetGenerateName() string       { return "" }
func (s *Stub) SetGenerateName(string)        {}
func (s *Stub) GetUID() types.UID             { return s.uid }
func (s *Stub) SetUID(uid types.UID)          { s.uid = uid }
func (s *Stub) GetResourceVersion() string    { return s.resourceVersion }
func (s *Stub) SetResourceVersion(v string)   { s.resourceVersion = v }
func (s *Stub) GetGeneration() int64          { return s.generation }
func (s *Stub) SetGeneration(g int64)         { s.generation = g }
func (s *Stub) GetSelfLink() string           { return "" }
func (s *Stub) SetSelfLink(string)            {}

// A stub has no creation time: apply.CachedDigest tells a rebuilt object
// from one the API server sent by it.
func (s *Stub) GetCreationTimestamp() metav1.Time               { return metav1.Time{} }
func (s *Stub) SetCreationTimestamp(metav1.Time)                {}
func (s *Stub) GetDeletionTimestamp() *metav1.Time              { return s.deletion }
func (s *Stub) SetDeletionTimestamp(t *metav1.Time)             { s.deletion = t }
func (s *Stub) GetDeletionGracePeriodSeconds() *int64           { return nil }
func (s *Stub) SetDeletionGracePeriodSeconds(*int64)            {}
func (s *Stub) GetAnnotations() map[string]string               { return nil }
func (s *Stub) SetAnnotations(map[string]string)                {}
func (s *Stub) GetFinalizers() []string                         { return nil }
func (s *Stub) SetFinalizers([]string)                          {}
func (s *Stub) GetManagedFields() []metav1.ManagedFieldsEntry   { return nil }
func (s *Stub) SetManagedFields([]metav1.ManagedFieldsEntry)    {}
func (s *Stub) SetOwnerReferences(refs []metav1.OwnerReference) { s.owners = internOwners(refs) }

func (s *Stub) GetOwnerReferences() []metav1.OwnerReference {
	if len(s.owners) == 0 {
		return nil
	}
	refs := make([]metav1.OwnerReference, len(s.owners))
	for i, h := range s.owners {
		o := h.Value()
		refs[i] = metav1.OwnerReference{
			APIVersion: o.apiVersion, Kind: o.kind, Name: o.name, UID: o.uid,
			Controller: o.controller.pointer(), BlockOwnerDeletion: o.blockOwnerDeletion.pointer(),
		}
	}
	return refs
}

// GetLabels returns a NetworkPolicy's resource id label, the only label a
// stub keeps.
func (s *Stub) GetLabels() map[string]string {
	if id, ok := s.kept.(resourceID); ok {
		return map[string]string{children.ResourceIDLabel: string(id)}
	}
	return nil
}

// SetLabels keeps a NetworkPolicy stub's resource id label, or drops it;
// it cannot give one to a stub that had none.
func (s *Stub) SetLabels(labels map[string]string) {
	if _, ok := s.kept.(resourceID); ok {
		s.kept = nil
		if id, ok := labels[children.ResourceIDLabel]; ok {
			s.kept = resourceID(id)
		}
	}
}

func keepDeployment(d *appsv1.Deployment) *deploymentFields {
	f := &deploymentFields{replicas: d.Spec.Replicas, status: d.Status}
	// Readiness reads the Available condition (status, reason, message);
	// the rollout wait reads the counts and the observed generation.
	f.status.Conditions = nil
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			f.status.Conditions = []appsv1.DeploymentCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}}
		}
	}
	switch sel := d.Spec.Selector; {
	case sel == nil:
	case len(sel.MatchExpressions) > 0:
		f.selector = sel
	default:
		f.matchLabels = make([]string, 0, 2*len(sel.MatchLabels))
		for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
			f.matchLabels = append(f.matchLabels, k, sel.MatchLabels[k])
		}
	}
	return f
}

func (f *deploymentFields) deployment(meta metav1.ObjectMeta) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Selector: f.selector}, Status: f.status}
	if f.replicas != nil {
		replicas := *f.replicas
		d.Spec.Replicas = &replicas
	}
	if f.matchLabels != nil {
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: make(map[string]string, len(f.matchLabels)/2)}
		for i := 0; i < len(f.matchLabels); i += 2 {
			d.Spec.Selector.MatchLabels[f.matchLabels[i]] = f.matchLabels[i+1]
		}
	}
	d.Status.Conditions = slices.Clone(f.status.Conditions)
	return d
}

// keepStatefulSet keeps what readiness reads: no conditions.
func keepStatefulSet(sts *appsv1.StatefulSet) *appsv1.StatefulSetStatus {
	s := sts.Status
	s.Conditions = nil
	return &s
}

// Lister reads one kind of child from its informer's cache, as the typed
// object: a stub rebuilt, or the whole object that TrimForCache kept when
// it could not make a stub. The objects must not be changed.
type Lister[T metav1.Object] struct {
	informer cache.SharedIndexInformer
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

// Slim is obj, which this operator has just applied, as the informer will
// cache it, with ownedDigest (apply.Digest of what was applied) as the
// digest of the fields it owns: a reconciler that remembers its write
// until the informer has it (recent.Writes) holds no more than the cache
// will, and extracts nothing. obj is not changed; a kind the informers
// keep whole is returned as it is.
func (n NamespaceLister[T]) Slim(obj T, ownedDigest string) T {
	if s, err := stubOf(obj, ownedDigest); err == nil && s != nil {
		return n.l.rebuild(s)
	}
	return obj
}

// List returns the children whose labels match selector, by a scan of
// every cached child of the kind (the informers keep no namespace index;
// a stub keeps no labels but a NetworkPolicy's resource id).
func (n NamespaceLister[T]) List(selector labels.Selector) ([]T, error) {
	var out []T
	err := cache.ListAllByNamespace(n.l.indexer, n.namespace, selector, func(obj any) {
		out = append(out, n.l.typed(obj))
	})
	return out, err
}

// WithResourceID returns the children in the namespace labelled with
// resource id id, from the informer's resourceIDIndex, without a scan of
// the namespace's, which may hold thousands of environments' children.
// Only NetworkPolicyLister's informer has the index (other kinds: an
// error).
func (n NamespaceLister[T]) WithResourceID(id string) ([]T, error) {
	objs, err := n.l.indexer.ByIndex(resourceIDIndex, n.namespace+"/"+id)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, obj := range objs {
		out = append(out, n.l.typed(obj))
	}
	return out, nil
}

// resourceIDIndex indexes children by namespace and resource id label.
const resourceIDIndex = "namespace/resourceId"

// EnsureIndex adds the index name to inf unless it has it already: the
// factory hands out one informer per kind, made by whoever asked first,
// which may lack it. Only a stopped informer refuses.
func EnsureIndex(inf cache.SharedIndexInformer, name string, index cache.IndexFunc) error {
	if _, ok := inf.GetIndexer().GetIndexers()[name]; ok {
		return nil
	}
	return inf.AddIndexers(cache.Indexers{name: index})
}

func indexByResourceID(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	id, ok := m.GetLabels()[children.ResourceIDLabel]
	if !ok {
		return nil, nil
	}
	return []string{m.GetNamespace() + "/" + id}, nil
}

// Informer is the informer the Lister reads, for event handlers and
// HasSynced.
func (l Lister[T]) Informer() cache.SharedIndexInformer { return l.informer }

func (l Lister[T]) typed(obj any) T {
	if s, ok := obj.(*Stub); ok {
		return l.rebuild(s)
	}
	return obj.(T)
}

func newLister[T metav1.Object](inf cache.SharedIndexInformer, resource schema.GroupResource, rebuild func(*Stub) T) Lister[T] {
	return Lister[T]{informer: inf, indexer: inf.GetIndexer(), resource: resource, rebuild: rebuild}
}

// The listers of the children, over f's informers, whose transform makes
// the stubs. None keeps the namespace index; NetworkPolicies, which the
// reconciler lists, are indexed by resource id.

func DeploymentLister(f *ChildInformers) Lister[*appsv1.Deployment] {
	return newLister(childInformer(f, &appsv1.Deployment{}, f.kube.AppsV1().Deployments(metav1.NamespaceAll), nil), appsv1.Resource("deployments"), func(s *Stub) *appsv1.Deployment {
		if f, ok := s.kept.(*deploymentFields); ok {
			return f.deployment(s.meta())
		}
		return &appsv1.Deployment{ObjectMeta: s.meta()}
	})
}

func StatefulSetLister(f *ChildInformers) Lister[*appsv1.StatefulSet] {
	return newLister(childInformer(f, &appsv1.StatefulSet{}, f.kube.AppsV1().StatefulSets(metav1.NamespaceAll), nil), appsv1.Resource("statefulsets"), func(s *Stub) *appsv1.StatefulSet {
		sts := &appsv1.StatefulSet{ObjectMeta: s.meta()}
		if status, ok := s.kept.(*appsv1.StatefulSetStatus); ok {
			sts.Status = *status
		}
		return sts
	})
}

func ServiceLister(f *ChildInformers) Lister[*corev1.Service] {
	return newLister(childInformer(f, &corev1.Service{}, f.kube.CoreV1().Services(metav1.NamespaceAll), nil), corev1.Resource("services"), func(s *Stub) *corev1.Service {
		ip, _ := s.kept.(clusterIP)
		return &corev1.Service{ObjectMeta: s.meta(), Spec: corev1.ServiceSpec{ClusterIP: string(ip)}}
	})
}

func ConfigMapLister(f *ChildInformers) Lister[*corev1.ConfigMap] {
	return newLister(childInformer(f, &corev1.ConfigMap{}, f.kube.CoreV1().ConfigMaps(metav1.NamespaceAll), nil), corev1.Resource("configmaps"), func(s *Stub) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: s.meta()}
	})
}

func ServiceAccountLister(f *ChildInformers) Lister[*corev1.ServiceAccount] {
	return newLister(childInformer(f, &corev1.ServiceAccount{}, f.kube.CoreV1().ServiceAccounts(metav1.NamespaceAll), nil), corev1.Resource("serviceaccounts"), func(s *Stub) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: s.meta()}
	})
}

func RoleBindingLister(f *ChildInformers) Lister[*rbacv1.RoleBinding] {
	return newLister(childInformer(f, &rbacv1.RoleBinding{}, f.kube.RbacV1().RoleBindings(metav1.NamespaceAll), nil), rbacv1.Resource("rolebindings"), func(s *Stub) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: s.meta()}
	})
}

// NetworkPolicyLister's informer is indexed by resource id alone: the
// reconciler lists a Materialize's policies (WithResourceID).
func NetworkPolicyLister(f *ChildInformers) Lister[*networkingv1.NetworkPolicy] {
	inf := childInformer(f, &networkingv1.NetworkPolicy{}, f.kube.NetworkingV1().NetworkPolicies(metav1.NamespaceAll),
		cache.Indexers{resourceIDIndex: indexByResourceID})
	return newLister(inf, networkingv1.Resource("networkpolicies"), func(s *Stub) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: s.meta()}
	})
}
