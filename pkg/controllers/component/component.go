// Package component holds what the Deployment-based components (balancer,
// console) share: the Ready condition mirrored from a Deployment, events on
// transitions, the recently-written-object cache that guards against a stale
// informer, the owning custom resource's loading and status writes (Owner),
// and apply helpers.
package component

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
)

// ReadyCondition mirrors the Available condition of the component's Deployment.
const ReadyCondition = "Ready"

// Reasons of the Ready condition.
const (
	// ReasonDeploymentStatus: upstream's one reason, the Deployment's
	// Available condition mirrored (True only when it is True).
	ReasonDeploymentStatus = "DeploymentStatus"
	// ReasonDeploymentNotFound: the Deployment does not exist.
	ReasonDeploymentNotFound = "DeploymentNotFound"
	// ReasonReconciling: the Deployment has not reported availability yet.
	ReasonReconciling = "Reconciling"
)

// ReadyFromDeployment derives the Ready condition of a component (app:
// "balancerd", "console") from its Deployment (nil when it does not exist):
// upstream's reason and message from the Deployment's Available condition,
// True only when that is True; False, with this operator's reasons, while
// the Deployment does not exist or reports no availability (upstream writes
// nothing then).
func ReadyFromDeployment(dep *appsv1.Deployment, generation int64, app string) metav1.Condition {
	c := metav1.Condition{Type: ReadyCondition, ObservedGeneration: generation}
	if dep == nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonDeploymentNotFound, "the Deployment does not exist"
		return c
	}
	for _, dc := range dep.Status.Conditions {
		if dc.Type != appsv1.DeploymentAvailable {
			continue
		}
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonDeploymentStatus, app+" deployment is not ready"
		if dc.Status == corev1.ConditionTrue {
			c.Status, c.Message = metav1.ConditionTrue, app+" deployment is ready"
		}
		return c
	}
	c.Status, c.Reason = metav1.ConditionFalse, ReasonReconciling
	c.Message = fmt.Sprintf("waiting for Deployment %s to report availability", dep.Name)
	return c
}

// ConditionApplyConfiguration is c as an apply configuration; every field is
// set, so it compares equal to the same condition read back from the API
// server.
func ConditionApplyConfiguration(c metav1.Condition) *metav1ac.ConditionApplyConfiguration {
	return metav1ac.Condition().
		WithType(c.Type).WithStatus(c.Status).WithObservedGeneration(c.ObservedGeneration).
		WithLastTransitionTime(c.LastTransitionTime).WithReason(c.Reason).WithMessage(c.Message)
}

// TransitionEvent is the Event type and reason of a Ready transition.
func TransitionEvent(prev *metav1.Condition, now metav1.Condition) (eventType, reason string) {
	if now.Status == metav1.ConditionTrue {
		return corev1.EventTypeNormal, "Ready"
	}
	if prev != nil && prev.Status == metav1.ConditionTrue {
		return corev1.EventTypeWarning, "NotReady"
	}
	return corev1.EventTypeNormal, "NotReady"
}

// RecentWrites remembers objects as this controller's own writes returned
// them, per owner, so that a reconcile running before the informers have
// seen those writes neither repeats them nor, for status, computes a
// transition (and emits its Event) twice. An entry goes when the cache has
// caught up with it, when its owner is gone, or after recentWriteTTL: a
// write the informers never see (an object they do not watch, a key not
// looked up again) is not kept for ever.
type RecentWrites struct {
	mu   sync.Mutex
	objs map[string]map[string]recentWrite // owner key -> object key -> write
	// swept is when expired entries were last dropped.
	swept time.Time
	now   func() time.Time
}

type recentWrite struct {
	obj metav1.Object
	at  time.Time
}

// recentWriteTTL is how long a write is remembered: the informers see a
// write within seconds, and after a longer outage they list again.
const recentWriteTTL = 2 * time.Minute

// NewRecentWrites returns an empty RecentWrites.
func NewRecentWrites() *RecentWrites {
	return &RecentWrites{objs: map[string]map[string]recentWrite{}, now: time.Now}
}

// Put remembers obj, as a write of this controller returned it, under the
// owner's key and the object's key.
func (r *RecentWrites) Put(owner, key string, obj metav1.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.swept) > recentWriteTTL/2 {
		r.sweepLocked(now)
	}
	if r.objs[owner] == nil {
		r.objs[owner] = map[string]recentWrite{}
	}
	r.objs[owner][key] = recentWrite{obj: obj, at: now}
}

// sweepLocked drops the expired entries; run at most twice per TTL, so
// each Put costs amortised constant time.
func (r *RecentWrites) sweepLocked(now time.Time) {
	r.swept = now
	for owner, writes := range r.objs {
		for key, w := range writes {
			if now.Sub(w.at) > recentWriteTTL {
				delete(writes, key)
			}
		}
		if len(writes) == 0 {
			delete(r.objs, owner)
		}
	}
}

func (r *RecentWrites) get(owner, key string) (metav1.Object, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.objs[owner][key]
	if ok && r.now().Sub(w.at) > recentWriteTTL {
		return nil, false
	}
	return w.obj, ok
}

// Len is how many writes are remembered.
func (r *RecentWrites) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, writes := range r.objs {
		n += len(writes)
	}
	return n
}

func (r *RecentWrites) drop(owner, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.objs[owner], key)
	if len(r.objs[owner]) == 0 {
		delete(r.objs, owner)
	}
}

// Forget drops everything remembered for an owner that is gone.
func (r *RecentWrites) Forget(owner string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.objs, owner)
}

// Current returns the newest known state of an object: the informer's copy
// (cached, found) or the copy this controller last wrote, whichever has the
// later resourceVersion. When only the written copy is known, get asks the
// API server, since the object may have been deleted since.
func Current[T metav1.Object](ctx context.Context, r *RecentWrites, owner, key string, cached T, found bool,
	get func(context.Context) (T, error),
) (T, bool, error) {
	w, ok := r.get(owner, key)
	if !ok {
		return cached, found, nil
	}
	written := w.(T)
	if !found {
		live, err := get(ctx)
		switch {
		case apierrors.IsNotFound(err):
			r.drop(owner, key)
			return cached, false, nil
		case err != nil:
			return cached, false, err
		}
		cached = live
	}
	if cmp, err := resourceversion.CompareResourceVersion(written.GetResourceVersion(), cached.GetResourceVersion()); err == nil && cmp > 0 {
		return written, true, nil
	}
	r.drop(owner, key) // the cache has caught up
	return cached, true, nil
}

// Child is one child object of a component and the means to apply it:
// Desired is applied through apply.Object, so that nothing is written when
// the object already holds it.
type Child[T metav1.Object, AC any] struct {
	Kind, Name string
	Desired    AC
	Cached     func(name string) (T, error)
	Get        func(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Extract    func(T, string) (AC, error)
	Write      func(ctx context.Context, ac AC, opts metav1.ApplyOptions) (T, error)
}

// Apply applies Desired unless the object already holds it, remembers what
// it wrote in r under ownerKey, and returns the object as it now is. It
// refuses an object that another owner controls.
func (c Child[T, AC]) Apply(ctx context.Context, r *RecentWrites, owner metav1.Object, ownerKey string) (T, error) {
	var zero T
	live, err := c.Cached(c.Name)
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return zero, err
	}
	key := c.Kind + "/" + c.Name
	live, found, err = Current(ctx, r, ownerKey, key, live, found, func(ctx context.Context) (T, error) {
		return c.Get(ctx, c.Name, metav1.GetOptions{})
	})
	if err != nil {
		return zero, err
	}
	if found {
		if ref := metav1.GetControllerOfNoCopy(live); ref != nil && ref.UID != owner.GetUID() {
			return zero, fmt.Errorf("%s %s/%s is controlled by %s %s (uid %s), not by this object",
				c.Kind, live.GetNamespace(), c.Name, ref.Kind, ref.Name, ref.UID)
		}
	}
	var out T
	wrote, err := apply.Object(ctx, live, found, c.Desired, c.Extract,
		func(ctx context.Context, ac AC, opts metav1.ApplyOptions) (T, error) {
			obj, err := c.Write(ctx, ac, opts)
			out = obj
			return obj, err
		})
	if err != nil {
		return zero, fmt.Errorf("applying %s %s: %w", c.Kind, c.Name, err)
	}
	if !wrote {
		return live, nil
	}
	r.Put(ownerKey, key, out)
	return out, nil
}

// ChildClient is the part of a child kind's typed client that Child uses,
// e.g. kube.AppsV1().Deployments(namespace).
type ChildClient[T, AC any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Apply(ctx context.Context, ac AC, opts metav1.ApplyOptions) (T, error)
}

// NewChild is the child object of the given kind and name, applied as
// desired through client and read from the informer through cached (the
// lister's Get).
func NewChild[T metav1.Object, AC any](kind, name string, desired AC, cached func(name string) (T, error),
	client ChildClient[T, AC], extract func(T, string) (AC, error),
) Child[T, AC] {
	return Child[T, AC]{
		Kind: kind, Name: name, Desired: desired,
		Cached: cached, Get: client.Get, Extract: extract, Write: client.Apply,
	}
}
