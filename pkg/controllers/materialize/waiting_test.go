package materialize

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/materializeinc/orchestratord/test/promtest"
)

// The gauge counts each Materialize once, by what it waits for, every kind
// present (0 when none); a record its replica stopped renewing (it no
// longer leads) drops out.
func TestWaitingCountsFreshRecords(t *testing.T) {
	now := time.Unix(1000, 0)
	w := NewWaiting()
	w.clock = func() time.Time { return now }
	registry := prometheus.NewRegistry()
	registry.MustRegister(w)
	value := func(kind string) float64 {
		v, ok := promtest.Value(t, registry, "orchestratord_materialize_rollout_waiting", map[string]string{"waiting_for": kind})
		if !ok {
			t.Fatalf("no series for %s", kind)
		}
		return v
	}
	w.set("a/x", WaitingClusterdPods)
	w.set("a/y", WaitingClusterdPods)
	w.set("b/x", WaitingHydration)
	w.set("b/x", WaitingEnvironmentdPod) // the newest record wins
	if value(WaitingClusterdPods) != 2 || value(WaitingEnvironmentdPod) != 1 || value(WaitingHydration) != 0 || value(WaitingEnvironmentd) != 0 {
		t.Fatalf("counts: clusterd %v, environmentd pod %v, hydration %v", value(WaitingClusterdPods), value(WaitingEnvironmentdPod), value(WaitingHydration))
	}
	w.set("a/y", "") // its rollout ended
	now = now.Add(30 * time.Second)
	w.set("a/x", WaitingClusterdPods) // renewed
	now = now.Add(45 * time.Second)   // b/x was last renewed 75 s ago
	if value(WaitingClusterdPods) != 1 || value(WaitingEnvironmentdPod) != 0 {
		t.Fatalf("after an end and a stale record: clusterd %v, environmentd pod %v", value(WaitingClusterdPods), value(WaitingEnvironmentdPod))
	}
	if got := w.Of("a", "x"); got != WaitingClusterdPods {
		t.Errorf("Of(a, x) = %q", got)
	}
	var nilWaiting *Waiting
	nilWaiting.set("a/x", WaitingHydration) // a reconciler without a count
}
