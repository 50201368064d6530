package leaderelection

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/retry"

	"github.com/materializeinc/orchestratord/test/controlplane"
	"github.com/materializeinc/orchestratord/test/promtest"
)

// cp is the real etcd + kube-apiserver every test here talks to.
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	controlplane.Main(m, controlplane.Options{SkipCRDs: true}, func(c *controlplane.ControlPlane) { cp = c })
}

// failureBound bounds every wait; it is a hang guard, not a performance
// assertion.
const failureBound = 30 * time.Second

// fast are short durations for tests that do not measure takeover.
// The renew deadline leaves a leader 2.5 s past a retry to renew, so a
// loaded API server is unlikely to end a term the test did not mean to end.
var fast = durations{lease: 4 * time.Second, renew: 3 * time.Second, retry: 500 * time.Millisecond}

type durations struct{ lease, renew, retry time.Duration }

func adminClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// flakyTransport fails every request while fail is set, as an unreachable
// API server would.
type flakyTransport struct {
	next http.RoundTripper
	fail *atomic.Bool
}

func (f *flakyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.fail.Load() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errors.New("injected failure: API server unreachable")
	}
	return f.next.RoundTrip(req)
}

// candidate is one replica: its own client (with a failure switch), logs
// and metrics registry.
type testCandidate struct {
	id   string
	cfg  Config
	fail *atomic.Bool
	logs *observer.ObservedLogs
	reg  *prometheus.Registry
}

func newTestCandidate(t *testing.T, id, namespace string, d durations) *testCandidate {
	t.Helper()
	fail := &atomic.Bool{}
	rc := rest.CopyConfig(cp.Config)
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &flakyTransport{next: rt, fail: fail} }
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	return &testCandidate{
		id:   id,
		fail: fail,
		logs: logs,
		reg:  reg,
		cfg: Config{
			Client:        client,
			Namespace:     namespace,
			Identity:      id,
			LeaseDuration: d.lease,
			RenewDeadline: d.renew,
			RetryPeriod:   d.retry,
			Logger:        zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core)).Named(id),
			Metrics:       reg,
		},
	}
}

// running is one Run call.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (c *testCandidate) run(t *testing.T, lease string, lead func(context.Context)) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = Run(ctx, c.cfg, lease, lead)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(failureBound):
			t.Errorf("Run(%s, %s) did not return after its context was cancelled", c.id, lease)
		}
	})
	return r
}

// wait returns Run's error, failing the test if it does not return.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(failureBound):
		t.Fatal("Run did not return")
		return nil
	}
}

func (r *running) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// recorder is a lead function that records when it is called, when its
// context is cancelled and when it returns. It returns once its context is
// cancelled (unless ignoreCtx) and hold is closed (if set).
type recorder struct {
	hold      chan struct{}
	ignoreCtx bool
	started   chan time.Time
	cancelled chan time.Time
	returned  chan time.Time
}

func newRecorder() *recorder {
	return &recorder{started: make(chan time.Time, 16), cancelled: make(chan time.Time, 16), returned: make(chan time.Time, 16)}
}

func (r *recorder) lead(ctx context.Context) {
	r.started <- time.Now()
	context.AfterFunc(ctx, func() { r.cancelled <- time.Now() })
	if !r.ignoreCtx {
		<-ctx.Done()
	}
	if r.hold != nil {
		<-r.hold
	}
	r.returned <- time.Now()
}

func recv(t *testing.T, ch <-chan time.Time, what string) time.Time {
	t.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(failureBound):
		t.Fatalf("timed out waiting for %s", what)
		return time.Time{}
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(failureBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func getLease(t *testing.T, namespace, name string) *coordinationv1.Lease {
	t.Helper()
	lease, err := adminClient(t).CoordinationV1().Leases(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting lease %s/%s: %v", namespace, name, err)
	}
	return lease
}

func holder(t *testing.T, namespace, name string) string {
	t.Helper()
	return deref(getLease(t, namespace, name).Spec.HolderIdentity)
}

var runs atomic.Int32

// unique suffixes name so that tests can run again (-count) against the same
// control plane.
func unique(name string) string { return fmt.Sprintf("%s-%d", name, runs.Add(1)) }

func ref[T any](v T) *T { return &v }

func createNamespace(t *testing.T, name string) string {
	t.Helper()
	_, err := adminClient(t).CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// metricValue returns the value of a gauge or counter series of lease, or
// -1 when absent.
func metricValue(t *testing.T, reg *prometheus.Registry, name, lease string) float64 {
	t.Helper()
	if v, ok := promtest.Value(t, reg, name, map[string]string{"lease": lease}); ok {
		return v
	}
	return -1
}

// exclusive is a lead function that fails the test if two leaders of one
// lease ever run at once, and counts who led.
type exclusive struct {
	mu      sync.Mutex
	active  int
	overlap bool
	led     map[string]int
}

func (e *exclusive) lead(id string) func(context.Context) {
	return func(ctx context.Context) {
		e.mu.Lock()
		e.active++
		if e.active > 1 {
			e.overlap = true
		}
		if e.led == nil {
			e.led = map[string]int{}
		}
		e.led[id]++
		e.mu.Unlock()
		<-ctx.Done()
		e.mu.Lock()
		e.active--
		e.mu.Unlock()
	}
}

func (e *exclusive) leaders() (map[string]int, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	led := map[string]int{}
	for k, v := range e.led {
		led[k] = v
	}
	return led, e.overlap
}

func TestLeaseNames(t *testing.T) {
	for controller, want := range map[string]string{"materialize": LeaseMaterialize, "balancer": LeaseBalancer, "console": LeaseConsole} {
		if got := LeaseName(controller); got != want {
			t.Errorf("LeaseName(%q) = %q, want %q", controller, got, want)
		}
	}
}

func TestDefaultIdentity(t *testing.T) {
	t.Setenv("POD_NAME", "")
	host, _ := os.Hostname()
	a, b := DefaultIdentity(), DefaultIdentity()
	if !strings.HasPrefix(a, host+"-") || a == b {
		t.Errorf("DefaultIdentity() = %q, %q; want %q plus distinct random suffixes", a, b, host+"-")
	}
	t.Setenv("POD_NAME", "orchestratord-controllers-7d9f-abcde")
	if got := DefaultIdentity(); got != "orchestratord-controllers-7d9f-abcde" {
		t.Errorf("DefaultIdentity() = %q, want $POD_NAME", got)
	}
}

func TestConfigValidation(t *testing.T) {
	base := Config{Client: adminClient(t), Namespace: "default", Identity: "a", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	for name, mutate := range map[string]func(*Config){
		"renew deadline not below the lease as written in whole seconds": func(c *Config) { c.LeaseDuration, c.RenewDeadline = 2500*time.Millisecond, 2200*time.Millisecond },
		"lease under a second":          func(c *Config) { c.LeaseDuration = 900 * time.Millisecond },
		"retry period too long":         func(c *Config) { c.RetryPeriod = 9 * time.Second },
		"no identity":                   func(c *Config) { c.Identity = "" },
		"no namespace":                  func(c *Config) { c.Namespace = "" },
		"renew deadline over the lease": func(c *Config) { c.RenewDeadline = 20 * time.Second },
	} {
		cfg := base
		mutate(&cfg)
		ctx, cancel := context.WithTimeout(context.Background(), failureBound)
		err := Run(ctx, cfg, "test-validation", func(context.Context) { t.Errorf("%s: lead called", name) })
		cancel()
		if err == nil || errors.Is(err, ErrLeadershipLost) {
			t.Errorf("%s: Run = %v, want a configuration error", name, err)
		}
	}
}

// Two candidates on one lease: exactly one leads, and the other never runs
// its reconciler concurrently, over several renewal periods.
func TestOneLeaderPerLease(t *testing.T) {
	lease := unique("test-one-leader")
	a := newTestCandidate(t, "a", "default", fast)
	b := newTestCandidate(t, "b", "default", fast)
	var ex exclusive
	ra := a.run(t, lease, ex.lead("a"))
	rb := b.run(t, lease, ex.lead("b"))

	eventually(t, "a leader", func() bool { led, _ := ex.leaders(); return len(led) > 0 })
	time.Sleep(2 * fast.lease) // several renewals and standby polls

	led, overlap := ex.leaders()
	if overlap || len(led) != 1 {
		t.Fatalf("leaders = %v (overlap %v), want exactly one", led, overlap)
	}
	leader, standby := a, b
	if led["b"] == 1 {
		leader, standby = b, a
	}
	if got := holder(t, "default", lease); got != leader.id {
		t.Errorf("lease holder = %q, want the leader %q", got, leader.id)
	}
	if got := metricValue(t, leader.reg, "orchestratord_leader_election_is_leader", lease); got != 1 {
		t.Errorf("leader is_leader = %v, want 1", got)
	}
	if got := metricValue(t, leader.reg, "orchestratord_leader_election_transitions_total", lease); got != 1 {
		t.Errorf("leader transitions = %v, want 1", got)
	}
	if got := metricValue(t, standby.reg, "orchestratord_leader_election_is_leader", lease); got != 0 {
		t.Errorf("standby is_leader = %v, want 0", got)
	}
	for _, r := range []*running{ra, rb} {
		r.cancel()
		if err := r.wait(t); err != nil {
			t.Errorf("Run after cancellation = %v, want nil", err)
		}
	}
	if got := metricValue(t, leader.reg, "orchestratord_leader_election_transitions_total", lease); got != 2 {
		t.Errorf("leader transitions after shutdown = %v, want 2", got)
	}
}

// Three leases over two candidates: each lease has one leader, and leases
// are held by different candidates.
func TestLeasesSpreadOverCandidates(t *testing.T) {
	ns := createNamespace(t, unique("spread"))
	a := newTestCandidate(t, "a", ns, fast)
	b := newTestCandidate(t, "b", ns, fast)
	a.cfg.Terms = NewTerms()
	health := NewHealthChecker(a.cfg.Terms, 0)
	ex := map[string]*exclusive{LeaseMaterialize: {}, LeaseBalancer: {}, LeaseConsole: {}}
	leads := func(lease, id string) bool { led, _ := ex[lease].leaders(); return led[id] > 0 }

	// a gets materialize and balancer first, b console.
	a.run(t, LeaseMaterialize, ex[LeaseMaterialize].lead("a"))
	a.run(t, LeaseBalancer, ex[LeaseBalancer].lead("a"))
	b.run(t, LeaseConsole, ex[LeaseConsole].lead("b"))
	eventually(t, "first leaders", func() bool {
		return leads(LeaseMaterialize, "a") && leads(LeaseBalancer, "a") && leads(LeaseConsole, "b")
	})
	// Then both campaign for all three.
	a.run(t, LeaseConsole, ex[LeaseConsole].lead("a"))
	b.run(t, LeaseMaterialize, ex[LeaseMaterialize].lead("b"))
	b.run(t, LeaseBalancer, ex[LeaseBalancer].lead("b"))
	time.Sleep(2 * fast.lease)

	want := map[string]*testCandidate{LeaseMaterialize: a, LeaseBalancer: a, LeaseConsole: b}
	for lease, c := range want {
		led, overlap := ex[lease].leaders()
		if overlap || len(led) != 1 || led[c.id] != 1 {
			t.Errorf("%s: leaders %v (overlap %v), want only %s", lease, led, overlap, c.id)
		}
		if got := holder(t, ns, lease); got != c.id {
			t.Errorf("%s: holder %q, want %q", lease, got, c.id)
		}
		// One registry per candidate, shared by its three Runs.
		for _, o := range []*testCandidate{a, b} {
			wantLeader := 0.0
			if o == c {
				wantLeader = 1
			}
			if got := metricValue(t, o.reg, "orchestratord_leader_election_is_leader", lease); got != wantLeader {
				t.Errorf("%s: %s is_leader = %v, want %v", lease, o.id, got, wantLeader)
			}
		}
	}
	if err := health.Check(nil); err != nil {
		t.Errorf("healthz of a healthy leader of two leases: %v", err)
	}
}

// Cancelling the leader's context cancels its lead context; the Lease stays
// held (and renewed) while lead drains, is released only once lead returns,
// and a standby then takes over through its watch, without waiting for its
// next RetryPeriod poll.
func TestGracefulHandoverAndFastTakeover(t *testing.T) {
	lease := unique("test-handover")
	// A RetryPeriod long enough that a poll cannot explain the takeover.
	slow := durations{lease: 10 * time.Second, renew: 8 * time.Second, retry: 5 * time.Second}
	a := newTestCandidate(t, "a", "default", slow)
	b := newTestCandidate(t, "b", "default", slow)
	la := newRecorder()
	la.hold = make(chan struct{})
	lb := newRecorder()

	ra := a.run(t, lease, la.lead)
	recv(t, la.started, "a to lead")
	b.run(t, lease, lb.lead)
	// Let b make its first (immediate) acquisition attempt and start its
	// watch, so that only the watch can make it acquire before its next poll.
	time.Sleep(time.Second)

	ra.cancel()
	recv(t, la.cancelled, "a's lead context to be cancelled")
	for range 5 {
		time.Sleep(200 * time.Millisecond)
		if got := holder(t, "default", lease); got != "a" {
			t.Fatalf("lease holder while a's lead drains = %q, want a", got)
		}
		if ra.returned() {
			t.Fatal("Run returned before lead returned")
		}
		select {
		case <-lb.started:
			t.Fatal("b led while a's lead was still running")
		default:
		}
	}

	released := time.Now()
	close(la.hold)
	returnedAt := recv(t, la.returned, "a's lead to return")
	if err := ra.wait(t); err != nil {
		t.Errorf("a's Run = %v, want nil after its context was cancelled", err)
	}
	bLeads := recv(t, lb.started, "b to lead")
	takeover := bLeads.Sub(released)
	t.Logf("takeover: %v from a's lead returning to b's lead call (RetryPeriod %v)", takeover, slow.retry)
	if !bLeads.After(returnedAt) {
		t.Errorf("b led at %v, before a's lead returned at %v", bLeads, returnedAt)
	}
	if takeover >= slow.retry {
		t.Errorf("takeover took %v, not below the retry period %v: the watch did not trigger it", takeover, slow.retry)
	}
	if n := b.logs.FilterMessage("takeover triggered").Len(); n == 0 {
		t.Error(`b did not log "takeover triggered"`)
	}
	if n := a.logs.FilterMessage("released lease").Len(); n != 1 {
		t.Errorf(`a logged "released lease" %d times, want 1`, n)
	}
	if got := holder(t, "default", lease); got != "b" {
		t.Errorf("lease holder after takeover = %q, want b", got)
	}
}

// When the leader cannot renew (its API server is unreachable), its lead
// context is cancelled before the Lease could have expired for anyone else,
// Run returns ErrLeadershipLost, and a standby takes over only after.
func TestRenewalFailureFencesLeader(t *testing.T) {
	lease := unique("test-renewal-failure")
	d := durations{lease: 3 * time.Second, renew: 1500 * time.Millisecond, retry: 500 * time.Millisecond}
	a := newTestCandidate(t, "a", "default", d)
	b := newTestCandidate(t, "b", "default", d)
	la, lb := newRecorder(), newRecorder()

	ra := a.run(t, lease, la.lead)
	recv(t, la.started, "a to lead")
	b.run(t, lease, lb.lead)
	time.Sleep(time.Second)

	a.fail.Store(true)
	cancelledAt := recv(t, la.cancelled, "a's lead context to be cancelled")
	// The last renewal a managed to write; its renewTime is a's clock when it
	// sent it, so a standby cannot consider the Lease expired before
	// renewTime + LeaseDuration.
	l := getLease(t, "default", lease)
	if got := deref(l.Spec.HolderIdentity); got != "a" {
		t.Fatalf("holder when a's lead was cancelled = %q, want a", got)
	}
	expiry := l.Spec.RenewTime.Add(d.lease)
	t.Logf("a's lead cancelled %v after its last renewal (renew deadline %v, lease %v)", cancelledAt.Sub(l.Spec.RenewTime.Time), d.renew, d.lease)
	if !cancelledAt.Before(expiry) {
		t.Errorf("a's lead context was cancelled at %v, after the lease could have expired at %v", cancelledAt, expiry)
	}
	if err := ra.wait(t); !errors.Is(err, ErrLeadershipLost) {
		t.Errorf("a's Run = %v, want ErrLeadershipLost", err)
	}
	returnedAt := recv(t, la.returned, "a's lead to return")
	bLeads := recv(t, lb.started, "b to take over")
	if !bLeads.After(returnedAt) || !bLeads.After(cancelledAt) {
		t.Errorf("b led at %v, before a stopped (lead cancelled %v, returned %v)", bLeads, cancelledAt, returnedAt)
	}
	if n := a.logs.FilterMessage("lost lease").Len(); n != 1 {
		t.Errorf(`a logged "lost lease" %d times, want 1`, n)
	}
	if got := metricValue(t, a.reg, "orchestratord_leader_election_is_leader", lease); got != 0 {
		t.Errorf("a is_leader after losing = %v, want 0", got)
	}
}

// /healthz fails while a held lease is overdue for renewal: here the leader
// cannot renew and its lead ignores its context, so Run cannot return.
func TestHealthzFailsWhenLeaseOverdue(t *testing.T) {
	lease := unique("test-healthz")
	a := newTestCandidate(t, "a", "default", fast)
	a.cfg.Terms = NewTerms()
	health := NewHealthChecker(a.cfg.Terms, 0)
	la := newRecorder()
	la.ignoreCtx = true
	la.hold = make(chan struct{})

	ra := a.run(t, lease, la.lead)
	recv(t, la.started, "a to lead")
	if err := health.Check(nil); err != nil {
		t.Fatalf("healthz while renewing: %v", err)
	}
	a.fail.Store(true)
	recv(t, la.cancelled, "a's lead context to be cancelled")
	eventually(t, "healthz to fail", func() bool { return health.Check(nil) != nil })
	err := health.Check(nil)
	t.Logf("healthz: %v", err)
	if !strings.Contains(err.Error(), lease) {
		t.Errorf("healthz error %q does not name the lease", err)
	}
	if ra.returned() {
		t.Error("Run returned while lead was still running")
	}

	close(la.hold)
	if err := ra.wait(t); !errors.Is(err, ErrLeadershipLost) {
		t.Errorf("Run = %v, want ErrLeadershipLost", err)
	}
	if err := health.Check(nil); err != nil {
		t.Errorf("healthz once the lease is no longer held: %v", err)
	}
}

// A lead that returns on its own gives the lease up.
func TestLeadReturningReleasesLease(t *testing.T) {
	lease := unique("test-lead-returns")
	a := newTestCandidate(t, "a", "default", fast)
	ra := a.run(t, lease, func(context.Context) {})
	if err := ra.wait(t); !errors.Is(err, ErrLeadReturned) {
		t.Fatalf("Run = %v, want ErrLeadReturned", err)
	}
	if got := holder(t, "default", lease); got != "" {
		t.Errorf("holder after lead returned = %q, want released", got)
	}
}

// A claim naming a replica that landed with no term leading under it (in
// life: a write cancelled in flight by a takeover restart, which the API
// server stored all the same, or the watch's claim just before a
// shutdown; here written by hand, and every renewal of it refused before
// it reaches the API server) is released when Run shuts down, so a standby
// does not wait for the Lease to expire.
func TestShutdownReleasesAClaimNoTermLed(t *testing.T) {
	lease := unique("test-landed-claim")
	b := newTestCandidate(t, "b", "default", fast)
	var refused atomic.Int64
	rc := rest.CopyConfig(cp.Config)
	rc.ContentType = "application/json" // so the holder can be read off the body
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPut && req.Body != nil && strings.Contains(req.URL.Path, "/leases/"+lease) {
				body, err := io.ReadAll(req.Body)
				_ = req.Body.Close()
				if err != nil {
					return nil, err
				}
				if strings.Contains(string(body), `"holderIdentity":"b"`) {
					refused.Add(1)
					return nil, errors.New("injected failure: renewal refused")
				}
				req.Body = io.NopCloser(bytes.NewReader(body))
			}
			return rt.RoundTrip(req)
		})
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	b.cfg.Client = client
	now := metav1.NewMicroTime(time.Now())
	if _, err := adminClient(t).CoordinationV1().Leases("default").Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: lease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ref("b"), LeaseDurationSeconds: ref[int32](15),
			AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := b.run(t, lease, func(ctx context.Context) { t.Error("lead ran without a renewal"); <-ctx.Done() })
	eventually(t, "a refused renewal", func() bool { return refused.Load() > 0 })
	rb.cancel()
	if err := rb.wait(t); err != nil {
		t.Fatalf("Run = %v, want nil on shutdown", err)
	}
	if got := holder(t, "default", lease); got != "" {
		t.Errorf("holder after the shutdown = %q, want released", got)
	}
	if b.logs.FilterMessage("released lease found held while shutting down").Len() != 1 {
		t.Error("the release was not logged")
	}
}

// ledThenFenced lets a lead the Lease until its renewals fail for a renew
// deadline, with Terms kept across Runs (as the controllers' campaign
// keeps them), and returns when a may release the Lease again.
func ledThenFenced(t *testing.T, a *testCandidate, lease string, la *recorder) (releaseNotBefore time.Time) {
	t.Helper()
	a.cfg.Terms = NewTerms()
	ra := a.run(t, lease, la.lead)
	recv(t, la.started, "a to lead")
	a.fail.Store(true)
	if err := ra.wait(t); !errors.Is(err, ErrLeadershipLost) {
		t.Fatalf("a's Run = %v, want ErrLeadershipLost", err)
	}
	recv(t, la.cancelled, "the fenced term's lead context to be cancelled")
	a.fail.Store(false)
	return a.cfg.Terms.releaseNotBefore(lease)
}

// A fenced term's writes may be on the wire until a standby could have
// taken the Lease by expiry. The replica rejoins, finds the Lease still
// naming it and leads again; a shutdown within that window does not
// release the Lease before the window ends (client-go's release is
// refused, and the shutdown's own release waits for it).
func TestReleaseHeldBackAfterAFence(t *testing.T) {
	lease := unique("test-fenced-release")
	d := durations{lease: 6 * time.Second, renew: 1500 * time.Millisecond, retry: 500 * time.Millisecond}
	a := newTestCandidate(t, "a", "default", d)
	la := newRecorder()
	until := ledThenFenced(t, a, lease, la)
	lastRenewal := getLease(t, "default", lease).Spec.RenewTime.Time
	if d := until.Sub(lastRenewal.Add(d.lease)); d < -time.Second || d > time.Second {
		t.Fatalf("release held back until %v, want about the last renewal %v plus the lease duration", until, lastRenewal)
	}

	rb := a.run(t, lease, la.lead)
	recv(t, la.started, "a to lead again under the Lease that still names it")
	if !time.Now().Before(until) {
		t.Fatal("a led again after the window this test is about; the machine is too slow for its durations")
	}
	rb.cancel()
	if err := rb.wait(t); err != nil {
		t.Fatalf("Run = %v, want nil on shutdown", err)
	}
	l := getLease(t, "default", lease)
	if got := deref(l.Spec.HolderIdentity); got != "" {
		t.Errorf("holder after the shutdown = %q, want released once the window had passed", got)
	}
	// The release writes its own time as renewTime (microseconds).
	if released := l.Spec.RenewTime.Time; released.Before(until.Truncate(time.Microsecond)) {
		t.Errorf("released at %v, before the fenced term's writes could no longer land (%v)", released, until)
	}
	if a.logs.FilterMessage("waiting until a fenced term's writes can no longer land before releasing the lease").Len() != 1 {
		t.Error("the wait was not logged")
	}
	if a.logs.FilterMessage("released lease found held while shutting down").Len() != 1 {
		t.Error("the release after the wait was not logged")
	}
}

// handOverWhenAsked is a placement that lets the replica take any Lease
// and asks it to hand over while handOver is set.
type handOverWhenAsked struct{ handOver atomic.Bool }

func (p *handOverWhenAsked) MayAcquire(string) bool     { return true }
func (p *handOverWhenAsked) ShouldHandOver(string) bool { return p.handOver.Load() }
func (p *handOverWhenAsked) Withdraw()                  {}

// Within a fenced term's window no hand-over begins: it would release the
// Lease, which the window holds back, and only bounce it. Once the window
// has passed, the placement's hand-over goes ahead.
func TestNoHandOverWithinAFencedTermsWindow(t *testing.T) {
	lease := unique("test-fenced-handover")
	d := durations{lease: 6 * time.Second, renew: 1500 * time.Millisecond, retry: 500 * time.Millisecond}
	a := newTestCandidate(t, "a", "default", d)
	placement := &handOverWhenAsked{}
	a.cfg.Placement = placement
	la := newRecorder()
	until := ledThenFenced(t, a, lease, la)

	rb := a.run(t, lease, la.lead)
	recv(t, la.started, "a to lead again under the Lease that still names it")
	placement.handOver.Store(true)
	if !time.Now().Before(until.Add(-2 * d.retry)) {
		t.Fatal("a led again too late in the window this test is about; the machine is too slow for its durations")
	}
	recv(t, la.cancelled, "the hand-over once the window has passed")
	placement.handOver.Store(false)
	began := a.logs.FilterMessageSnippet("handing the lease over to a replica that leads fewer").All()
	if len(began) == 0 {
		t.Fatal("the term ended without a hand-over")
	}
	if at := began[0].Time; at.Before(until) {
		t.Errorf("hand-over began at %v, within the fenced term's window (until %v)", at, until)
	}
	rb.cancel()
	if err := rb.wait(t); err != nil {
		t.Fatalf("Run = %v, want nil on shutdown", err)
	}
}

// client-go's tryRelease trusts its cached observation, not the record it
// has just read; the fenced lock refuses to clear somebody else's Lease.
func TestReleaseRefusedWhenHeldByAnother(t *testing.T) {
	lease := unique("test-release-guard")
	ctx := context.Background()
	leases := adminClient(t).CoordinationV1().Leases("default")
	_, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: lease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ref("b"), LeaseDurationSeconds: ref[int32](15)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lock := newFencedLock(&resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: "default", Name: lease},
		Client:     adminClient(t).CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "a"},
	}, time.Minute)
	lock.openGate()
	if _, _, err := lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now}); err == nil {
		t.Error("releasing a lease held by another identity succeeded")
	}
	if got := holder(t, "default", lease); got != "b" {
		t.Errorf("holder = %q, want b", got)
	}
}

// On shutdown the leader keeps its lead context (and the Lease) while it
// finishes in-flight work: Stopping is closed, the context stays valid, a
// write made after the shutdown still lands, and only after lead returns is
// the Lease released. With the old behaviour the context was cancelled at
// once and the write failed.
func TestShutdownDrainsInFlightWork(t *testing.T) {
	lease := unique("test-drain")
	a := newTestCandidate(t, "a", "default", fast)
	a.cfg.DrainTimeout = failureBound
	stopping := make(chan struct{})
	finish := make(chan struct{})
	wrote := make(chan error, 1)
	leading := make(chan time.Time, 1)
	ra := a.run(t, lease, func(ctx context.Context) {
		leading <- time.Now()
		select {
		case <-Stopping(ctx):
			close(stopping)
		case <-ctx.Done():
			wrote <- fmt.Errorf("lead context cancelled before Stopping closed: %w", context.Cause(ctx))
			return
		}
		<-finish
		_, err := adminClient(t).CoreV1().ConfigMaps("default").Create(ctx,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: lease}}, metav1.CreateOptions{})
		wrote <- err
	})
	recv(t, leading, "a to lead")
	ra.cancel()
	select {
	case <-stopping:
	case err := <-wrote:
		t.Fatal(err)
	case <-time.After(failureBound):
		t.Fatal("Stopping was not closed after Run's context was cancelled")
	}
	// Draining: the Lease is still held and renewed.
	time.Sleep(2 * fast.lease)
	if got := holder(t, "default", lease); got != "a" {
		t.Fatalf("holder while draining = %q, want a", got)
	}
	if ra.returned() {
		t.Fatal("Run returned while lead was draining")
	}
	close(finish)
	if err := <-wrote; err != nil {
		t.Fatalf("write of in-flight work after shutdown: %v", err)
	}
	if err := ra.wait(t); err != nil {
		t.Errorf("Run = %v, want nil after a drained shutdown", err)
	}
	if got := holder(t, "default", lease); got != "" {
		t.Errorf("holder after drained shutdown = %q, want released", got)
	}
}

// Work that does not finish within DrainTimeout has its context cancelled.
func TestShutdownDrainIsBounded(t *testing.T) {
	lease := unique("test-drain-bound")
	a := newTestCandidate(t, "a", "default", fast)
	a.cfg.DrainTimeout = 500 * time.Millisecond
	l := newRecorder() // ignores Stopping; returns when its context ends
	ra := a.run(t, lease, l.lead)
	started := recv(t, l.started, "a to lead")
	ra.cancel()
	cancelled := recv(t, l.cancelled, "the lead context to be cancelled at the drain timeout")
	if err := ra.wait(t); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	t.Logf("lead context cancelled %v after leading started", cancelled.Sub(started))
	if got := holder(t, "default", lease); got != "" {
		t.Errorf("holder = %q, want released", got)
	}
}

// A fence during the shutdown's drain (its renewals failing, the API
// server away) ends a term that was stopping anyway: Run returns nil, as
// for any shutdown, not ErrLeadershipLost, which the controllers take for
// a controller's failure (exit status 1, "controller failed").
func TestFenceDuringTheDrainIsAShutdown(t *testing.T) {
	lease := unique("test-drain-fenced")
	a := newTestCandidate(t, "a", "default", fast)
	a.cfg.DrainTimeout = failureBound
	leading := make(chan time.Time, 1)
	ra := a.run(t, lease, func(ctx context.Context) {
		leading <- time.Now()
		<-Stopping(ctx)
		<-ctx.Done() // still draining when the fence comes
	})
	recv(t, leading, "a to lead")
	ra.cancel()
	a.fail.Store(true)
	if err := ra.wait(t); err != nil {
		t.Errorf("Run = %v, want nil: a fence during the drain ends a shutdown", err)
	}
	if n := a.logs.FilterMessage("lost lease").Len(); n != 1 {
		t.Errorf(`a logged "lost lease" %d times, want 1 (the fence is still said)`, n)
	}
}

// seesTheLease returns a channel closed once c's Lease watch shows the Lease.
func seesTheLease(c *testCandidate) <-chan struct{} {
	saw := make(chan struct{})
	var once sync.Once
	c.cfg.leaseSeen = func() { once.Do(func() { close(saw) }) }
	return saw
}

// lostReason is the reason of the one "lost lease" line c logged.
func lostReason(t *testing.T, c *testCandidate) string {
	t.Helper()
	lines := c.logs.FilterMessage("lost lease").All()
	if len(lines) != 1 {
		t.Fatalf(`%s logged "lost lease" %d times, want 1`, c.id, len(lines))
	}
	reason, _ := lines[0].ContextMap()["reason"].(string)
	return reason
}

// A Lease another writer names itself holder of (an admin forcing a
// failover, a standby's claim) ends the leader's term as soon as its watch
// shows it, not at its renew deadline: the new holder may lead at once.
func TestALeaseTakenByAnotherEndsTheTermAtOnce(t *testing.T) {
	lease := unique("test-taken")
	a := newTestCandidate(t, "a", "default", slow)
	la := newRecorder()
	ra := a.run(t, lease, la.lead)
	recv(t, la.started, "a to lead")

	leases := adminClient(t).CoordinationV1().Leases("default")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // a renews meanwhile
		l := getLease(t, "default", lease)
		l.Spec.HolderIdentity = ref("z")
		_, err := leases.Update(context.Background(), l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ra.wait(t); !errors.Is(err, ErrLeadershipLost) {
		t.Fatalf("a's Run = %v, want ErrLeadershipLost", err)
	}
	if got, want := lostReason(t, a), `lease taken by "z"`; got != want {
		t.Errorf("a lost its lease for %q, want %q (not the renew deadline, %v)", got, want, slow.renew)
	}
	if got := holder(t, "default", lease); got != "z" {
		t.Errorf("holder after a's term = %q, want z", got)
	}
}

// A Lease deleted under its leader ends the term as soon as the leader's
// watch shows it gone, and a standby creates it again only a lease duration
// after it saw it go, as at an expiry: never while the leader may write on.
func TestADeletedLeaseEndsTheTermAndIsCreatedALeaseDurationLater(t *testing.T) {
	lease := unique("test-deleted")
	d := durations{lease: 4 * time.Second, renew: 3 * time.Second, retry: 250 * time.Millisecond}
	a := newTestCandidate(t, "a", "default", d)
	b := newTestCandidate(t, "b", "default", d)
	la, lb := newRecorder(), newRecorder()
	// A Run whose watch never saw the Lease creates it at once.
	aSaw, bSaw := seesTheLease(a), seesTheLease(b)
	ra := a.run(t, lease, la.lead)
	recv(t, la.started, "a to lead")
	b.run(t, lease, lb.lead)
	for _, saw := range []<-chan struct{}{aSaw, bSaw} {
		select {
		case <-saw:
		case <-time.After(failureBound):
			t.Fatal("a watch never showed the lease")
		}
	}

	deletedAt := time.Now()
	if err := adminClient(t).CoordinationV1().Leases("default").Delete(context.Background(), lease, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ra.wait(t); !errors.Is(err, ErrLeadershipLost) {
		t.Fatalf("a's Run = %v, want ErrLeadershipLost", err)
	}
	if got, want := lostReason(t, a), "lease deleted"; got != want {
		t.Errorf("a lost its lease for %q, want %q", got, want)
	}
	aReturned := recv(t, la.returned, "a's lead to return")
	bLeads := recv(t, lb.started, "b to lead")
	if !bLeads.After(aReturned) {
		t.Errorf("b led at %v, before a's lead returned at %v", bLeads, aReturned)
	}
	if waited := bLeads.Sub(deletedAt); waited < d.lease {
		t.Errorf("b led %v after the deletion, before a lease duration (%v)", waited, d.lease)
	}
	if got := holder(t, "default", lease); got != "b" {
		t.Errorf("holder = %q, want b", got)
	}
}
