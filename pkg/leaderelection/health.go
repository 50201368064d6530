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
//
// The same record of the terms held answers, per Lease, whether a write
// without a lead context still belongs to a current term (WritesAllowed,
// RecordedInTermOf), for the fence (package fence).
type HealthChecker struct {
	tolerance time.Duration

	mu   sync.Mutex
	held map[*heldLease]struct{}
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
// lease: it holds lease now and its last successful renewal is less than
// the renew deadline old. It fences writes that carry no lead context,
// such as queued Events, and only those of that Lease: the terms of the
// process's other Leases go on.
func (h *HealthChecker) WritesAllowed(lease string) bool {
	if h == nil {
		return true
	}
	_, ok := h.currentTerm(lease)
	return ok
}

// RecordedInTermOf reports whether something recorded at t on behalf of
// lease (a queued Event) may still be written: the process holds lease
// now, within its renew deadline, and t is from the current term. Without
// it an Event queued before a lost or handed-over lease would go out
// later, under another holder's term or a later one of this process.
func (h *HealthChecker) RecordedInTermOf(lease string, t time.Time) bool {
	if h == nil {
		return true
	}
	since, ok := h.currentTerm(lease)
	return ok && !t.Before(since)
}

// currentTerm returns when the current term of lease began, if the process
// holds lease and may still write under it.
func (h *HealthChecker) currentTerm(lease string) (since time.Time, ok bool) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.held {
		if l.name == lease && now.Sub(l.renewedAt()) < l.renewDeadline {
			return l.since, true
		}
	}
	return time.Time{}, false
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
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.held, l)
		h.mu.Unlock()
	}
}
