package leaderelection

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// HealthChecker is a /healthz check over every Lease held by the Runs that
// share it (Config.Health). It fails while any held Lease is overdue for
// renewal: its last successful renewal is older than the lease duration
// plus the tolerance, which is client-go's HealthzAdaptor rule
// (LeaderElector.Check) aggregated over leases. Run normally stops leading
// long before (at the renew deadline); the check catches a replica that
// cannot get there, e.g. a lead function that ignores its context, so the
// kubelet restarts it. A Lease counts as held from acquisition until lead has
// returned and the term is over.
type HealthChecker struct {
	tolerance time.Duration

	mu      sync.Mutex
	held    map[*heldLease]struct{}
	fenced  bool
	onFence func()
	// writableSince is when the process last regained the right to write
	// after a fence: what was recorded before it belongs to a lost term.
	writableSince time.Time
}

type heldLease struct {
	name, identity string
	leaseDuration  time.Duration
	renewDeadline  time.Duration
	renewedAt      func() time.Time
	// since is when this term began.
	since time.Time
}

// NewHealthChecker returns a checker that tolerates a held Lease going
// unrenewed for its lease duration plus tolerance (client-go's
// NewLeaderHealthzAdaptor timeout).
func NewHealthChecker(tolerance time.Duration) *HealthChecker {
	return &HealthChecker{tolerance: tolerance, held: map[*heldLease]struct{}{}}
}

// Name names the check, as k8s.io/apiserver's healthz.HealthChecker does.
func (h *HealthChecker) Name() string { return "leader-election" }

// Check returns an error naming every held Lease overdue for renewal.
func (h *HealthChecker) Check(_ *http.Request) error {
	now := time.Now()
	var overdue []string
	h.mu.Lock()
	for l := range h.held {
		if since := now.Sub(l.renewedAt()); since > l.leaseDuration+h.tolerance {
			overdue = append(overdue, fmt.Sprintf("%s (held by %s, last renewed %v ago)", l.name, l.identity, since.Round(time.Millisecond)))
		}
	}
	h.mu.Unlock()
	if len(overdue) == 0 {
		return nil
	}
	slices.Sort(overdue)
	return fmt.Errorf("leases overdue for renewal: %s", strings.Join(overdue, ", "))
}

// WritesAllowed reports whether the process may still write on behalf of
// its leases: false from the moment any held Lease has gone unrenewed past
// its renew deadline, until this process acquires a Lease again (it rejoins
// the election after a lost lease). It fences writes that carry no lead
// context, such as queued Events.
func (h *HealthChecker) WritesAllowed() bool {
	if h == nil {
		return true
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.held {
		if now.Sub(l.renewedAt()) >= l.renewDeadline {
			h.fenced = true
		}
	}
	return !h.fenced
}

// RecordedInTermOf reports whether something recorded at t on behalf of
// lease (a queued Event) may still be written: writes are allowed, the
// process holds lease now, and t is from the current term of lease, after
// the process last regained the right to write. Without it an Event
// queued before a lost or handed-over lease would go out later, under a
// term of another lease or another holder's term of this one.
func (h *HealthChecker) RecordedInTermOf(lease string, t time.Time) bool {
	if h == nil {
		return true
	}
	if !h.WritesAllowed() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.Before(h.writableSince) {
		return false
	}
	for l := range h.held {
		if l.name == lease && !t.Before(l.since) {
			return true
		}
	}
	return false
}

// OnFence sets what runs each time a lease is lost to its renew deadline,
// such as aborting the API connections (Connections.Abort). Set it before
// any Run starts.
func (h *HealthChecker) OnFence(f func()) { h.onFence = f }

// markFenced records that a lease was lost: no more writes from this process.
func (h *HealthChecker) markFenced() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.fenced = true
	h.mu.Unlock()
	if h.onFence != nil {
		h.onFence()
	}
}

// track records a held Lease until the returned function is called. A nil
// checker tracks nothing.
func (h *HealthChecker) track(name, identity string, leaseDuration, renewDeadline time.Duration, renewedAt func() time.Time) (untrack func()) {
	if h == nil {
		return func() {}
	}
	l := &heldLease{name: name, identity: identity, leaseDuration: leaseDuration, renewDeadline: renewDeadline, renewedAt: renewedAt, since: time.Now()}
	h.mu.Lock()
	h.held[l] = struct{}{}
	if h.fenced {
		// Leading again: writes are this term's (WritesAllowed rechecks
		// every held lease); anything queued before belongs to a lost term.
		h.fenced = false
		h.writableSince = time.Now()
	}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.held, l)
		h.mu.Unlock()
	}
}
