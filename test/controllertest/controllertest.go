// Package controllertest is the harness of the controller tests that run
// against a real kube-apiserver (pkg/controllers/balancer,
// pkg/controllers/console): a shared control plane with an audit log,
// controllers under test with their own user agents, access to the
// component custom resources (Kind), and checks of the child objects they
// write.
package controllertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"

	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned/scheme"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/test/controlplane"
)

var cp *controlplane.ControlPlane

// Main is a test package's TestMain: it starts the control plane with an
// audit log, runs the tests, stops the control plane and exits.
func Main(m *testing.M) {
	controlplane.Main(m, controlplane.Options{Audit: true}, func(c *controlplane.ControlPlane) { cp = c })
}

// FailureBound bounds every wait; it is a hang guard, not a performance
// assertion.
const FailureBound = 30 * time.Second

// AdminUserAgent marks the test's own requests in the audit log.
const AdminUserAgent = "orchestratord-test-admin"

// Clients are the clients of one user agent.
type Clients struct {
	Kube    kubernetes.Interface
	MZ      versioned.Interface
	Dynamic dynamic.Interface
}

// NewClients are clients that send userAgent.
func NewClients(t *testing.T, userAgent string) Clients {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.UserAgent = userAgent
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mz, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Clients{Kube: kube, MZ: mz, Dynamic: dyn}
}

// Admin are the clients of the test itself.
func Admin(t *testing.T) Clients { return NewClients(t, AdminUserAgent) }

// WithUpstreamQuantities runs write while the CRD named crdName
// admits the quantities Kubernetes cannot parse, as upstream's CRD does
// (controlplane.ControlPlane.WithUpstreamQuantities).
func WithUpstreamQuantities(t *testing.T, crdName string, write func() error) {
	t.Helper()
	if err := cp.WithUpstreamQuantities(context.Background(), crdName, write); err != nil {
		t.Fatal(err)
	}
}

// Running is a controller under test with its own clients, informers and
// user agent, so its requests can be told apart in the audit log.
type Running struct {
	UserAgent string
	Events    *EventLog
	reg       *prometheus.Registry
	stop      func()
}

// Stop stops the controller (also done at the end of the test).
func (r *Running) Stop() { r.stop() }

var controllerSeq atomic.Int64

// StartController starts the controller that newController builds, which
// must be named name, until the test ends.
func StartController(t *testing.T, name string, newController func(controller.Deps) *controller.Controller) *Running {
	t.Helper()
	ua := fmt.Sprintf("orchestratord-test-%s-%d", name, controllerSeq.Add(1))
	c := NewClients(t, ua)
	kinf, mzinf := controller.NewInformers(c.Kube, c.MZ)
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.Kube.CoreV1().Events("")})
	events := &EventLog{}
	broadcaster.StartEventWatcher(events.add)
	reg := prometheus.NewRegistry()
	ctrl := newController(controller.Deps{
		Kube: c.Kube, MZ: c.MZ, Dynamic: c.Dynamic, KubeInformers: kinf, MZInformers: mzinf,
		Recorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "orchestratord-" + name}),
		Log:      zaptest.NewLogger(t), Metrics: controller.NewMetrics(reg), Workers: 2,
	})
	if ctrl.Name() != name {
		t.Fatalf("controller name %q, want %q", ctrl.Name(), name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	kinf.Start(ctx.Done())
	mzinf.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrl.Run(ctx)
	}()
	stop := sync.OnceFunc(func() {
		cancel()
		<-done
		kinf.Shutdown()
		mzinf.Shutdown()
		broadcaster.Shutdown()
	})
	t.Cleanup(stop)
	return &Running{UserAgent: ua, Events: events, reg: reg, stop: stop}
}

// Reconciles is the number of successful reconciles so far.
func (r *Running) Reconciles(t *testing.T) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "orchestratord_reconciles_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := false
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == "success" {
					ok = true
				}
			}
			if ok {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// EventLog keeps the Events a controller emitted.
type EventLog struct {
	mu     sync.Mutex
	events []corev1.Event
}

func (l *EventLog) add(e *corev1.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, *e)
}

// Reasons lists the reasons of the Events about the named object, in order.
func (l *EventLog) Reasons(namespace, name string) []string {
	var out []string
	for _, e := range l.For(namespace, name) {
		out = append(out, e.Reason)
	}
	return out
}

// For lists the Events about the named object, in order.
func (l *EventLog) For(namespace, name string) []corev1.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []corev1.Event
	for _, e := range l.events {
		if e.InvolvedObject.Namespace == namespace && e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// Count is the number of Events so far.
func (l *EventLog) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// Eventually retries check until it succeeds or FailureBound passes.
func Eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(FailureBound)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, FailureBound, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// NewNamespace creates a namespace named after the test.
func NewNamespace(t *testing.T) string {
	t.Helper()
	ns, err := Admin(t).Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: dnsLabel(t.Name()) + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// dnsLabel shortens and lower-cases s into a DNS label prefix.
func dnsLabel(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
	return strings.Trim(s[:min(40, len(s))], "-")
}

// AuditEvents are the control plane's audit events so far.
func AuditEvents(t *testing.T) []controlplane.AuditEvent {
	t.Helper()
	events, err := cp.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// WritesBy lists the writes by userAgent among the audit events from index since on.
func WritesBy(t *testing.T, userAgent string, since int) []string {
	t.Helper()
	var out []string
	events := AuditEvents(t)
	for _, e := range events[min(since, len(events)):] {
		if e.By(userAgent) && e.IsWrite() {
			ref := ""
			if e.ObjectRef != nil {
				ref = fmt.Sprintf("%s/%s %s/%s", e.ObjectRef.Resource, e.ObjectRef.Subresource, e.ObjectRef.Namespace, e.ObjectRef.Name)
			}
			out = append(out, e.Verb+" "+ref)
		}
	}
	return out
}

// RequestsBy counts every request by userAgent.
func RequestsBy(t *testing.T, userAgent string) int {
	t.Helper()
	n := 0
	for _, e := range AuditEvents(t) {
		if e.By(userAgent) {
			n++
		}
	}
	return n
}

// WaitQuiet waits until userAgent has not written for a second, so a
// controller has converged and its Events are flushed.
func WaitQuiet(t *testing.T, userAgent string) {
	t.Helper()
	Eventually(t, userAgent+" stops writing", func() error {
		before := len(WritesBy(t, userAgent, 0))
		time.Sleep(time.Second)
		if after := len(WritesBy(t, userAgent, 0)); after != before {
			return fmt.Errorf("%d writes in the last second", after-before)
		}
		return nil
	})
}

// SetAvailable writes the Deployment's Available condition, as the
// deployment controller of kube-controller-manager would.
func SetAvailable(t *testing.T, namespace, name string, status corev1.ConditionStatus, reason string) {
	t.Helper()
	deployments := Admin(t).Kube.AppsV1().Deployments(namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deployments.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Status.ObservedGeneration = d.Generation
		d.Status.Conditions = []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentAvailable, Status: status, Reason: reason, Message: "set by the test",
			LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}
		_, err = deployments.UpdateStatus(context.Background(), d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// CheckOwner fails the test unless obj's only owner reference is a
// controlling, deletion-blocking reference to the named owner.
func CheckOwner(t *testing.T, what string, obj metav1.Object, kind, name string, uid any) {
	t.Helper()
	refs := obj.GetOwnerReferences()
	if len(refs) != 1 {
		t.Fatalf("%s: owner references %+v, want one", what, refs)
	}
	r := refs[0]
	if r.APIVersion != "materialize.cloud/v1alpha1" || r.Kind != kind || r.Name != name || string(r.UID) != fmt.Sprint(uid) ||
		r.Controller == nil || !*r.Controller || r.BlockOwnerDeletion == nil || !*r.BlockOwnerDeletion {
		t.Fatalf("%s: owner reference %+v, want controller+blockOwnerDeletion reference to %s %s (%v)", what, r, kind, name, uid)
	}
}

// CheckLabels reports every label of want that got lacks or holds otherwise.
func CheckLabels(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: label %s=%q, want %q (labels %v)", what, k, got[k], v, got)
		}
	}
}

// Int32Ptr returns a pointer to v.
func Int32Ptr(v int32) *int32 { return &v }

// InstallCertificateCRD serves cert-manager's Certificate kind
// (cert-manager.io/v1) with an open schema, so reconcilers can write
// Certificates; nothing issues them.
func InstallCertificateCRD(t *testing.T) {
	t.Helper()
	if err := cp.InstallCertificateCRD(context.Background()); err != nil {
		t.Fatal(err)
	}
}
