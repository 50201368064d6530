package environmentd

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
)

// The gate's rules, check by check: a streak starts at the first healthy
// check and ends at any disruption (not healthy, a readiness change, a
// restart, a process added), and a cluster no longer caught up starts
// from scratch.
func TestStabilityGateRestartsTheStreakOnEveryDisruption(t *testing.T) {
	t0 := time.Unix(1000, 0)
	health := func(all bool, changed time.Time, restarts int32) ClusterHealth {
		return ClusterHealth{AllHealthy: all, StatusChanges: map[string]time.Time{"r-0": changed}, Restarts: map[string]int32{"r-0": restarts}}
	}
	healthy := func(changed time.Time, restarts int32) ClusterHealth { return health(true, changed, restarts) }
	g := stabilityGate{period: 10 * time.Second}
	type check struct {
		at        time.Duration
		caughtUp  map[string]ClusterHealth
		ready     bool
		waitingOn string
	}
	for i, c := range []check{
		{0, map[string]ClusterHealth{"u1": healthy(t0, 0)}, false, "not yet stable"},
		{10 * time.Second, map[string]ClusterHealth{"u1": healthy(t0, 0)}, true, ""},
		// A restart resets the streak; it starts again at the next check.
		{11 * time.Second, map[string]ClusterHealth{"u1": healthy(t0, 1)}, false, "restarted"},
		{12 * time.Second, map[string]ClusterHealth{"u1": healthy(t0, 1)}, false, "not yet stable"},
		{21 * time.Second, map[string]ClusterHealth{"u1": healthy(t0, 1)}, false, "not yet stable"},
		// A readiness that changed and came back between two checks.
		{22 * time.Second, map[string]ClusterHealth{"u1": healthy(t0.Add(21500*time.Millisecond), 1)}, false, "status changed"},
		{23 * time.Second, map[string]ClusterHealth{"u1": health(false, t0.Add(22500*time.Millisecond), 1)}, false, "not all replicas healthy"},
		{24 * time.Second, map[string]ClusterHealth{"u1": healthy(t0.Add(22500*time.Millisecond), 1)}, false, "not yet stable"},
		// A process added (a replica created) is churn, as a restart.
		{25 * time.Second, map[string]ClusterHealth{"u1": {AllHealthy: true, StatusChanges: map[string]time.Time{"r-0": t0.Add(22500 * time.Millisecond), "r-1": t0},
			Restarts: map[string]int32{"r-0": 1, "r-1": 0}}}, false, "status changed"},
		{26 * time.Second, map[string]ClusterHealth{"u1": {AllHealthy: true, StatusChanges: map[string]time.Time{"r-0": t0.Add(22500 * time.Millisecond), "r-1": t0},
			Restarts: map[string]int32{"r-0": 1, "r-1": 0}}}, false, "not yet stable"},
		// A flap on a node whose clock is behind: an earlier time than
		// the last, which a cluster-wide maximum would not see.
		{27 * time.Second, map[string]ClusterHealth{"u1": {AllHealthy: true, StatusChanges: map[string]time.Time{"r-0": t0.Add(22500 * time.Millisecond), "r-1": t0.Add(time.Second)},
			Restarts: map[string]int32{"r-0": 1, "r-1": 0}}}, false, "status changed"},
		// Not caught up at one check: the streak is gone with it.
		{35 * time.Second, nil, true, ""},
		{36 * time.Second, map[string]ClusterHealth{"u1": healthy(t0, 0)}, false, "not yet stable"},
		{46 * time.Second, map[string]ClusterHealth{"u1": healthy(t0, 0), "u2": healthy(t0, 0)}, false, "cluster u2"},
		{56 * time.Second, map[string]ClusterHealth{"u1": healthy(t0, 0), "u2": healthy(t0, 0)}, true, ""},
	} {
		ready, waiting := g.observe(c.caughtUp, t0.Add(c.at))
		if ready != c.ready || !strings.Contains(waiting, c.waitingOn) {
			t.Fatalf("check %d at %v: ready %v, waiting %q; want %v, %q", i, c.at, ready, waiting, c.ready, c.waitingOn)
		}
	}
	// A zero period still wants the replicas healthy at one check.
	zero := stabilityGate{}
	if ready, _ := zero.observe(map[string]ClusterHealth{"u1": {Restarts: map[string]int32{}}}, t0); ready {
		t.Error("a zero period promoted an unhealthy cluster")
	}
	zero = stabilityGate{}
	if ready, _ := zero.observe(map[string]ClusterHealth{"u1": healthy(t0, 0)}, t0); !ready {
		t.Error("a zero period held a healthy cluster back")
	}
}

// restartingReplica is a cluster caught up at every check whose replica
// restarts at each of its first checks.
type restartingReplica struct {
	mu          sync.Mutex
	checks      int
	restartsFor int
	restarts    int32
	lastRestart time.Time
}

func (r *restartingReplica) CaughtUp(context.Context) (bool, string, map[string]ClusterHealth) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks++
	if r.checks <= r.restartsFor {
		r.restarts++
		r.lastRestart = time.Now()
	}
	return true, "1/1 replica processes hydrated", map[string]ClusterHealth{"u1": {AllHealthy: true, Restarts: map[string]int32{"r-0": r.restarts}}}
}

// From 26.32 a caught-up generation is ReadyToPromote only once its
// clusters stayed caught up and healthy for
// with_0dt_caught_up_check_stability_period: a replica restarting at
// every check holds it back, and the period counts from the first check
// after the last restart. Before 26.32, or with
// enable_0dt_caught_up_stability_check=false, caught up is ready.
func TestReadyToPromoteWaitsForAStableCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const period = 300 * time.Millisecond
	r := &restartingReplica{restartsFor: 10}
	d, _ := bootAt(t, ctx, "26.35.0", r, params("0dt_deployment_hydration_check_interval=10ms", "with_0dt_caught_up_check_stability_period=300ms"))
	waitStatus(t, d, mzenv.ReadyToPromote)
	r.mu.Lock()
	checks, last := r.checks, r.lastRestart
	r.mu.Unlock()
	if checks <= r.restartsFor {
		t.Fatalf("ReadyToPromote after %d checks, with the replica restarting at each of the first %d", checks, r.restartsFor)
	}
	if since := time.Since(last); since < period {
		t.Fatalf("ReadyToPromote %v after the last restart, want at least %v", since, period)
	}

	// Upstream's default: ten minutes.
	d, _ = bootAt(t, ctx, "26.35.0", &restartingReplica{}, params("0dt_deployment_hydration_check_interval=10ms"))
	waitPhase(t, d, phaseCatchingUp)
	time.Sleep(200 * time.Millisecond)
	if s := d.Status(); s == mzenv.ReadyToPromote {
		t.Fatal("ReadyToPromote within the default stability period")
	}

	for _, tc := range []struct {
		version string
		args    []string
	}{
		{"26.31.0", []string{"with_0dt_caught_up_check_stability_period=1h"}},
		{"26.35.0", []string{"with_0dt_caught_up_check_stability_period=1h", "enable_0dt_caught_up_stability_check=false"}},
	} {
		r := &restartingReplica{restartsFor: 1 << 30}
		d, _ := bootAt(t, ctx, tc.version, r, params(append([]string{"0dt_deployment_hydration_check_interval=10ms"}, tc.args...)...))
		waitStatus(t, d, mzenv.ReadyToPromote)
	}
}
