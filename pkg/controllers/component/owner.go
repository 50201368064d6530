package component

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	mzac "github.com/materializeinc/orchestratord/pkg/client/applyconfiguration/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/recent"
	"github.com/materializeinc/orchestratord/pkg/controllers/unreadable"
)

// Object is a component custom resource (*v1alpha1.Balancer,
// *v1alpha1.Console): it has metadata and Events can be recorded about it.
type Object interface {
	metav1.Object
	runtime.Object
}

// StatusApplyConfiguration is what the status writes set on a component's
// apply configuration; the generated types of every kind have these methods.
type StatusApplyConfiguration[AC any] interface {
	WithResourceVersion(string) AC
	WithStatus(*mzac.ComponentStatusApplyConfiguration) AC
}

// StatusClient is the part of a kind's typed client that the status writes
// use; the generated clients (Balancers(ns), Consoles(ns)) satisfy it.
type StatusClient[T Object, AC any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	ApplyStatus(ctx context.Context, ac AC, opts metav1.ApplyOptions) (T, error)
	apply.Patcher[T]
}

// Kind describes one kind of component custom resource. The kinds share the
// status type (v1alpha1.ComponentStatus) but not their Go types, so the
// status code reaches them through these functions.
type Kind[T Object, AC StatusApplyConfiguration[AC]] struct {
	// App is the component's program ("balancerd", "console"), as the
	// Ready condition's message names it.
	App string
	// Status returns the object's status.
	Status func(T) v1alpha1.ComponentStatus
	// SpecResourceID returns the object's spec.resourceId.
	SpecResourceID func(T) string
	// ApplyConfiguration starts an apply configuration of the named object
	// (mzac.Balancer, mzac.Console).
	ApplyConfiguration func(name, namespace string) AC
	// Client is the kind's typed client in a namespace.
	Client func(namespace string) StatusClient[T, AC]
	// TypeMeta is the kind's apiVersion and kind, for raw applies.
	TypeMeta metav1.TypeMeta
}

// Owner is a reconciler's access to the component custom resource that owns
// the children: loading it, and writing its status (resource id and Ready
// condition).
type Owner[T Object, AC StatusApplyConfiguration[AC]] struct {
	Kind     Kind[T, AC]
	Recent   *recent.Writes
	Recorder record.EventRecorder
	// QuietFor is how long an object without a Ready condition gets none
	// while its Deployment is not available, from when this reconciler
	// first saw it so (see WriteReady); zero or negative: at once.
	QuietFor time.Duration
	quiet    *quietSince
}

// DefaultQuietFor is the components' QuietFor: as long as the materialize
// reconciler's first rollout keeps its status quiet (the same figure,
// WaitingAfter's default).
const DefaultQuietFor = 20 * time.Second

// NewOwner returns an Owner without the caller spelling out the type
// arguments. A nil recorder (tests that do not look at Events) drops them.
// quietFor zero is DefaultQuietFor, negative none.
func NewOwner[T Object, AC StatusApplyConfiguration[AC]](kind Kind[T, AC], writes *recent.Writes, recorder record.EventRecorder, quietFor time.Duration) Owner[T, AC] {
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	if quietFor == 0 {
		quietFor = DefaultQuietFor
	}
	return Owner[T, AC]{Kind: kind, Recent: writes, Recorder: recorder, QuietFor: quietFor,
		quiet: &quietSince{since: map[string]time.Time{}}}
}

// quietSince records when each object without a Ready condition was first
// seen so. (The informers' copies carry no creation time: the cache trims
// it.) An entry lives until the object's first Ready is written or the
// object is gone, so it holds at most one entry per object.
type quietSince struct {
	mu    sync.Mutex
	since map[string]time.Time
}

// start returns when key was first seen without a Ready condition,
// recording now if it was not.
func (q *quietSince) start(key string, now time.Time) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t, ok := q.since[key]; ok {
		return t
	}
	q.since[key] = now
	return now
}

func (q *quietSince) forget(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.since, key)
}

// Load returns the newest known state of the object with key (see
// recent.Current), read first from cached (the informer's lister). found is false
// when there is nothing to reconcile: the key is malformed, which retrying
// cannot fix, or the object is gone, whose children garbage collection
// removes through their owner references.
func (o Owner[T, AC]) Load(ctx context.Context, key string, cached func(namespace, name string) (T, error)) (cr T, found bool, err error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return cr, false, nil
	}
	cr, err = cached(ns, name)
	if apierrors.IsNotFound(err) {
		o.Recent.Forget(key)
		o.quiet.forget(key)
		return cr, false, nil
	}
	if err != nil {
		return cr, false, err
	}
	if why, ok := unreadable.Reason(cr); ok {
		// Its children are left as they are until it is fixed, whose
		// update queues it again.
		unreadable.Report(o.Recorder, cr, why)
		return cr, false, nil
	}
	cr, _, _ = recent.Current(ctx, o.Recent, key, "", cr, true, nil)
	return cr, true, nil
}

// ResourceID returns the id in the children's names: status.resourceId,
// else spec.resourceId, else a random one, written to status before any
// child is created. The assignment reads the object from the API server and
// applies with its resourceVersion, so a stale cache cannot assign twice.
// An id the spec names (the materialize reconciler names its own) is the
// same for every writer, so it is not written on its own: WriteReady
// records it with the first Ready condition, one status write and one
// read fewer per object.
func (o Owner[T, AC]) ResourceID(ctx context.Context, key string, cr T) (T, string, error) {
	var zero T
	if id := o.Kind.Status(cr).ResourceID; id != "" {
		return cr, id, nil
	}
	if id := o.Kind.SpecResourceID(cr); id != "" {
		return cr, id, nil
	}
	client := o.Kind.Client(cr.GetNamespace())
	live, err := client.Get(ctx, cr.GetName(), metav1.GetOptions{})
	if err != nil {
		return zero, "", err
	}
	liveStatus := o.Kind.Status(live)
	if liveStatus.ResourceID != "" {
		return live, liveStatus.ResourceID, nil
	}
	id := o.Kind.SpecResourceID(live)
	if id == "" {
		id = children.NewResourceID()
	}
	// Both fields upstream's status type requires, conditions: [] included.
	conditions := []metav1.Condition{}
	if c := meta.FindStatusCondition(liveStatus.Conditions, ReadyCondition); c != nil {
		conditions = append(conditions, *c) // keep the condition this manager owns
	}
	object := metav1.ObjectMeta{Name: live.GetName(), Namespace: live.GetNamespace(), ResourceVersion: live.GetResourceVersion()}
	out, err := apply.InitialStatus(ctx, client, o.Kind.TypeMeta, object, map[string]any{"resourceId": id, "conditions": conditions})
	if err != nil {
		return zero, "", fmt.Errorf("writing status.resourceId: %w", err)
	}
	o.Recent.Put(key, "", out)
	o.Recorder.Eventf(out, corev1.EventTypeNormal, "ResourceIDAssigned", "Child objects are named mz%s-…", id)
	return out, id, nil
}

// WriteReady writes the Ready condition mirrored from dep, when it changed,
// and emits an Event when its status changed. An object's first Ready
// condition waits, while it would be False, until the Deployment is
// available or this reconciler has seen the object without one for
// QuietFor: a new object whose Deployment becomes available in that time
// costs one status write, not two. (Upstream writes nothing only until the
// Deployment reports a condition, then False, then True.) recheck is when
// to come back for the write held back.
func (o Owner[T, AC]) WriteReady(ctx context.Context, key string, cr T, id string, dep *appsv1.Deployment) (recheck time.Duration, err error) {
	status := o.Kind.Status(cr)
	prev := meta.FindStatusCondition(status.Conditions, ReadyCondition)
	now := ReadyFromDeployment(dep, cr.GetGeneration(), o.Kind.App)
	if prev == nil && now.Status != metav1.ConditionTrue && o.QuietFor > 0 {
		at := time.Now()
		if left := o.QuietFor - at.Sub(o.quiet.start(key, at)); left > 0 {
			return left, nil
		}
	}
	o.quiet.forget(key)
	conds := append([]metav1.Condition(nil), status.Conditions...)
	meta.SetStatusCondition(&conds, now) // keeps lastTransitionTime unless the status changes
	ready := *meta.FindStatusCondition(conds, ReadyCondition)

	desired := o.Kind.ApplyConfiguration(cr.GetName(), cr.GetNamespace()).
		WithStatus(mzac.ComponentStatus().WithResourceID(id).WithConditions(apply.ConditionApplyConfiguration(ready)))
	out, wrote, err := o.apply(ctx, o.Kind.Client(cr.GetNamespace()), cr, desired)
	if err != nil {
		return 0, fmt.Errorf("writing status: %w", err)
	}
	if !wrote {
		return 0, nil
	}
	o.Recent.Put(key, "", out)
	if prev == nil || prev.Status != ready.Status {
		eventType, reason := TransitionEvent(prev, ready)
		o.Recorder.Eventf(out, eventType, reason, "Ready is %s: %s: %s", ready.Status, ready.Reason, ready.Message)
	}
	return 0, nil
}

// apply applies desired to the status subresource unless live already
// holds it, and returns the object the write returned.
func (o Owner[T, AC]) apply(ctx context.Context, client StatusClient[T, AC], live T, desired AC) (out T, wrote bool, err error) {
	wrote, err = apply.Status(ctx, live, desired, o.ownedStatus, func(ctx context.Context, ac AC, opts metav1.ApplyOptions) (T, error) {
		var err error
		out, err = client.ApplyStatus(ctx, ac, opts)
		return out, err
	})
	return out, wrote, err
}

// ownedStatus is the part of the live status this controller writes: the
// resource id and the Ready condition. Comparing it with the desired status
// (rather than the whole object) ignores fields of other writers and the
// object's empty TypeMeta in informer caches.
func (o Owner[T, AC]) ownedStatus(live T, _ string) (AC, error) {
	status := o.Kind.Status(live)
	st := mzac.ComponentStatus()
	if status.ResourceID != "" {
		st.WithResourceID(status.ResourceID)
	}
	if c := meta.FindStatusCondition(status.Conditions, ReadyCondition); c != nil {
		st.WithConditions(apply.ConditionApplyConfiguration(*c))
	}
	return o.Kind.ApplyConfiguration(live.GetName(), live.GetNamespace()).WithStatus(st), nil
}

// ListKeys returns the namespace/name keys of every object list returns
// (a lister's List), for the controller's resync.
func ListKeys[T metav1.Object](list func(labels.Selector) ([]T, error)) func() []string {
	return func() []string {
		all, err := list(labels.Everything())
		if err != nil {
			return nil
		}
		keys := make([]string, 0, len(all))
		for _, obj := range all {
			keys = append(keys, obj.GetNamespace()+"/"+obj.GetName())
		}
		return keys
	}
}

// MustAddEventHandler adds h to inf. Adding only fails once the informer
// has stopped, which a controller's constructor never sees.
func MustAddEventHandler(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) {
	if _, err := inf.AddEventHandler(h); err != nil {
		panic(fmt.Sprintf("adding event handler: %v", err))
	}
}
