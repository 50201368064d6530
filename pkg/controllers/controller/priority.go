package controller

import (
	"container/list"
	"sync"
)

// priorityQueue is the workqueue's ordering (workqueue.Queue): keys a user
// changed go before the keys a new leadership term lists to resync. A new
// leader queues every object once; without it a change made meanwhile
// waited behind the whole resync (27 s at 1 000 Materializes), which undid
// a sub-second hand-over. Within each class keys keep their order, and a
// key marked urgent while it waits in the resync class moves up: the
// resync is not starved, it only yields to changes.
//
// The workqueue calls it under its own lock; urgent keys are marked by
// markUrgent from informer handlers, hence its own.
type priorityQueue struct {
	mu     sync.Mutex
	marked map[string]struct{}
	urgent list.List
	resync list.List
	where  map[string]*list.Element
	// inUrgent tells which list an element is in.
	inUrgent map[*list.Element]bool
	// popped are the urgent keys handed out and not yet settled: one whose
	// reconcile asks to be requeued (a rollout polling environmentd) stays
	// urgent until it settles, or a change would wait behind the resync
	// after its first step.
	popped map[string]struct{}
}

func newPriorityQueue() *priorityQueue {
	return &priorityQueue{marked: map[string]struct{}{}, where: map[string]*list.Element{}, inUrgent: map[*list.Element]bool{},
		popped: map[string]struct{}{}}
}

// markUrgent makes key's next Push (or a Touch of it waiting) urgent; call
// it before adding key to the workqueue.
func (q *priorityQueue) markUrgent(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.marked[key] = struct{}{}
}

func (q *priorityQueue) Push(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.marked[key]; ok {
		delete(q.marked, key)
		e := q.urgent.PushBack(key)
		q.where[key], q.inUrgent[e] = e, true
		return
	}
	q.where[key] = q.resync.PushBack(key)
}

// Touch is the workqueue's notice that a waiting key was added again.
func (q *priorityQueue) Touch(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.marked[key]; !ok {
		return
	}
	delete(q.marked, key)
	if e, ok := q.where[key]; ok && !q.inUrgent[e] {
		q.resync.Remove(e)
		e := q.urgent.PushBack(key)
		q.where[key], q.inUrgent[e] = e, true
	}
}

func (q *priorityQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.urgent.Len() + q.resync.Len()
}

// Pop is called only when Len is positive.
func (q *priorityQueue) Pop() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	from := &q.urgent
	if from.Len() == 0 {
		from = &q.resync
	}
	e := from.Front()
	from.Remove(e)
	key := e.Value.(string)
	if q.inUrgent[e] {
		q.popped[key] = struct{}{}
	}
	delete(q.where, key)
	delete(q.inUrgent, e)
	return key
}

// settle ends the urgency of a key handed out by Pop; requeued says its
// reconcile asked to run again, which keeps it urgent.
func (q *priorityQueue) settle(key string, requeued bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.popped[key]; !ok {
		return
	}
	delete(q.popped, key)
	if requeued {
		q.marked[key] = struct{}{}
	}
}
