package environmentd

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/standin/clap"
	"github.com/materializeinc/orchestratord/test/standin/ctp"
)

// caughtUpAfter is a cluster whose replicas are caught up from the n-th
// check on.
type caughtUpAfter struct {
	n      atomic.Int32
	checks atomic.Int32
}

func after(n int32) *caughtUpAfter {
	c := &caughtUpAfter{}
	c.n.Store(n)
	return c
}

// CaughtUp: one cluster, healthy once caught up.
func (c *caughtUpAfter) CaughtUp(context.Context) (bool, string, map[string]ClusterHealth) {
	if c.checks.Add(1) >= c.n.Load() {
		return true, "1/1 replica processes hydrated", map[string]ClusterHealth{"u1": {AllHealthy: true, Restarts: map[string]int32{"r-0": 0}}}
	}
	return false, "0/1 replica processes hydrated; r-0 hydrating", nil
}

func params(kv ...string) *clap.Matches {
	return &clap.Matches{Values: map[string][]string{"system-parameter-default": kv}}
}

func bootWith(t *testing.T, ctx context.Context, replicas CaughtUpChecker, args *clap.Matches) (*Deployment, <-chan error) {
	t.Helper()
	catalog := &MemoryCatalog{}
	_ = catalog.Open(ctx, 1)
	return bootOn(t, ctx, catalog, replicas, args)
}

func bootOn(t *testing.T, ctx context.Context, catalog Catalog, replicas CaughtUpChecker, args *clap.Matches) (*Deployment, <-chan error) {
	t.Helper()
	return bootPlan(t, ctx, catalog, replicas, &Plan{Listeners: &Listeners{}, Generation: "2", Args: args})
}

func bootPlan(t *testing.T, ctx context.Context, catalog Catalog, replicas CaughtUpChecker, plan *Plan) (*Deployment, <-chan error) {
	t.Helper()
	d := NewDeployment()
	p := &Process{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Catalog: catalog,
		Replicas: replicas, FenceCheck: 10 * time.Millisecond, Deployment: d}
	exit := make(chan error, 1)
	go func() { exit <- p.Run(ctx, plan) }()
	return d, exit
}

// bootAt boots generation 2 of environmentd at version over a catalog of
// generation 1.
func bootAt(t *testing.T, ctx context.Context, version string, replicas CaughtUpChecker, args *clap.Matches) (*Deployment, <-chan error) {
	t.Helper()
	catalog := &MemoryCatalog{}
	_ = catalog.Open(ctx, 1)
	return bootPlan(t, ctx, catalog, replicas,
		&Plan{Listeners: &Listeners{}, Generation: "2", Args: args, Version: imageref.MustParseVersion(version)})
}

// A new generation is ReadyToPromote only once its replicas are caught up,
// checked every 0dt_deployment_hydration_check_interval.
func TestReadyToPromoteOnlyOnceTheReplicasAreCaughtUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	replicas := after(5)
	d, _ := bootWith(t, ctx, replicas, params("0dt_deployment_hydration_check_interval=20ms"))
	for {
		// Status first: a check that lands after it cannot be counted
		// against it.
		s := d.Status()
		n := replicas.checks.Load()
		if n >= 5 {
			break
		}
		if s != mzenv.Initializing {
			t.Fatalf("status %s after %d checks, want Initializing until the fifth", s, n)
		}
		time.Sleep(time.Millisecond)
	}
	waitStatus(t, d, mzenv.ReadyToPromote)
}

// Past with_0dt_deployment_max_wait a generation proceeds uncaught; with
// enable_0dt_deployment_panic_after_timeout it panics instead (exit 134).
func TestMaxWaitProceedsOrPanics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, _ := bootWith(t, ctx, neverCaughtUp{}, params("0dt_deployment_hydration_check_interval=10ms", "with_0dt_deployment_max_wait=100ms"))
	waitStatus(t, d, mzenv.ReadyToPromote)

	_, exit := bootWith(t, ctx, neverCaughtUp{}, params("with_0dt_deployment_max_wait=50ms", "enable_0dt_deployment_panic_after_timeout=true"))
	wantExit(t, exit, ExitPanic, "thread 'preflight_0dt' panicked: not caught up within 50ms")
}

// The cluster controller waits for every process of every replica: Ready
// (the pod) and hydrated (asked over the network), and says which one
// holds the generation up.
func TestControllerWaitsForReadyAndHydratedReplicas(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	replica := &ctp.Replica{DefaultHydration: time.Hour}
	go func() { _ = replica.Serve(ln, "26.35.0", "", func(string, ...any) {}) }()
	defer ln.Close()

	sizes := `{"small":{"scale":1,"workers":1,"credits_per_hour":"1","memory_limit":"64MiB"}}`
	kube := fake.NewClientset()
	o := &Orchestrator{Kube: kube, Namespace: "ns", Prefix: "mzx-",
		Args: &clap.Matches{Values: map[string][]string{"cluster-replica-sizes": {sizes}}}}
	var dialed []string
	c := &Controller{O: o, Version: "26.35.0", HydrateFor: "100ms",
		Dial: func(ctx context.Context, addr, version, host string) (*ctp.Client, error) {
			dialed = append(dialed, addr)
			return ctp.Dial(ctx, ln.Addr().String(), version, host)
		}}
	defer c.Close()
	if ok, why, _ := c.CaughtUp(ctx); ok || why != "no replicas created yet" {
		t.Fatalf("before Manage: %v %q", ok, why)
	}
	c.Manage([]Replica{{ClusterID: "u1", ReplicaID: "u1", Size: "small"}}, 2)
	if ok, why, _ := c.CaughtUp(ctx); ok || why != "0/1 replica processes hydrated; mzx-cluster-u1-replica-u1-gen-2-0 not ready" {
		t.Fatalf("no pod: %v %q", ok, why)
	}
	ready := metav1.NewTime(time.Now().Truncate(time.Second))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mzx-cluster-u1-replica-u1-gen-2-0", Namespace: "ns",
		Labels: map[string]string{namespaceLabel: orchestratorNamespace}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: ready}}}}
	if _, err := kube.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The pod reaches the controller through its watch.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ok, why, h := c.CaughtUp(ctx)
		if !ok && strings.HasSuffix(why, "gen-2-0 hydrating") {
			if len(h) != 0 {
				t.Fatalf("a hydrating cluster's health kept for the gate: %+v", h)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ready, hydrating: %v %q", ok, why)
		}
	}
	want := "mzx-cluster-u1-replica-u1-gen-2-0.mzx-cluster-u1-replica-u1-gen-2.ns.svc.cluster.local:2101"
	if len(dialed) != 1 || dialed[0] != want {
		t.Fatalf("dialed %v, want %s", dialed, want)
	}
	time.Sleep(150 * time.Millisecond)
	ok, why, health := c.CaughtUp(ctx)
	if !ok || why != "1/1 replica processes hydrated" {
		t.Fatalf("hydrated: %v %q", ok, why)
	}
	if len(dialed) != 1 {
		t.Errorf("reconnected between checks: %v", dialed)
	}
	// The stability gate's input: each caught-up cluster's readiness and
	// restart counts, read from the pods.
	const podName = "mzx-cluster-u1-replica-u1-gen-2-0"
	if h, ok := health["u1"]; !ok || !h.AllHealthy || h.Restarts[podName] != 0 || !h.StatusChanges[podName].Equal(ready.Time) {
		t.Fatalf("health once caught up: %+v", health)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "clusterd", RestartCount: 2}}
	if _, err := kube.CoreV1().Pods("ns").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, _, health = c.CaughtUp(ctx)
		if health["u1"].Restarts[podName] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a restart not seen: %+v", health)
		}
	}

	// A second replica of the cluster, not running yet: the cluster is
	// caught up on the first, as upstream's (a collection hydrated on some
	// replica), but not healthy, which holds the stability gate.
	c.Manage([]Replica{{ClusterID: "u1", ReplicaID: "u1", Size: "small"}, {ClusterID: "u1", ReplicaID: "u2", Size: "small"}}, 2)
	ok, why, health = c.CaughtUp(ctx)
	if h, found := health["u1"]; !ok || !found || h.AllHealthy {
		t.Errorf("one of two replicas hydrated: %v %q %+v, want caught up and not healthy", ok, why, health)
	}
}

// An invalid catch-up parameter is fatal at boot, not a silent default.
func TestInvalidCatchUpParameterIsFatal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, exit := bootWith(t, ctx, neverCaughtUp{}, params("with_0dt_deployment_max_wait=soon"))
	select {
	case err := <-exit:
		if err == nil || !strings.Contains(err.Error(), "failed to parse default for with_0dt_deployment_max_wait") {
			t.Fatalf("exit %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("booted with an invalid parameter")
	}
}

// DDL against the leader while a new generation catches up halts it (exit
// 166, to reboot read-only): found by the periodic check
// (with_0dt_deployment_ddl_check_interval) or by the last look once caught
// up. A drop alone is not DDL to react to: upstream looks for items with
// ids from the next one when preflight began.
func TestDDLDuringCatchUpHalts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const msg = "halting process: there have been DDL that we need to react to; rebooting in read-only mode. New objects: [{object_id: u3}]"

	catalog := &MemoryCatalog{}
	_ = catalog.Open(ctx, 1)
	catalog.DDL()
	catalog.DDL() // u1 and u2 before the new generation boots
	d, exit := bootOn(t, ctx, catalog, neverCaughtUp{}, params("with_0dt_deployment_ddl_check_interval=20ms"))
	waitPhase(t, d, phaseCatchingUp)
	catalog.Drop(2)
	select {
	case err := <-exit:
		t.Fatalf("a drop ended catch-up: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	catalog.DDL()
	wantExit(t, exit, ExitHalt, msg)

	catalog = &MemoryCatalog{}
	_ = catalog.Open(ctx, 1)
	catalog.DDL()
	catalog.DDL()
	replicas := after(1 << 30)
	d, exit = bootOn(t, ctx, catalog, replicas, params("0dt_deployment_hydration_check_interval=10ms"))
	waitPhase(t, d, phaseCatchingUp)
	catalog.DDL()
	replicas.n.Store(0) // caught up at the next check, with the default DDL interval (5 minutes) far off
	wantExit(t, exit, ExitHalt, msg)
	if s := d.Status(); s == mzenv.ReadyToPromote {
		t.Error("ReadyToPromote with DDL it has not seen")
	}
}

// A login waits until the adapter is up, as environmentd's does (its
// password check goes through the adapter client): a client that gives up
// first gets no answer; once the adapter serves, the login succeeds.
func TestLoginWaitsForTheAdapter(t *testing.T) {
	d := NewDeployment()
	l := Listener{Name: "internal", AuthenticatorKind: "Password",
		Routes: map[string]RouteGroup{"internal": {Enabled: true, AllowedRoles: "Internal"}}}
	srv := httptest.NewServer(ListenerHandler(l, "pw", d))
	defer srv.Close()
	login := func(timeout time.Duration) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+mzenv.LoginPath,
			strings.NewReader(`{"username":"mz_system","password":"pw"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := login(200 * time.Millisecond); err == nil {
		t.Fatalf("login answered %d before the adapter was up", code)
	}
	d.SetAdapterReady()
	if code, err := login(5 * time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("login once the adapter is up: %d %v", code, err)
	}
}
