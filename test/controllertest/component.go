package controllertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/component"
)

// CRClient is the part of a component kind's typed client that Kind uses;
// the generated clients (Balancers(ns), Consoles(ns)) satisfy it.
type CRClient[T any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Kind is how the tests reach one kind of component custom resource
// (Balancer, Console), whose Go types differ but whose status is the same.
type Kind[T metav1.Object] struct {
	// Client is the admin's client of the kind in a namespace.
	Client func(t *testing.T, namespace string) CRClient[T]
	// Status returns the object's status.
	Status func(T) v1alpha1.ComponentStatus
}

// Create creates obj and deletes it when the test ends.
func (k Kind[T]) Create(t *testing.T, obj T) T {
	t.Helper()
	client := k.Client(t, obj.GetNamespace())
	created, err := client.Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Deleting the CR stops this test's objects from being reconciled by
	// later tests' controllers (there is no garbage collector here).
	name := obj.GetName()
	t.Cleanup(func() { _ = client.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return created
}

// Get reads the named object from the API server.
func (k Kind[T]) Get(t *testing.T, namespace, name string) T {
	t.Helper()
	obj, err := k.Client(t, namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// WaitResourceID waits for status.resourceId.
func (k Kind[T]) WaitResourceID(t *testing.T, namespace, name string) string {
	t.Helper()
	var id string
	Eventually(t, "status.resourceId", func() error {
		id = k.Status(k.Get(t, namespace, name)).ResourceID
		if id == "" {
			return fmt.Errorf("no status.resourceId yet")
		}
		return nil
	})
	return id
}

// WaitReady waits for the Ready condition to have status, reason and the
// CR's current generation as observedGeneration.
func (k Kind[T]) WaitReady(t *testing.T, namespace, name string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	Eventually(t, fmt.Sprintf("Ready=%s/%s", status, reason), func() error {
		obj := k.Get(t, namespace, name)
		st := k.Status(obj)
		c := meta.FindStatusCondition(st.Conditions, component.ReadyCondition)
		if c == nil {
			return fmt.Errorf("no Ready condition in %+v", st)
		}
		got = *c
		if c.Status != status || c.Reason != reason || c.ObservedGeneration != obj.GetGeneration() {
			return fmt.Errorf("Ready is %s/%s observedGeneration %d (generation %d): %s",
				c.Status, c.Reason, c.ObservedGeneration, obj.GetGeneration(), c.Message)
		}
		return nil
	})
	return got
}

// ReadyFollowsDeployment checks that the CR's Ready condition mirrors its
// Deployment's Available condition (which the test sets: there is no
// kube-controller-manager) as upstream writes it: Reconciling first, then
// True/DeploymentStatus, then, whatever the Deployment's unavailable status
// and reason, False/DeploymentStatus; lastTransitionTime never goes back and
// each transition is one event.
func (k Kind[T]) ReadyFollowsDeployment(t *testing.T, ctrl *Running, namespace, name, deployment string, unavailable corev1.ConditionStatus, unavailableReason string) {
	t.Helper()
	notReady := k.WaitReady(t, namespace, name, metav1.ConditionFalse, component.ReasonReconciling)
	SetAvailable(t, namespace, deployment, corev1.ConditionTrue, "MinimumReplicasAvailable")
	ready := k.WaitReady(t, namespace, name, metav1.ConditionTrue, component.ReasonDeploymentStatus)
	if ready.LastTransitionTime.Before(&notReady.LastTransitionTime) {
		t.Errorf("lastTransitionTime went back: %v then %v", notReady.LastTransitionTime, ready.LastTransitionTime)
	}
	SetAvailable(t, namespace, deployment, unavailable, unavailableReason)
	k.WaitReady(t, namespace, name, metav1.ConditionFalse, component.ReasonDeploymentStatus)

	WaitQuiet(t, ctrl.UserAgent)
	wantEvents := []string{"ResourceIDAssigned", "NotReady", "Ready", "NotReady"}
	if got := ctrl.Events.Reasons(namespace, name); !slices.Equal(got, wantEvents) {
		t.Errorf("events %v, want %v (one per transition)", got, wantEvents)
	}
}

// FirstReadyIsQuiet checks a controller started with QuietFor quiet: a new
// object gets no Ready condition while its Deployment is not available, so
// one whose Deployment becomes available within quiet costs one status
// write for Ready (True), not two; one whose Deployment does not gets
// Ready=False once the controller has seen it for quiet (it sees a new
// object at once, so no earlier than quiet after its creation). create makes a new object of the kind
// (with no spec.resourceId) named as given; deployment names its
// Deployment from its resource id.
func (k Kind[T]) FirstReadyIsQuiet(t *testing.T, ctrl *Running, quiet time.Duration, namespace string, create func(name string) T, deployment func(id string) string) {
	t.Helper()
	since := len(AuditEvents(t))
	created := create("soon-ready")
	dep := deployment(k.WaitResourceID(t, namespace, "soon-ready"))
	WaitDeployment(t, namespace, dep)
	time.Sleep(time.Second) // a Ready=False write would land meanwhile
	if c := meta.FindStatusCondition(k.Status(k.Get(t, namespace, "soon-ready")).Conditions, component.ReadyCondition); c != nil {
		t.Errorf("a new object got Ready %s/%s %v after its creation, within the quiet %v", c.Status, c.Reason, time.Since(created.GetCreationTimestamp().Time), quiet)
	}
	SetAvailable(t, namespace, dep, corev1.ConditionTrue, "MinimumReplicasAvailable")
	k.WaitReady(t, namespace, "soon-ready", metav1.ConditionTrue, component.ReasonDeploymentStatus)
	WaitQuiet(t, ctrl.UserAgent)
	var statusWrites []string
	for _, w := range WritesBy(t, ctrl.UserAgent, since) {
		if strings.Contains(w, "/status "+namespace+"/soon-ready") {
			statusWrites = append(statusWrites, w)
		}
	}
	// The resource id, then Ready=True.
	if len(statusWrites) != 2 {
		t.Errorf("status writes %v, want 2: the resource id, then Ready=True", statusWrites)
	}
	if got, want := ctrl.Events.Reasons(namespace, "soon-ready"), []string{"ResourceIDAssigned", "Ready"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}

	late := create("never-ready")
	notReady := k.WaitReady(t, namespace, "never-ready", metav1.ConditionFalse, component.ReasonReconciling)
	// lastTransitionTime has whole seconds.
	if at := late.GetCreationTimestamp().Add(quiet - time.Second); notReady.LastTransitionTime.Time.Before(at) {
		t.Errorf("Ready=False written at %v, before the object (created %v) was %v old", notReady.LastTransitionTime, late.GetCreationTimestamp(), quiet)
	}
}

// WaitObject waits for fetch to find the named object and returns it.
func WaitObject[T any](t *testing.T, what string, fetch func(context.Context, string, metav1.GetOptions) (T, error), name string) T {
	t.Helper()
	var obj T
	Eventually(t, what+" "+name, func() error {
		var err error
		obj, err = fetch(context.Background(), name, metav1.GetOptions{})
		return err
	})
	return obj
}

// WaitDeployment waits for the named Deployment and returns it.
func WaitDeployment(t *testing.T, namespace, name string) *appsv1.Deployment {
	t.Helper()
	return WaitObject(t, "Deployment", Admin(t).Kube.AppsV1().Deployments(namespace).Get, name)
}

// WaitService waits for the named Service and returns it.
func WaitService(t *testing.T, namespace, name string) *corev1.Service {
	t.Helper()
	return WaitObject(t, "Service", Admin(t).Kube.CoreV1().Services(namespace).Get, name)
}

// WaitConfigMap waits for the named ConfigMap and returns it.
func WaitConfigMap(t *testing.T, namespace, name string) *corev1.ConfigMap {
	t.Helper()
	return WaitObject(t, "ConfigMap", Admin(t).Kube.CoreV1().ConfigMaps(namespace).Get, name)
}

// WaitNetworkPolicy waits for the named NetworkPolicy and returns it.
func WaitNetworkPolicy(t *testing.T, namespace, name string) *networkingv1.NetworkPolicy {
	t.Helper()
	return WaitObject(t, "NetworkPolicy", Admin(t).Kube.NetworkingV1().NetworkPolicies(namespace).Get, name)
}
