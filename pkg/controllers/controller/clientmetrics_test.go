package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/materializeinc/orchestratord/test/promtest"
)

// client-go takes one metrics provider per process: one registry for the
// package's tests.
var clientMetricsRegistry = sync.OnceValue(func() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	RegisterClientMetrics(reg)
	return reg
})

var queueNames atomic.Int32

// A term that ends with a reconcile in progress leaves no work in progress
// on the gauges: client-go stops updating them when the queue shuts down,
// and a standby showing the last term's values would fire the stuck-worker
// alert for as long as it stands by.
func TestQueueGaugesAreZeroAfterATerm(t *testing.T) {
	reg := clientMetricsRegistry()
	name := fmt.Sprintf("gauges-after-a-term-%d", queueNames.Add(1)) // -count=N
	inProgress := make(chan struct{})
	c := New(name, reconcileFunc(func(ctx context.Context, key string) (Result, error) {
		close(inProgress)
		<-ctx.Done() // the term ends under it
		return Result{}, ctx.Err()
	}), 1, zap.NewNop(), nil, func() []string { return []string{"ns/stuck"} })

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	<-inProgress
	const hangGuard = 30 * time.Second
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(50 * time.Millisecond) {
		// client-go updates the in-progress gauges every 500 ms.
		if v, _ := promtest.Value(t, reg, "workqueue_longest_running_processor_seconds", map[string]string{"name": name}); v > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gauge never showed the reconcile in progress")
		}
	}
	cancel()
	<-done
	for _, gauge := range []string{"workqueue_depth", "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"} {
		if v, ok := promtest.Value(t, reg, gauge, map[string]string{"name": name}); !ok || v != 0 {
			t.Errorf("%s after the term = %v (present %v), want 0", gauge, v, ok)
		}
	}
}
