package leaderelection

import (
	"fmt"
	"sync"
	"time"
)

// Terms records the terms of the Leases held by the Runs that share it
// (Config.Terms): a Lease counts as held from acquisition until lead has
// returned and the term is over. It answers, per Lease, whether a write
// without a lead context still belongs to a current term (WritesAllowed,
// RecordedInTermOf), for the fence (package fence); HealthChecker reads
// it for /healthz.
type Terms struct {
	mu   sync.Mutex
	held map[*term]struct{}
	// fencedUntil is, per Lease, until when a fenced term's writes may
	// still land: its last renewal's send time plus the lease duration,
	// the soonest a standby could take the Lease by expiry. It outlives
	// the Run whose term was fenced (the next Run may find the Lease still
	// naming this process).
	fencedUntil map[string]time.Time
}

type term struct {
	lease, identity string
	leaseDuration   time.Duration
	renewDeadline   time.Duration
	renewedAt       func() time.Time
	// since is when this term began.
	since time.Time
}

// NewTerms returns an empty record.
func NewTerms() *Terms {
	return &Terms{held: map[*term]struct{}{}, fencedUntil: map[string]time.Time{}}
}

// fenced records that a term of lease was fenced: its writes, sent up to a
// renew deadline after renewedAt, may still be on the wire, so the Lease
// must not be released before renewedAt + leaseDuration, when a standby
// could have taken it by expiry anyway.
func (t *Terms) fenced(lease string, renewedAt time.Time, leaseDuration time.Duration) {
	if t == nil || renewedAt.IsZero() {
		return
	}
	until := renewedAt.Add(leaseDuration)
	t.mu.Lock()
	defer t.mu.Unlock()
	if until.After(t.fencedUntil[lease]) {
		t.fencedUntil[lease] = until
	}
}

// releaseNotBefore is when lease may be released again after a fenced
// term; zero (or past) when it may be released now. A nil record holds
// nothing back.
func (t *Terms) releaseNotBefore(lease string) time.Time {
	if t == nil {
		return time.Time{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fencedUntil[lease]
}

// WritesAllowed reports whether the process may still write on behalf of
// lease: it holds lease now and its last successful renewal is less than
// the renew deadline old. It fences writes that carry no lead context,
// such as queued Events, and only those of that Lease: the terms of the
// process's other Leases go on. A nil record allows every write.
func (t *Terms) WritesAllowed(lease string) bool {
	if t == nil {
		return true
	}
	_, ok := t.current(lease)
	return ok
}

// RecordedInTermOf reports whether something recorded at at on behalf of
// lease (a queued Event) may still be written: the process holds lease
// now, within its renew deadline, and at is from the current term. Without
// it an Event queued before a lost or handed-over lease would go out
// later, under another holder's term or a later one of this process.
func (t *Terms) RecordedInTermOf(lease string, at time.Time) bool {
	if t == nil {
		return true
	}
	since, ok := t.current(lease)
	return ok && !at.Before(since)
}

// current returns when the current term of lease began, if the process
// holds lease and may still write under it.
func (t *Terms) current(lease string) (since time.Time, ok bool) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for h := range t.held {
		if h.lease == lease && now.Sub(h.renewedAt()) < h.renewDeadline {
			return h.since, true
		}
	}
	return time.Time{}, false
}

// overdue names every held Lease whose last renewal is older than its
// lease duration plus tolerance.
func (t *Terms) overdue(tolerance time.Duration) []string {
	now := time.Now()
	var out []string
	t.mu.Lock()
	defer t.mu.Unlock()
	for h := range t.held {
		if since := now.Sub(h.renewedAt()); since > h.leaseDuration+tolerance {
			out = append(out, fmt.Sprintf("%s (held by %s, last renewed %v ago)", h.lease, h.identity, since.Round(time.Millisecond)))
		}
	}
	return out
}

// track records a held Lease until the returned function is called. A nil
// record tracks nothing.
func (t *Terms) track(lease, identity string, leaseDuration, renewDeadline time.Duration, renewedAt func() time.Time) (untrack func()) {
	if t == nil {
		return func() {}
	}
	h := &term{lease: lease, identity: identity, leaseDuration: leaseDuration, renewDeadline: renewDeadline, renewedAt: renewedAt, since: time.Now()}
	t.mu.Lock()
	t.held[h] = struct{}{}
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.held, h)
		t.mu.Unlock()
	}
}
