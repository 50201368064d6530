// Package component holds what the Deployment-based components (balancerd,
// the console) share: the Ready condition mirrored from a Deployment,
// events on transitions, the owning custom resource's loading and status
// writes (Owner), their child objects (Child, Workload) and fix-ups.
package component

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/recent"
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

// Child is one child object of a component and the means to apply it:
// Desired is applied through apply.Object, so that nothing is written when
// the object already holds it.
type Child[T metav1.Object, AC any] struct {
	Kind, Name string
	Desired    AC
	Cached     func(name string) (T, error)
	// Slim is an object as the informer caches it (Cache.Slim), which is
	// what Apply remembers of its write.
	Slim    func(obj T, ownedDigest string) T
	Get     func(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Extract func(T, string) (AC, error)
	Write   func(ctx context.Context, ac AC, opts metav1.ApplyOptions) (T, error)
}

// Cache is a child kind's informer cache in one namespace
// (controller.NamespaceLister).
type Cache[T any] interface {
	Get(name string) (T, error)
	Slim(obj T, ownedDigest string) T
}

// Apply applies Desired unless the object already holds it, remembers what
// it wrote in r under ownerKey, and returns the object as it now is. It
// refuses an object that another owner controls.
func (c Child[T, AC]) Apply(ctx context.Context, r *recent.Writes, owner metav1.Object, ownerKey string) (T, error) {
	_, _, now, err := c.Change(ctx, r, owner, ownerKey)
	return now, err
}

// Change is Apply, returning also the object as it was before (existed:
// there was one), as the cache or this controller's last write knew it.
func (c Child[T, AC]) Change(ctx context.Context, r *recent.Writes, owner metav1.Object, ownerKey string) (before T, existed bool, now T, err error) {
	var zero T
	live, err := c.Cached(c.Name)
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return zero, false, zero, err
	}
	key := c.Kind + "/" + c.Name
	live, found, err = recent.Current(ctx, r, ownerKey, key, live, found, func(ctx context.Context) (T, error) {
		return c.Get(ctx, c.Name, metav1.GetOptions{})
	})
	if err != nil {
		return zero, false, zero, err
	}
	if found {
		if ref := metav1.GetControllerOfNoCopy(live); ref != nil && ref.UID != owner.GetUID() {
			return zero, false, zero, fmt.Errorf("%s %s/%s is controlled by %s %s (uid %s), not by this object",
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
		return zero, false, zero, fmt.Errorf("applying %s %s: %w", c.Kind, c.Name, err)
	}
	if !wrote {
		return live, found, live, nil
	}
	remembered := out
	if digest, err := apply.Digest(c.Desired); err == nil && c.Slim != nil {
		// Until the informer has it, the object holds what was applied.
		remembered = c.Slim(out, digest)
	}
	r.Put(ownerKey, key, remembered)
	return live, found, out, nil
}

// ChildClient is the part of a child kind's typed client that Child uses,
// e.g. kube.AppsV1().Deployments(namespace).
type ChildClient[T, AC any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Apply(ctx context.Context, ac AC, opts metav1.ApplyOptions) (T, error)
}

// NewChild is the child object of the given kind and name, applied as
// desired through client and read from the informer's cache.
func NewChild[T metav1.Object, AC any](kind, name string, desired AC, cache Cache[T],
	client ChildClient[T, AC], extract func(T, string) (AC, error),
) Child[T, AC] {
	return Child[T, AC]{
		Kind: kind, Name: name, Desired: desired,
		Cached: cache.Get, Slim: cache.Slim, Get: client.Get, Extract: extract, Write: client.Apply,
	}
}
