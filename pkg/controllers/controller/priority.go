package controller

import (
	"container/list"
	"strings"
	"sync"
)

// priorityQueue is the workqueue's ordering (workqueue.Queue): keys a user
// changed go before the keys a new leadership term lists to resync. A new
// leader queues every object once; without it a change made meanwhile
// waited behind the whole resync (27 s at 1 000 Materializes), which undid
// a sub-second hand-over. Within each class a namespace's keys keep their
// order, and a key marked urgent while it waits in the resync class moves
// up.
//
// Changes are what tenants write, so they cannot starve the resync: after
// urgentRun urgent keys in a row, one resync key goes, whatever waits,
// unless every namespace of the resync has a key in flight while an idle
// one has a change (it goes first; the busy ones are idle again as soon
// as their workers ask for more).
//
// Within each class namespaces take turns (fairList): one tenant's
// thousand queued keys delay another's next key by one key per namespace
// waiting, not by its thousand. A namespace with a key being reconciled
// waits while another has keys waiting: one tenant's slow reconciles (an
// environmentd answering near the client's timeout) hold one worker, not
// all of them, while others have work.
//
// The workqueue calls it under its own lock; urgent keys are marked by
// markUrgent from informer handlers, hence its own.
type priorityQueue struct {
	mu     sync.Mutex
	marked map[string]struct{}
	urgent fairList
	resync fairList
	where  map[string]*list.Element
	// popped are the urgent keys handed out and not yet settled: one whose
	// reconcile asks to be requeued (a rollout polling environmentd) stays
	// urgent until it settles, or a change would wait behind the resync
	// after its first step.
	popped map[string]struct{}
	// run counts the urgent keys popped since the last resync key.
	run int
	// inFlight counts, per namespace, the keys handed out and not settled.
	inFlight map[string]int
}

// urgentRun is how many urgent keys may go before a waiting resync key.
const urgentRun = 4

// entry is a queued key and its class.
type entry struct {
	key    string
	urgent bool
}

// fairList is a FIFO of entries per namespace (the key's part before its
// '/'; cluster-scoped keys share ""), served in turn: the front is the
// first key of the namespace whose turn it is, and that namespace then
// goes to the back of the turn. Keys of one namespace keep their order.
type fairList struct {
	queues map[string]*list.List
	turn   list.List // namespaces with keys waiting
	turnOf map[string]*list.Element
	n      int
}

func namespaceOf(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return ""
}

func (f *fairList) Len() int { return f.n }

func (f *fairList) PushBack(en *entry) *list.Element {
	if f.queues == nil {
		f.queues, f.turnOf = map[string]*list.List{}, map[string]*list.Element{}
	}
	ns := namespaceOf(en.key)
	q := f.queues[ns]
	if q == nil {
		q = list.New()
		f.queues[ns] = q
		f.turnOf[ns] = f.turn.PushBack(ns)
	}
	f.n++
	return q.PushBack(en)
}

// Remove takes e, returned by PushBack, out of the list.
func (f *fairList) Remove(e *list.Element) {
	ns := namespaceOf(e.Value.(*entry).key)
	q := f.queues[ns]
	q.Remove(e)
	f.n--
	if q.Len() == 0 {
		delete(f.queues, ns)
		f.turn.Remove(f.turnOf[ns])
		delete(f.turnOf, ns)
	}
}

// hasIdle reports whether a namespace that is not busy has keys. At most
// one namespace per worker is busy, so the search is short.
func (f *fairList) hasIdle(busy func(namespace string) bool) bool {
	for t := f.turn.Front(); t != nil; t = t.Next() {
		if !busy(t.Value.(string)) {
			return true
		}
	}
	return false
}

// PopFront removes and returns the entry whose turn it is, passing over
// busy namespaces while one that is not has keys; the list must not be
// empty. At most one namespace per worker is busy, so the search is short.
func (f *fairList) PopFront(busy func(namespace string) bool) *entry {
	next := f.turn.Front()
	for t := next; t != nil; t = t.Next() {
		if !busy(t.Value.(string)) {
			next = t
			break
		}
	}
	ns := next.Value.(string)
	e := f.queues[ns].Front()
	f.Remove(e)
	if own, ok := f.turnOf[ns]; ok {
		f.turn.MoveToBack(own)
	}
	return e.Value.(*entry)
}

func newPriorityQueue() *priorityQueue {
	return &priorityQueue{marked: map[string]struct{}{}, where: map[string]*list.Element{}, popped: map[string]struct{}{}, inFlight: map[string]int{}}
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
	from, other := &q.urgent, &q.resync
	if from.Len() == 0 || (q.run >= urgentRun && q.resync.Len() > 0) {
		from, other = &q.resync, &q.urgent
	}
	busy := func(ns string) bool { return q.inFlight[ns] > 0 }
	// An idle namespace goes first, whatever its class: a busy tenant's
	// changes do not take a second worker from another's rollout.
	if other.Len() > 0 && !from.hasIdle(busy) && other.hasIdle(busy) {
		from = other
	}
	en := from.PopFront(busy)
	q.inFlight[namespaceOf(en.key)]++
	if en.urgent {
		q.run++
		q.popped[en.key] = struct{}{}
	} else {
		q.run = 0
	}
	delete(q.where, en.key)
	return en.key
}

// settle ends the reconcile of a key handed out by Pop, and its urgency;
// requeued says its reconcile asked to run again, which keeps it urgent.
// Every key Pop hands out is settled once.
func (q *priorityQueue) settle(key string, requeued bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ns := namespaceOf(key); q.inFlight[ns] > 1 {
		q.inFlight[ns]--
	} else {
		delete(q.inFlight, ns)
	}
	if _, ok := q.popped[key]; !ok {
		return
	}
	delete(q.popped, key)
	if requeued {
		q.marked[key] = struct{}{}
	}
}
