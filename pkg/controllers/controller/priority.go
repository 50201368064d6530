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
// key marked urgent while it waits in the resync class moves up.
//
// Changes are what tenants write, so they cannot starve the resync: after
// urgentRun urgent keys in a row, one resync key goes, whatever waits.
//
// The workqueue calls it under its own lock; urgent keys are marked by
// markUrgent from informer handlers, hence its own.
type priorityQueue struct {
	mu     sync.Mutex
	marked map[string]struct{}
	urgent list.List
	resync list.List
	where  map[string]*list.Element
	// popped are the urgent keys handed out and not yet settled: one whose
	// reconcile asks to be requeued (a rollout polling environmentd) stays
	// urgent until it settles, or a change would wait behind the resync
	// after its first step.
	popped map[string]struct{}
	// run counts the urgent keys popped since the last resync key.
	run int
}

// urgentRun is how many urgent keys may go before a waiting resync key.
const urgentRun = 4

// entry is a queued key and its class.
type entry struct {
	key    string
	urgent bool
}

func newPriorityQueue() *priorityQueue {
	return &priorityQueue{marked: map[string]struct{}{}, where: map[string]*list.Element{}, popped: map[string]struct{}{}}
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
		q.where[key] = q.urgent.PushBack(&entry{key: key, urgent: true})
		return
	}
	q.where[key] = q.resync.PushBack(&entry{key: key})
}

// Touch is the workqueue's notice that a waiting key was added again.
func (q *priorityQueue) Touch(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.marked[key]; !ok {
		return
	}
	delete(q.marked, key)
	if e, ok := q.where[key]; ok && !e.Value.(*entry).urgent {
		q.resync.Remove(e)
		q.where[key] = q.urgent.PushBack(&entry{key: key, urgent: true})
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
	if from.Len() == 0 || (q.run >= urgentRun && q.resync.Len() > 0) {
		from = &q.resync
	}
	e := from.Front()
	from.Remove(e)
	en := e.Value.(*entry)
	if en.urgent {
		q.run++
		q.popped[en.key] = struct{}{}
	} else {
		q.run = 0
	}
	delete(q.where, en.key)
	return en.key
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
