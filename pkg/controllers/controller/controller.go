// Package controller is the informer + rate-limited workqueue loop every
// reconciler runs in (the sample-controller shape). Informers run on every
// replica so a new leader starts with a warm cache; workers run only while
// the replica holds the reconciler's Lease, with the lease's context, so no
// reconcile outlives leadership.
package controller

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/pkg/tracing"
)

// Result tells the loop what to do after a successful reconcile.
type Result struct {
	// RequeueAfter, when positive, reconciles the key again after the delay
	// (polling something outside the API server, such as environmentd).
	RequeueAfter time.Duration
}

// urgentRequeue: an urgent key requeued sooner than this stays urgent.
const urgentRequeue = time.Minute

// Reconciler brings one object, named by its namespace/name key, to its
// desired state. It must use ctx for every API call: ctx ends when the
// lease may be lost.
type Reconciler interface {
	Reconcile(ctx context.Context, key string) (Result, error)
}

// TermStarter is a Reconciler that keeps state between reconciles which a
// new leadership term must not inherit: a term begins with every key
// looked at afresh, and what an earlier term of this process decided to
// hold back (another replica may have led, and everything changed,
// meanwhile) must not delay it.
type TermStarter interface {
	StartTerm()
}

// Controller runs a Reconciler's workers while leading.
type Controller struct {
	name       string
	reconciler Reconciler
	workers    int
	log        *zap.Logger
	synced     []cache.InformerSynced
	// listKeys lists every key to reconcile when leadership starts.
	listKeys func() []string

	// spanName names the span of each reconcile: "reconcile <name>".
	spanName string

	queue   atomic.Pointer[termQueue]
	metrics *Metrics
	// changed, when set, tells which keys of a new term's resync a user
	// changed since they were last reconciled: they go first.
	changed func(key string) bool
}

// termQueue is one leadership term's work queue and its ordering.
type termQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	order *priorityQueue
}

// addUrgent queues key ahead of the resync.
func (q *termQueue) addUrgent(key string) {
	q.order.markUrgent(key)
	q.Add(key)
}

// New creates a controller. listKeys is called when a leadership term starts
// to queue every object once; informer events queue changes afterwards.
func New(name string, r Reconciler, workers int, log *zap.Logger, metrics *Metrics, listKeys func() []string, synced ...cache.InformerSynced) *Controller {
	if workers < 1 {
		workers = 1
	}
	return &Controller{name: name, spanName: "reconcile " + name, reconciler: r, workers: workers, log: log, metrics: metrics, listKeys: listKeys, synced: synced}
}

// Name is the controller's name.
func (c *Controller) Name() string { return c.name }

// PrioritizeChanged makes a new term reconcile first the keys changed
// reports as changed since last reconciled (e.g. metadata.generation ahead
// of status.observedGeneration). Set it before Run.
func (c *Controller) PrioritizeChanged(changed func(key string) bool) { c.changed = changed }

// Enqueue queues the object's key; it accepts tombstones. Events that arrive
// while the replica does not lead are dropped: the next term lists all.
func (c *Controller) Enqueue(obj any) { c.enqueue(obj, false) }

func (c *Controller) enqueue(obj any, urgent bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	if q := c.queue.Load(); q != nil {
		if urgent {
			q.addUrgent(key)
		} else {
			q.Add(key)
		}
	}
}

// userChange tells whether an update is one a user made (a new generation,
// annotations or labels, a deletion) rather than a status written by the
// controllers: those go ahead of a resync.
func userChange(oldObj, newObj any) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	if !ok1 || !ok2 {
		return false
	}
	return o.GetGeneration() != n.GetGeneration() || (o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil) ||
		!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) || !maps.Equal(o.GetLabels(), n.GetLabels())
}

// EnqueueOwner queues the owner of kind ownerKind of a child object.
func (c *Controller) EnqueueOwner(ownerKind string) func(obj any) {
	return func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		meta, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		for _, ref := range meta.GetOwnerReferences() {
			if ref.Kind == ownerKind && ref.Controller != nil && *ref.Controller {
				if q := c.queue.Load(); q != nil {
					q.Add(meta.GetNamespace() + "/" + ref.Name)
				}
			}
		}
	}
}

// Handler returns event handlers that queue the object itself: what a
// user creates, changes or deletes ahead of a resync.
func (c *Controller) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueue(obj, true) },
		UpdateFunc: func(oldObj, obj any) { c.enqueue(obj, userChange(oldObj, obj)) },
		DeleteFunc: func(obj any) { c.enqueue(obj, true) },
	}
}

// OwnerHandler returns event handlers that queue a child's owner.
func (c *Controller) OwnerHandler(ownerKind string) cache.ResourceEventHandler {
	enqueue := c.EnqueueOwner(ownerKind)
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
}

// Run reconciles until ctx ends (one leadership term), then stops taking
// work and returns once every in-flight reconcile has finished.
func (c *Controller) Run(ctx context.Context) {
	log := c.log.With(zap.String("controller", c.name))
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	rateLimiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 5*time.Minute),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: newBucket()},
	)
	order := newPriorityQueue()
	q := &termQueue{order: order, TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter,
		workqueue.TypedRateLimitingQueueConfig[string]{Name: c.name, DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(
			workqueue.TypedDelayingQueueConfig[string]{Name: c.name, Queue: workqueue.NewTypedWithConfig(
				workqueue.TypedQueueConfig[string]{Name: c.name, Queue: order})})})}
	c.queue.Store(q)
	if s, ok := c.reconciler.(TermStarter); ok {
		s.StartTerm()
	}
	for _, key := range c.listKeys() {
		if c.changed != nil && c.changed(key) {
			q.addUrgent(key)
		} else {
			q.Add(key)
		}
	}
	log.Info("controller started", zap.Int("workers", c.workers))

	var wg sync.WaitGroup
	for range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx, q, log) {
			}
		}()
	}
	select {
	case <-ctx.Done():
	case <-leaderelection.Stopping(ctx):
		// Shutdown: in-flight reconciles finish under ctx, which the lease's
		// fence, not the shutdown, bounds; nothing new starts.
		log.Info("controller draining")
	}
	c.queue.Store(nil)
	q.ShutDown()
	wg.Wait()
	queueStopped(c.name)
	log.Info("controller stopped")
}

func (c *Controller) processNext(ctx context.Context, q *termQueue, log *zap.Logger) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	if ctx.Err() != nil || stopping(ctx) {
		q.order.settle(key, false)
		return true // the queue is shutting down; the next leader lists every key
	}
	start := time.Now()
	rctx, span := tracing.Start(ctx, c.spanName, trace.SpanKindInternal)
	defer span.End()
	if span.IsRecording() {
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		span.SetAttributes(attribute.String("controller", c.name), attribute.String("namespace", ns), attribute.String("name", name))
		log = tracing.Logger(log, span)
		rctx = context.WithValue(rctx, loggerKey{}, log)
	}
	result, err := c.reconcile(rctx, key)
	c.metrics.observe(c.name, err, time.Since(start))
	tracing.Fail(span, err)
	if result.RequeueAfter > 0 && span.IsRecording() {
		span.SetAttributes(attribute.String("requeue_after", result.RequeueAfter.String()))
	}
	switch {
	case err != nil && ctx.Err() != nil:
		// Leadership ended mid-reconcile; the next leader starts over.
		q.order.settle(key, false)
	case err != nil:
		log.Info("reconcile failed; retrying with backoff", zap.String("key", key), zap.Error(err),
			zap.Int("retries", q.NumRequeues(key)))
		q.order.settle(key, true)
		q.AddRateLimited(key)
	case result.RequeueAfter > 0:
		q.Forget(key)
		// A requeue soon continues a change (a rollout polling); a later
		// one is a recheck (a Certificate's, hourly), not kept urgent.
		q.order.settle(key, result.RequeueAfter < urgentRequeue)
		q.AddAfter(key, result.RequeueAfter)
	default:
		q.Forget(key)
		q.order.settle(key, false)
	}
	return true
}

// loggerKey keys the logger of a reconcile in its context.
type loggerKey struct{}

// Logger is the logger of the reconcile ctx belongs to, with the trace_id
// and span_id of its span, when tracing is on; else fallback.
func Logger(ctx context.Context, fallback *zap.Logger) *zap.Logger {
	if log, ok := ctx.Value(loggerKey{}).(*zap.Logger); ok {
		return log
	}
	return fallback
}

func stopping(ctx context.Context) bool {
	select {
	case <-leaderelection.Stopping(ctx):
		return true
	default:
		return false
	}
}

func (c *Controller) reconcile(ctx context.Context, key string) (result Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return c.reconciler.Reconcile(ctx, key)
}
