package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/prometheus/client_golang/prometheus"
)

func newTermQueue() *termQueue {
	order := newPriorityQueue()
	return &termQueue{order: order, TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(
			workqueue.TypedDelayingQueueConfig[string]{Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Queue: order})})})}
}

func drain(q *termQueue, n int) []string {
	var got []string
	for range n {
		key, _ := q.Get()
		got = append(got, key)
		q.order.settle(key, false)
		q.Done(key)
	}
	return got
}

// Changes go before the resync, in their order; the resync keeps its own;
// a key waiting in the resync that a user changes moves up; a key being
// reconciled when changed is reconciled again first.
func TestChangesGoBeforeTheResync(t *testing.T) {
	q := newTermQueue()
	defer q.ShutDown()
	for _, k := range []string{"r1", "r2", "r3", "r4"} {
		q.Add(k)
	}
	q.addUrgent("u1")
	q.addUrgent("r3") // waiting in the resync: moves up
	q.addUrgent("u2")
	q.Add("u1") // a status write on a queued change: it stays where it is
	if got, want := drain(q, 3), []string{"u1", "r3", "u2"}; !slices.Equal(got, want) {
		t.Fatalf("first %v, want %v", got, want)
	}
	key, _ := q.Get() // r1, being reconciled
	q.addUrgent(key)  // changed meanwhile
	q.order.settle(key, false)
	q.Done(key)
	if got, want := drain(q, 1), []string{"r1"}; !slices.Equal(got, want) {
		t.Errorf("then %v, want %v", got, want)
	}
	// An urgent key whose reconcile asks to run again (a rollout step)
	// stays urgent; a resync key that does goes back to the resync.
	q.addUrgent("u3")
	u3, _ := q.Get()
	q.order.settle(u3, true)
	q.AddAfter(u3, 0)
	q.Done(u3)
	if got, want := drain(q, 1), []string{"u3"}; !slices.Equal(got, want) {
		t.Errorf("after an urgent requeue %v, want %v", got, want)
	}
	r2, _ := q.Get()
	q.order.settle(r2, true)
	q.AddAfter(r2, 0)
	q.Done(r2)
	if got, want := drain(q, 2), []string{"r4", "r2"}; !slices.Equal(got, want) {
		t.Errorf("after a resync requeue %v, want %v", got, want)
	}
	if q.Len() != 0 || len(q.order.where) != 0 || len(q.order.popped) != 0 || len(q.order.marked) != 0 || len(q.order.inFlight) != 0 {
		t.Errorf("left: %d queued, %d tracked, %d popped, %d marked, %d namespaces in flight",
			q.Len(), len(q.order.where), len(q.order.popped), len(q.order.marked), len(q.order.inFlight))
	}
}

// Changes are what tenants write: a stream of them cannot starve the
// resync, which gets every urgentRun+1-th key.
func TestChangesCannotStarveTheResync(t *testing.T) {
	q := newTermQueue()
	defer q.ShutDown()
	q.Add("r1")
	q.Add("r2")
	for i := range 2 * urgentRun {
		q.addUrgent(fmt.Sprintf("u%d", i))
	}
	got := drain(q, urgentRun+1)
	if got[urgentRun] != "r1" {
		t.Errorf("popped %v: the resync got no turn after %d changes", got, urgentRun)
	}
	if rest := drain(q, urgentRun+1); rest[urgentRun] != "r2" {
		t.Errorf("then %v: the resync got no second turn", rest)
	}
}

// One tenant's flood of changes (or of resync keys) delays another
// tenant's change by one key per namespace waiting, not by the flood; each
// namespace's keys keep their order.
func TestNamespacesTakeTurns(t *testing.T) {
	q := newTermQueue()
	defer q.ShutDown()
	for i := range 1000 {
		q.addUrgent(fmt.Sprintf("flood/mz%04d", i))
	}
	q.addUrgent("quiet/mz")
	q.addUrgent("other/mz")
	if got, want := drain(q, 4), []string{"flood/mz0000", "quiet/mz", "other/mz", "flood/mz0001"}; !slices.Equal(got, want) {
		t.Errorf("changes popped %v, want %v", got, want)
	}
	// A namespace that empties and queues again waits for its turn.
	q.addUrgent("quiet/mz2")
	if got, want := drain(q, 2), []string{"flood/mz0002", "quiet/mz2"}; !slices.Equal(got, want) {
		t.Errorf("then %v, want %v", got, want)
	}
	if got := drain(q, 997); got[0] != "flood/mz0003" || got[996] != "flood/mz0999" || !slices.IsSorted(got) {
		t.Errorf("the flood's own keys out of order: %v ... %v", got[:3], got[len(got)-3:])
	}

	for i := range 100 {
		q.Add(fmt.Sprintf("flood/mz%04d", i))
	}
	q.Add("quiet/mz")
	if got, want := drain(q, 3), []string{"flood/mz0000", "quiet/mz", "flood/mz0001"}; !slices.Equal(got, want) {
		t.Errorf("resync popped %v, want %v", got, want)
	}
	drain(q, 98)
	o := q.order
	if q.Len() != 0 || len(o.where) != 0 || len(o.popped) != 0 || len(o.marked) != 0 ||
		o.urgent.Len() != 0 || len(o.urgent.queues) != 0 || o.urgent.turn.Len() != 0 || len(o.urgent.turnOf) != 0 ||
		o.resync.Len() != 0 || len(o.resync.queues) != 0 || o.resync.turn.Len() != 0 || len(o.resync.turnOf) != 0 {
		t.Errorf("left: %d queued, %d tracked, %d popped, %d marked, namespaces %d urgent and %d resync",
			q.Len(), len(o.where), len(o.popped), len(o.marked), len(o.urgent.queues), len(o.resync.queues))
	}
}

// A namespace whose key is being reconciled waits while another has keys:
// one tenant's slow reconciles hold one worker, not every one, while
// other tenants have work; alone, it takes them all.
func TestABusyNamespaceWaitsWhileOthersHaveKeys(t *testing.T) {
	q := newTermQueue()
	defer q.ShutDown()
	get := func() string {
		key, _ := q.Get()
		return key
	}
	done := func(key string) {
		q.order.settle(key, false)
		q.Done(key)
	}
	for i := range 3 {
		q.addUrgent(fmt.Sprintf("slow/mz%d", i))
	}
	q.addUrgent("quick/mz0")
	held := get() // slow/mz0, still being reconciled
	if quick := get(); quick != "quick/mz0" {
		t.Fatalf("second key %s, want quick/mz0", quick)
	} else {
		done(quick)
	}
	// slow's turn, but slow is busy and quick has a key.
	q.addUrgent("quick/mz1")
	if got := get(); got != "quick/mz1" {
		t.Errorf("beside a busy namespace, popped %s, want quick/mz1", got)
	} else {
		done(got)
	}
	// Nor does a change of the busy namespace go before another's resync
	// key: classes apart, an idle namespace goes first.
	q.Add("quick/mz2")
	if got := get(); got != "quick/mz2" {
		t.Errorf("a busy namespace's change before an idle one's resync key: popped %s, want quick/mz2", got)
	} else {
		done(got)
	}
	// Only the busy namespace has keys: it takes the idle worker.
	second := get()
	if second != "slow/mz1" {
		t.Errorf("alone, popped %s, want slow/mz1", second)
	}
	done(held)
	done(second)
	drain(q, 1)
	if len(q.order.inFlight) != 0 {
		t.Errorf("in flight after every key settled: %v", q.order.inFlight)
	}
}

// A change whose reconcile asks to run again soon (a rollout polling)
// stays urgent; one rechecked an hour later (a Certificate) does not, or
// every key ever changed would stay ahead of the resync for the term.
func TestOnlyASoonRequeueStaysUrgent(t *testing.T) {
	for _, c := range []struct {
		after  time.Duration
		urgent bool
	}{{2 * time.Second, true}, {time.Hour, false}} {
		rec := reconcilerFunc(func(context.Context, string) (Result, error) { return Result{RequeueAfter: c.after}, nil })
		ctrl := New("test", rec, 1, zap.NewNop(), NewMetrics(prometheus.NewRegistry()), func() []string { return nil })
		q := newTermQueue()
		q.addUrgent("ns/mz")
		ctrl.processNext(context.Background(), q, zap.NewNop())
		q.ShutDown()
		if _, urgent := q.order.marked["ns/mz"]; urgent != c.urgent {
			t.Errorf("requeued after %v: urgent %v, want %v", c.after, urgent, c.urgent)
		}
	}
}

type reconcilerFunc func(context.Context, string) (Result, error)

func (f reconcilerFunc) Reconcile(ctx context.Context, key string) (Result, error) {
	return f(ctx, key)
}

type recordingReconciler struct {
	mu   sync.Mutex
	keys []string
	// first blocks the first reconcile until closed.
	first chan struct{}
}

func (r *recordingReconciler) Reconcile(_ context.Context, key string) (Result, error) {
	r.mu.Lock()
	n := len(r.keys)
	r.keys = append(r.keys, key)
	r.mu.Unlock()
	if n == 0 {
		<-r.first
	}
	return Result{}, nil
}

func (r *recordingReconciler) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.keys)
}

// A new term reconciles first what changed while no one led, then a
// user's change made during the resync, then the rest of the resync.
func TestANewTermReconcilesChangesFirst(t *testing.T) {
	r := &recordingReconciler{first: make(chan struct{})}
	var keys []string
	for i := range 100 {
		keys = append(keys, fmt.Sprintf("ns/mz%02d", i))
	}
	c := New("test", r, 1, zap.NewNop(), NewMetrics(prometheus.NewRegistry()), func() []string { return keys })
	c.PrioritizeChanged(func(key string) bool { return key == "ns/mz50" })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()

	for len(r.seen()) == 0 {
		time.Sleep(time.Millisecond)
	}
	obj := func(generation int64) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Namespace: "ns", Name: "mz70", Generation: generation}
	}
	c.Handler().OnUpdate(obj(1), obj(1)) // a status write: no hurry
	c.Handler().OnUpdate(obj(1), obj(2)) // a user's change
	close(r.first)
	for len(r.seen()) < 100 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if got := r.seen()[:3]; !slices.Equal(got, []string{"ns/mz50", "ns/mz70", "ns/mz00"}) {
		t.Errorf("reconciled first %v, want the changed mz50, then mz70 changed during the resync, then the resync", got)
	}
}
