package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/materializeinc/orchestratord/pkg/kubeclient"
	"github.com/materializeinc/orchestratord/pkg/leaderelection/takeover"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// watch informs on the single Lease (a metadata.name field selector in the
// namespace) and signals released, without blocking, whenever the Lease is
// seen without a holder — client-go's release writes an empty holderIdentity
// and leaseDurationSeconds=1. Run restarts its standby elector on that
// signal; it ignores it while leading. It signals notOurs whenever the
// Lease is seen held by another, released or deleted, and keeps presence.
// A deletion restarts nothing: the Lease is created again only a lease
// duration later (presence.mayCreate).
func (c *candidate) watch(ctx context.Context, released chan<- string) {
	leases := c.cfg.Client.CoordinationV1().Leases(c.cfg.Namespace)
	lw := kubeclient.ListWatch(c.cfg.Client, leases, kubeclient.Named(c.name))
	signal := func(reason string) {
		select {
		case released <- reason:
		default: // one pending signal is enough
		}
	}
	expiry := &expiryClaim{c: c, signal: signal}
	defer expiry.finish()
	holderPod := &takeover.Follower{
		Client: c.cfg.Client, Self: c.cfg.Identity, Logger: c.clientGoLog,
		Terminated: func(ctx context.Context, dead *takeover.Incarnation, namespace, name string) {
			if c.claimFromTerminated(ctx, dead, namespace, name) {
				signal("lease holder's process terminated")
			}
		},
	}
	defer holderPod.Stop()
	onLease := func(obj any) {
		lease, ok := obj.(*coordinationv1.Lease)
		if !ok {
			return
		}
		c.presence.seen(deref(lease.Spec.HolderIdentity) != "")
		if c.cfg.leaseSeen != nil {
			c.cfg.leaseSeen()
		}
		if deref(lease.Spec.HolderIdentity) != c.cfg.Identity {
			c.signalNotOurs()
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			holderPod.Stop()
			signal("lease released")
			return
		}
		expiry.observe(ctx, lease)
		if c.cfg.WatchHolderPods {
			holderPod.Follow(ctx, lease)
		}
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		Logger:        &c.clientGoLog,
		ListerWatcher: lw,
		ObjectType:    &coordinationv1.Lease{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    onLease,
			UpdateFunc: func(_, obj any) { onLease(obj) },
			DeleteFunc: func(any) {
				c.presence.deleted()
				expiry.stop()
				holderPod.Stop()
				c.signalNotOurs()
			},
		},
	})
	informer.RunWithContext(ctx)
}

func (c *candidate) signalNotOurs() {
	select {
	case c.notOurs <- struct{}{}:
	default: // one pending signal is enough
	}
}

// presence is the Lease as this Run's watch saw it last. The elector
// creates the Lease only when it finds none, and a Lease deleted under a
// leader that has not yet seen it go would let a standby lead at once
// while the old leader writes on until its renew deadline. So a Lease is
// created only by a Run that never saw it (a first install; the leader's
// own rejoin, once its term has ended), or a lease duration after its
// deletion was seen, as if it had expired then, unless it was last seen
// with no holder; and never while the watch still shows it.
type presence struct {
	mu        sync.Mutex
	present   bool
	held      bool // when last seen, it named a holder
	deletedAt time.Time
}

func (p *presence) seen(held bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.present, p.held = true, held
}

func (p *presence) deleted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.present, p.deletedAt = false, time.Time{}
	if p.held {
		p.deletedAt = time.Now()
	}
}

func (p *presence) mayCreate(leaseDuration time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.present:
		return errors.New("not creating the lease: its watch has not yet seen it deleted")
	case p.deletedAt.IsZero():
		return nil
	}
	if since := time.Since(p.deletedAt); since < leaseDuration {
		return fmt.Errorf("not creating the lease until a lease duration (%v) after it was seen deleted, %v ago, as at an expiry: its last holder may not have seen it go yet",
			leaseDuration, since.Round(time.Millisecond))
	}
	return nil
}

// expiryClaim takes over a Lease whose holder stopped renewing, as soon as
// the lease has expired by client-go's own rule (no change observed for
// leaseDurationSeconds). client-go's elector would notice only at its next
// jittered poll, up to ~2 retry periods late, and a restarted elector
// observes the record afresh and waits a whole lease duration; so the claim
// is written here, conditional on the resourceVersion that was observed,
// and the elector restarted finds itself the holder and leads at once.
//
// Safety: the watch sees a renewal no earlier than the API server stored it,
// and the old holder stops writing RenewDeadline after sending it, which is
// before LeaseDuration after it was stored.
type expiryClaim struct {
	c      *candidate
	signal func(string)
	mu     sync.Mutex
	timer  *time.Timer
	// done: the watch has ended (its informer, which calls observe, has
	// returned); no claim starts, and finish waits for the one in progress
	// (Run reads the Lease after it).
	done     bool
	claiming sync.WaitGroup
}

func (e *expiryClaim) observe(ctx context.Context, lease *coordinationv1.Lease) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	if *lease.Spec.HolderIdentity == e.c.cfg.Identity || lease.Spec.LeaseDurationSeconds == nil {
		return
	}
	observed := lease.DeepCopy()
	wait := time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	e.timer = time.AfterFunc(wait, func() {
		e.mu.Lock()
		if e.done {
			e.mu.Unlock()
			return
		}
		e.claiming.Add(1)
		e.mu.Unlock()
		defer e.claiming.Done()
		e.claim(ctx, observed)
	})
}

func (e *expiryClaim) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
}

// finish stops the claims for good and waits for the one in progress.
func (e *expiryClaim) finish() {
	e.mu.Lock()
	e.done = true
	e.mu.Unlock()
	e.stop()
	e.claiming.Wait()
}

func (e *expiryClaim) claim(ctx context.Context, observed *coordinationv1.Lease) {
	if ctx.Err() != nil {
		return
	}
	// Once begun, the claim is seen through, as claimFromTerminated's: a
	// write cancelled in flight could land unknown to Run's last check.
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.c.cfg.RenewDeadline)
	defer cancel()
	// After a pause the timer fires late, before the watch has delivered the
	// renewals since: read first, and claim only an unchanged lease.
	current, err := e.c.cfg.Client.CoordinationV1().Leases(observed.Namespace).Get(claimCtx, observed.Name, metav1.GetOptions{})
	if err != nil || current.ResourceVersion != observed.ResourceVersion {
		return
	}
	if e.c.take(claimCtx, current, "expired lease claimed") {
		e.signal("lease expired")
	}
}

// take writes this candidate as the holder of current, conditional on its
// resourceVersion, starting a new term; the elector, restarted by the
// caller's signal, then finds itself the holder and leads at once. It
// reports whether the write landed: a Conflict means a renewal or another
// claimant got there first.
func (c *candidate) take(ctx context.Context, current *coordinationv1.Lease, msg string) bool {
	lock := c.newLeaseLock()
	if err := lock.claim(ctx, current, c.cfg.LeaseDuration); err != nil {
		return false
	}
	c.claimedVersion.Store(&lock.lease.ResourceVersion)
	previous := ""
	if current.Spec.HolderIdentity != nil {
		previous = *current.Spec.HolderIdentity
	}
	c.log.Info(msg, zap.String("previousHolder", previous))
	return true
}

// claimFromTerminated takes the Lease if it is still held by the dead
// incarnation: read afresh, so that a holder restarted in the same pod that
// has reclaimed it meanwhile (its new incarnation in the annotation) is
// left alone, and written conditional on what was read.
func (c *candidate) claimFromTerminated(ctx context.Context, dead *takeover.Incarnation, namespace, name string) bool {
	current, err := c.cfg.Client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || current.Spec.HolderIdentity == nil {
		return false
	}
	inc, ok := takeover.ParseHolder(current.Annotations, *current.Spec.HolderIdentity)
	if !ok || *inc != *dead {
		return false
	}
	c.log.Info("lease holder's process terminated", zap.String("holder", dead.Pod), zap.String("incarnation", dead.ID))
	// The claim, once sent, is seen through: the watch of the Lease sees it
	// land and stops the follower, whose cancellation would otherwise
	// abandon the response and leave a claim made but not known.
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.RenewDeadline)
	defer cancel()
	return c.take(claimCtx, current, "lease of a terminated holder claimed")
}
