package leaderelection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/materializeinc/orchestratord/pkg/leaderelection/takeover"
)

// leaseLock is client-go's resourcelock.LeaseLock plus two things it cannot
// do: it writes HolderAnnotation whenever it names this process holder, and
// the first write of a term over a record that already names this identity
// (a process restarted in the same pod, or one rejoining after a lost
// Lease) starts a new term — AcquireTime and LeaseTransitions move — where
// client-go would carry the old term on, so the two lives stay apart in the
// Lease's history. The one record naming this identity that a term carries
// on is the claim its own watch has just written (claimed).
type leaseLock struct {
	namespace, name string
	identity        string
	client          coordinationv1client.LeasesGetter
	incarnation     *takeover.Incarnation // nil: no annotation
	// claimed returns the resourceVersion of the last claim this Run's
	// watch wrote ("" for none): that claim began the term already.
	claimed func() string
	// claimsSince is when this Run began or its last term ended (claimedJustNow).
	claimsSince time.Time

	lease  *coordinationv1.Lease // last read or written
	termed bool                  // this term has written the Lease
	// The term's start as first written: client-go keeps renewing with the
	// record it observed before, so a new term stamped here is kept here.
	acquired    metav1.Time
	transitions int
}

var _ resourcelock.Interface = (*leaseLock)(nil)

func (l *leaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	lease, err := l.client.Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	l.lease = lease
	rec := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(*rec)
	if err != nil {
		return nil, nil, err
	}
	return rec, raw, nil
}

func (l *leaseLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace},
		Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&rec),
	}
	l.annotate(lease, rec.HolderIdentity)
	created, err := l.client.Leases(l.namespace).Create(ctx, lease, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	l.lease = created
	l.began(rec)
	return nil
}

func (l *leaseLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if l.lease == nil {
		return errors.New("lease not initialized, call get or create first")
	}
	lease := l.lease.DeepCopy()
	switch {
	case rec.HolderIdentity != l.identity:
	case l.termed:
		rec.AcquireTime, rec.LeaderTransitions = l.acquired, l.transitions
	case lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == l.identity && !l.claimedJustNow(lease):
		// client-go renews a Lease naming its identity as its own; no term
		// of this Run has led under this record, so it is a new one. The
		// incarnation cannot tell: a process rejoining after a lost Lease
		// is the same incarnation, and its lost term has ended.
		rec.AcquireTime = rec.RenewTime
		rec.LeaderTransitions++
	}
	lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&rec)
	l.annotate(lease, rec.HolderIdentity)
	updated, err := l.client.Leases(l.namespace).Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	l.lease = updated
	l.began(rec)
	return nil
}

// claim writes this process as the holder of current, as read (its
// resourceVersion is the write's precondition), starting a new term: the
// standbys' takeover (watch.go) writes the record through the lock, as the
// elector does, so one place says what a term's record is.
func (l *leaseLock) claim(ctx context.Context, current *coordinationv1.Lease, leaseDuration time.Duration) error {
	now := metav1.NowMicro()
	transitions := 1
	if current.Spec.LeaseTransitions != nil {
		transitions += int(*current.Spec.LeaseTransitions)
	}
	rec := resourcelock.LeaderElectionRecord{
		HolderIdentity: l.identity, LeaseDurationSeconds: int(leaseDuration / time.Second),
		AcquireTime: metav1.Time(now), RenewTime: metav1.Time(now), LeaderTransitions: transitions,
	}
	claimed := current.DeepCopy() // carries the resourceVersion read
	claimed.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&rec)
	l.annotate(claimed, l.identity)
	updated, err := l.client.Leases(l.namespace).Update(ctx, claimed, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	l.lease = updated
	return nil
}

// began records the term a write naming this process started.
func (l *leaseLock) began(rec resourcelock.LeaderElectionRecord) {
	if rec.HolderIdentity == l.identity && !l.termed {
		l.termed, l.acquired, l.transitions = true, rec.AcquireTime, rec.LeaderTransitions
	}
}

// claimedJustNow tells whether lease is the claim this Run's watch wrote
// (watch.go), which started the term before the elector renewed it: the
// claim's resourceVersion, or, before its answer is back (or when it was
// lost), this process's incarnation with a term begun since this Run
// began and its last term ended. A term of the same incarnation begun
// before is one that has ended (lost, or handed over), and a new term.
func (l *leaseLock) claimedJustNow(lease *coordinationv1.Lease) bool {
	if l.claimed != nil && lease.ResourceVersion != "" && lease.ResourceVersion == l.claimed() {
		return true
	}
	if l.incarnation == nil || lease.Spec.AcquireTime == nil {
		return false
	}
	inc, ok := takeover.ParseHolder(lease.Annotations, l.identity)
	return ok && inc.ID == l.incarnation.ID && !lease.Spec.AcquireTime.Time.Before(l.claimsSince)
}

// annotate sets HolderAnnotation for this process when it is the holder;
// a release (empty holder) removes it, so a stale one never names a pod
// that no longer holds the Lease.
func (l *leaseLock) annotate(lease *coordinationv1.Lease, holder string) {
	switch {
	case holder == l.identity && l.incarnation != nil:
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[takeover.HolderAnnotation] = l.incarnation.Annotation()
	case holder == "" || holder == l.identity:
		delete(lease.Annotations, takeover.HolderAnnotation)
	}
}

func (l *leaseLock) RecordEvent(string) {}
func (l *leaseLock) Identity() string   { return l.identity }
func (l *leaseLock) Describe() string   { return fmt.Sprintf("%s/%s", l.namespace, l.name) }
