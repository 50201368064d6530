package console

// The harness is the same in pkg/controllers/balancer and
// pkg/controllers/console (only the package clause differs).

import (
	"context"
	"fmt"
	"os"
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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"

	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned/scheme"
	mzinformers "github.com/materializeinc/orchestratord/pkg/client/informers/externalversions"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	var err error
	cp, err = controlplane.Start(context.Background(), controlplane.Options{Audit: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting control plane:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping control plane:", err)
	}
	os.Exit(code)
}

// failureBound bounds every wait; it is a hang guard, not a performance
// assertion.
const failureBound = 30 * time.Second

// adminUserAgent marks the test's own requests in the audit log.
const adminUserAgent = "orchestratord-test-admin"

type clients struct {
	kube kubernetes.Interface
	mz   versioned.Interface
}

func newClients(t *testing.T, userAgent string) clients {
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
	return clients{kube: kube, mz: mz}
}

func admin(t *testing.T) clients { return newClients(t, adminUserAgent) }

// running is a controller under test with its own clients, informers and
// user agent, so its requests can be told apart in the audit log.
type running struct {
	userAgent string
	reg       *prometheus.Registry
	events    *eventLog
	stop      func()
}

var controllerSeq atomic.Int64

func startController(t *testing.T) *running {
	t.Helper()
	ua := fmt.Sprintf("orchestratord-test-%s-%d", Name, controllerSeq.Add(1))
	c := newClients(t, ua)
	kinf := informers.NewSharedInformerFactoryWithOptions(c.kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = children.ResourceIDLabel }))
	mzinf := mzinformers.NewSharedInformerFactory(c.mz, 0)
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	events := &eventLog{}
	broadcaster.StartEventWatcher(events.add)
	reg := prometheus.NewRegistry()
	ctrl := New(controller.Deps{
		Kube: c.kube, MZ: c.mz, KubeInformers: kinf, MZInformers: mzinf,
		Recorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "orchestratord-" + Name}),
		Log:      zaptest.NewLogger(t), Metrics: controller.NewMetrics(reg), Workers: 2,
	})
	if ctrl.Name() != Name {
		t.Fatalf("controller name %q, want %q", ctrl.Name(), Name)
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
	return &running{userAgent: ua, reg: reg, events: events, stop: stop}
}

// reconciles is the number of successful reconciles so far.
func (r *running) reconciles(t *testing.T) float64 {
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

// eventLog keeps the Events a controller emitted.
type eventLog struct {
	mu     sync.Mutex
	events []corev1.Event
}

func (l *eventLog) add(e *corev1.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, *e)
}

// reasons lists the reasons of the Events about the named object, in order.
func (l *eventLog) reasons(namespace, name string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		if e.InvolvedObject.Namespace == namespace && e.InvolvedObject.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

func (l *eventLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// eventually retries check until it succeeds or failureBound passes.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(failureBound)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, failureBound, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns, err := admin(t).kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
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

func auditEvents(t *testing.T) []controlplane.AuditEvent {
	t.Helper()
	events, err := cp.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// writesBy lists the writes by userAgent among the audit events from index since on.
func writesBy(t *testing.T, userAgent string, since int) []string {
	t.Helper()
	var out []string
	events := auditEvents(t)
	for _, e := range events[min(since, len(events)):] {
		if e.UserAgent == userAgent && e.IsWrite() {
			ref := ""
			if e.ObjectRef != nil {
				ref = fmt.Sprintf("%s/%s %s/%s", e.ObjectRef.Resource, e.ObjectRef.Subresource, e.ObjectRef.Namespace, e.ObjectRef.Name)
			}
			out = append(out, e.Verb+" "+ref)
		}
	}
	return out
}

// requestsBy counts every request by userAgent.
func requestsBy(t *testing.T, userAgent string) int {
	t.Helper()
	n := 0
	for _, e := range auditEvents(t) {
		if e.UserAgent == userAgent {
			n++
		}
	}
	return n
}

// waitQuiet waits until userAgent has not written for a second, so a
// controller has converged and its Events are flushed.
func waitQuiet(t *testing.T, userAgent string) {
	t.Helper()
	eventually(t, userAgent+" stops writing", func() error {
		before := len(writesBy(t, userAgent, 0))
		time.Sleep(time.Second)
		if after := len(writesBy(t, userAgent, 0)); after != before {
			return fmt.Errorf("%d writes in the last second", after-before)
		}
		return nil
	})
}

// setAvailable writes the Deployment's Available condition, as the
// deployment controller of kube-controller-manager would.
func setAvailable(t *testing.T, namespace, name string, status corev1.ConditionStatus, reason string) {
	t.Helper()
	deployments := admin(t).kube.AppsV1().Deployments(namespace)
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

func checkOwner(t *testing.T, what string, obj metav1.Object, kind, name string, uid any) {
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

func checkLabels(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: label %s=%q, want %q (labels %v)", what, k, got[k], v, got)
		}
	}
}

func checkRestricted(t *testing.T, what string, pod corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil ||
		psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod security context %+v is not restricted", what, psc)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" ||
			sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: container %s security context %+v is not restricted", what, c.Name, sc)
		}
	}
}

func int32Ptr(v int32) *int32 { return &v }
