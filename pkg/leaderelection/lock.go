package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/materializeinc/orchestratord/pkg/leaderelection/fence"
)

// fencedLock wraps the LeaseLock of one client-go elector. It
//   - records when the last successful write naming us as holder was sent,
//     which is what the fence and the health check measure from;
//   - holds back client-go's release (an Update with an empty holder) until
//     lead has returned, whatever path made client-go release;
//   - refuses a release when the Lease last read is held by someone else:
//     client-go's tryRelease decides it is the leader from its cached
//     observation, not from the record it has just read, so without this a
//     late release could clear the holder of a Lease a standby has since
//     acquired;
//   - refuses every write (renewal or release) once RenewDeadline has passed
//     since the last renewal: by then the lease may be expired and taken,
//     and a process resumed from a pause must not touch it again;
//   - refuses a release before releaseNotBefore: a fenced term's writes may
//     still land until a takeover by expiry could have come, and a release
//     would let a standby take over sooner than that.
type fencedLock struct {
	inner         resourcelock.Interface
	renewDeadline time.Duration
	// mayAcquire, when set, is asked before a write that would make us the
	// holder of a Lease someone else (or no one) held: the placement (package spread).
	mayAcquire func() bool
	// mayCreate, when set, is asked before the Lease is created: a Lease
	// seen deleted is created again only later (presence.mayCreate).
	mayCreate func() error
	// releaseNotBefore, when set, is when a release may be written (Terms).
	releaseNotBefore func() time.Time

	gate     chan struct{} // closed once lead has returned or will not run
	gateOnce sync.Once

	mu         sync.Mutex
	renewed    time.Time // send time of the last successful write naming us holder
	lastHolder string    // holder of the record last read or written
	released   bool      // a release was written
}

var _ resourcelock.Interface = (*fencedLock)(nil)

func newFencedLock(inner resourcelock.Interface, renewDeadline time.Duration) *fencedLock {
	return &fencedLock{inner: inner, renewDeadline: renewDeadline, gate: make(chan struct{})}
}

// pastRenewDeadline tells whether this term held the Lease and has gone
// RenewDeadline without renewing it.
func (l *fencedLock) pastRenewDeadline() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.renewed.IsZero() && time.Since(l.renewed) >= l.renewDeadline
}

func (l *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.inner.Get(ctx)
	if err == nil {
		l.mu.Lock()
		l.lastHolder = rec.HolderIdentity
		l.mu.Unlock()
	}
	return rec, raw, err
}

// errDeferring refuses an acquisition that the placement leaves to a less
// loaded replica; client-go tries again at its next retry.
var errDeferring = errors.New("deferring to a replica that leads fewer leases")

// errFencedWritesInFlight refuses a release soon after a fenced term.
var errFencedWritesInFlight = errors.New("a fenced term's writes may still be in flight")

// takingReleased tells whether writing rec would take a Lease its holder
// released. Placement applies only to those: a released Lease is taken at
// once by the chosen replica's watch, while a Lease expired under a crashed
// holder goes to whichever standby claims it first (at expiry), and the
// hand-over rule rebalances afterwards, so placement never delays a
// failover.
func (l *fencedLock) takingReleased(rec resourcelock.LeaderElectionRecord) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return rec.HolderIdentity == l.Identity() && l.lastHolder == ""
}

func (l *fencedLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if l.mayCreate != nil {
		if err := l.mayCreate(); err != nil {
			return fmt.Errorf("lease %s: %w", l.Describe(), err)
		}
	}
	if l.mayAcquire != nil && l.takingReleased(rec) && !l.mayAcquire() {
		return fmt.Errorf("lease %s: %w", l.Describe(), errDeferring)
	}
	sent := time.Now()
	err := l.inner.Create(ctx, rec)
	l.wrote(rec, sent, err)
	return err
}

func (l *fencedLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if l.pastRenewDeadline() {
		return fmt.Errorf("lease %s: %w", l.Describe(), fence.ErrFenced)
	}
	if rec.HolderIdentity != "" {
		if l.mayAcquire != nil && l.takingReleased(rec) && !l.mayAcquire() {
			return fmt.Errorf("lease %s: %w", l.Describe(), errDeferring)
		}
		sent := time.Now()
		err := l.inner.Update(ctx, rec)
		l.wrote(rec, sent, err)
		return err
	}
	// client-go only writes an empty holder to release the Lease.
	select {
	case <-l.gate:
	case <-ctx.Done():
		return fmt.Errorf("not releasing lease %s before lead returned: %w", l.Describe(), ctx.Err())
	}
	l.mu.Lock()
	holder := l.lastHolder
	l.mu.Unlock()
	if holder != l.Identity() {
		return fmt.Errorf("not releasing lease %s: it is held by %q", l.Describe(), holder)
	}
	if l.releaseNotBefore != nil {
		if until := l.releaseNotBefore(); time.Now().Before(until) {
			return fmt.Errorf("not releasing lease %s before %s: %w", l.Describe(), until.UTC().Format(time.RFC3339Nano), errFencedWritesInFlight)
		}
	}
	err := l.inner.Update(ctx, rec)
	if apierrors.IsConflict(err) {
		// A renewal cancelled at shutdown may still have landed, leaving the
		// elector's cached record stale; read again and release if still ours.
		if current, _, getErr := l.Get(ctx); getErr == nil && current.HolderIdentity == l.Identity() {
			rec.LeaderTransitions = current.LeaderTransitions // as client-go's release: from the record read
			err = l.inner.Update(ctx, rec)
		}
	}
	if err == nil {
		l.mu.Lock()
		l.released, l.lastHolder = true, ""
		l.mu.Unlock()
	}
	return err
}

func (l *fencedLock) wrote(rec resourcelock.LeaderElectionRecord, sent time.Time, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.lastHolder = rec.HolderIdentity
		if rec.HolderIdentity == l.Identity() {
			l.renewed = sent
		}
	}
}

func (l *fencedLock) RecordEvent(s string) { l.inner.RecordEvent(s) }
func (l *fencedLock) Identity() string     { return l.inner.Identity() }
func (l *fencedLock) Describe() string     { return l.inner.Describe() }

// openGate lets a release through; lead has returned or will not run.
func (l *fencedLock) openGate() { l.gateOnce.Do(func() { close(l.gate) }) }

func (l *fencedLock) renewedAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed
}

func (l *fencedLock) wasReleased() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

// releaseIfHeld releases the Lease if the API server says we hold it
// although no term leads under it (a claim that landed after its request
// was cancelled, or just before a shutdown), and reports whether it did.
// The record written is the one client-go's release writes. A release
// held back after a fenced term (releaseNotBefore) is waited for, through
// wait, and the Lease read again. err says why a Lease found held was not
// released.
func (l *fencedLock) releaseIfHeld(timeout time.Duration, wait func(until time.Time), beforeRelease func()) (released bool, err error) {
	heldRecord := func() *resourcelock.LeaderElectionRecord {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		rec, _, err := l.Get(ctx)
		if err != nil || rec.HolderIdentity != l.Identity() {
			return nil
		}
		return rec
	}
	rec := heldRecord()
	if rec == nil {
		return false, nil
	}
	if l.releaseNotBefore != nil {
		if until := l.releaseNotBefore(); time.Now().Before(until) {
			wait(until)
			if rec = heldRecord(); rec == nil {
				return false, nil
			}
		}
	}
	if beforeRelease != nil {
		beforeRelease()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	now := metav1.Now()
	l.openGate()
	err = l.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions:    rec.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	})
	return err == nil, err
}
