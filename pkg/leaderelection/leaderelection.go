// Package leaderelection runs each reconciler under its own fenced
// coordination.k8s.io/v1 Lease (docs/leader-election.md). It is built on client-go's
// tools/leaderelection with a resourcelock.LeaseLock, not a new protocol, and
// adds what client-go leaves to its callers:
//
//   - Fencing. The context given to lead is cancelled as soon as leadership is
//     lost or may be lost: when a renewal has not succeeded within
//     RenewDeadline of the previous successful one (measured from the moment
//     that renewal was sent, on the monotonic clock), which is before any
//     other candidate can consider the Lease expired (LeaseDuration after it
//     observed that renewal). Run then returns ErrLeadershipLost, after lead
//     has returned, and the caller may Run again to rejoin the election.
//     Callers must pass the lead context to every
//     write they make (and to nothing that outlives lead), so that a write is
//     never started after that point. A request already on the wire when the
//     context is cancelled can still land; the margin LeaseDuration −
//     RenewDeadline is what covers it.
//   - Graceful handover. When Run's context is cancelled, Stopping(lead
//     context) is closed: lead stops taking new work and lets what is in
//     flight finish under a lead context that stays valid (the fence, not
//     the shutdown, bounds its writes) for at most DrainTimeout, after which
//     the lead context is cancelled. Run waits for lead to return — the
//     Lease is still renewed meanwhile — and only then releases the Lease.
//   - Fast takeover. Standbys watch their Lease and, when it is released
//     (holderIdentity empty), restart client-go's elector, whose first
//     attempt acquires a released Lease at once instead of waiting for the
//     next RetryPeriod poll.
//   - No second writer by another's hand. A leader whose watch shows its
//     Lease held by another, released by another or deleted ends its term
//     at once rather than at its renew deadline, and a Lease seen deleted
//     is created again only a lease duration later.
//
// The clock-skew assumptions are client-go's: candidates only compare local
// monotonic durations, so clocks may differ but must advance at about the
// same rate.
package leaderelection

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/zapr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sle "k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/materializeinc/orchestratord/pkg/kubeclient"
	"github.com/materializeinc/orchestratord/pkg/leaderelection/fence"
	"github.com/materializeinc/orchestratord/pkg/leaderelection/takeover"
)

// Lease names, one per reconciler (docs/leader-election.md).
const (
	LeaseMaterialize = "orchestratord-materialize-controller"
	LeaseBalancer    = "orchestratord-balancer-controller"
	LeaseConsole     = "orchestratord-console-controller"
)

// LeaseName returns the name of the Lease of a reconciler, as named by
// --controllers ("materialize", "balancer", "console").
func LeaseName(controller string) string {
	return "orchestratord-" + controller + "-controller"
}

// ErrLeadershipLost is returned by Run when leadership ended for any reason
// other than the cancellation of Run's own context: a renewal did not succeed
// within the renew deadline, or client-go's elector stopped leading. The
// caller may call Run again (rejoin): lead has returned, so nothing of the
// lost term is still running.
var ErrLeadershipLost = errors.New("leaderelection: leadership lost")

// ErrLeadReturned is returned by Run when lead returned although its context
// was not cancelled. The Lease has been released (lead had returned), unless
// a fenced term's writes could still land (Terms); the caller should treat
// it as a failure of the reconciler.
var ErrLeadReturned = errors.New("leaderelection: lead returned while still leading")

// errShutdown is the cause of the lead context's cancellation when Run's own
// context is done.
var errShutdown = errors.New("leaderelection: shutting down")

// errHandOver ends a term whose Lease the placement gives to a less-loaded replica.
var errHandOver = errors.New("leaderelection: handing the lease over")

// Config configures Run. The same Config may be used for several leases.
type Config struct {
	// Client talks to the API server holding the Leases.
	Client kubeclient.Interface
	// Namespace holds the Leases.
	Namespace string
	// Identity is this replica's holder identity; see DefaultIdentity.
	Identity string
	// LeaseDuration is how long other candidates wait, after observing a
	// renewal, before they consider the Lease expired. It is written to the
	// Lease in whole seconds and must be at least one second.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader may go without a successful
	// renewal before it stops leading (its lead context is cancelled). It
	// must be less than LeaseDuration (truncated to seconds) and more than
	// 1.2 × RetryPeriod.
	RenewDeadline time.Duration
	// RetryPeriod is how often candidates try to acquire, and the leader
	// to renew, the Lease.
	RetryPeriod time.Duration
	// Logger receives one line per leadership event. Nil means no logs.
	Logger *zap.Logger
	// Metrics, when set, receives the per-lease metrics
	// orchestratord_leader_election_is_leader{lease} and
	// orchestratord_leader_election_transitions_total{lease}.
	Metrics prometheus.Registerer
	// Terms, when set, records the terms of the leases held by Run, for
	// the writes that carry no lead context (Terms.WritesAllowed) and for
	// /healthz (HealthChecker), and, across Runs, when a term was fenced:
	// no release of that Lease until its writes can no longer land. Nil
	// records nothing and holds no release back.
	Terms *Terms
	// OnFence, when set, runs each time a term ends because its Lease may
	// have expired (not on a release): it aborts the connections that
	// term's writes use (Connections.Abort), and only those, so the terms
	// of the process's other Leases keep theirs.
	OnFence func()
	// Placement, when set, places leadership among the replicas (package
	// spread); nil leaves it to whoever comes first.
	Placement Placement
	// Incarnation, when set, is written to the Leases this process holds
	// (takeover.HolderAnnotation), so that standbys take them over as soon as the
	// kubelet reports this process terminated. Nil: only at expiry.
	Incarnation *takeover.Incarnation
	// WatchHolderPods makes a standby watch the pod of the holder named by
	// takeover.HolderAnnotation and claim the Lease once the kubelet reports that
	// holder's process terminated, instead of waiting for the Lease to
	// expire. It needs list and watch on pods in the holder's namespace.
	WatchHolderPods bool
	// DrainTimeout is how long lead may go on, after Run's context is done,
	// finishing in-flight work under a valid lead context (see Stopping).
	// Zero cancels the lead context at once.
	DrainTimeout time.Duration

	// leaseSeen, in tests, is called each time the Lease watch shows the
	// Lease.
	leaseSeen func()
}

// Placement decides, for a replica, which Leases it may take and which it
// should hand over (spread.Placement).
type Placement interface {
	// MayAcquire reports whether this replica may take the Lease now.
	MayAcquire(lease string) bool
	// ShouldHandOver reports whether this replica should release the Lease
	// it holds to a less-loaded one.
	ShouldHandOver(lease string) bool
	// Withdraw stops counting this replica: it is shutting down.
	Withdraw()
}

type stoppingKey struct{}

// Stopping returns a channel closed when the Run that gave ctx to lead is
// shutting down: lead must stop taking new work and return once its
// in-flight work is done. Its context stays valid until then (or until
// DrainTimeout, or a lost lease), so that work is finished, not cut short.
// For a context not from Run it returns nil, which never closes.
func Stopping(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(stoppingKey{}).(chan struct{})
	return ch
}

func (c Config) validate(name string, lead func(context.Context)) error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("client is nil"))
	}
	if c.Namespace == "" {
		errs = append(errs, errors.New("namespace is empty"))
	}
	if c.Identity == "" {
		errs = append(errs, errors.New("identity is empty"))
	}
	if name == "" {
		errs = append(errs, errors.New("lease name is empty"))
	}
	if lead == nil {
		errs = append(errs, errors.New("lead is nil"))
	}
	// client-go writes int(LeaseDuration / time.Second) to the Lease and
	// other candidates use that value, so fence against the truncated one.
	written := c.LeaseDuration.Truncate(time.Second)
	switch {
	case written < time.Second:
		errs = append(errs, fmt.Errorf("lease duration %v is less than one second", c.LeaseDuration))
	case c.RenewDeadline >= written:
		errs = append(errs, fmt.Errorf("renew deadline %v must be less than the lease duration %v (as written to the Lease, in whole seconds)", c.RenewDeadline, written))
	}
	if c.RetryPeriod <= 0 {
		errs = append(errs, fmt.Errorf("retry period %v must be positive", c.RetryPeriod))
	} else if c.RenewDeadline <= time.Duration(k8sle.JitterFactor*float64(c.RetryPeriod)) {
		errs = append(errs, fmt.Errorf("renew deadline %v must be greater than %v × retry period %v", c.RenewDeadline, k8sle.JitterFactor, c.RetryPeriod))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("leaderelection: invalid config for lease %q: %w", name, err)
	}
	return nil
}

// DefaultIdentity returns $POD_NAME, else the hostname plus a random suffix
// (so that two processes on one host never share an identity).
func DefaultIdentity() string {
	if pod := os.Getenv("POD_NAME"); pod != "" {
		return pod
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "orchestratord"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return host + "-" + hex.EncodeToString(b[:])
}

// Run campaigns for the Lease name in cfg.Namespace until ctx is done. While
// this replica leads, Run calls lead with a context that is cancelled the
// moment leadership is lost or may be lost (see the package documentation);
// every write lead makes must use that context.
//
// Run never returns before lead has returned. It returns:
//   - nil when ctx is done: Stopping was closed (and the lead context
//     cancelled after DrainTimeout), lead returned, then the Lease was
//     released (best effort) so a standby takes over at once. A standby
//     releases the Lease too if the API server names it the holder (best
//     effort). Within a lease duration of a fenced term's last renewal,
//     the release waits for that time first (Terms).
//   - ErrLeadershipLost when leadership ended for any other reason (a
//     renewal failed within RenewDeadline); the caller may Run again.
//   - ErrLeadReturned when lead returned on its own; the Lease is released.
//   - a configuration error, at once.
func Run(ctx context.Context, cfg Config, name string, lead func(ctx context.Context)) error {
	if err := cfg.validate(name, lead); err != nil {
		return err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	c := &candidate{
		cfg:     cfg,
		name:    name,
		lead:    lead,
		log:     logger.With(zap.String("lease", cfg.Namespace+"/"+name), zap.String("identity", cfg.Identity)),
		notOurs: make(chan struct{}, 1),
	}
	began := time.Now()
	c.claimsSince.Store(&began)
	// client-go's own lines duplicate ours; keep only its warnings and
	// errors (e.g. why a renewal or a release failed).
	clientGo := c.log.Named("client-go")
	if clientGo.Core().Enabled(zapcore.InfoLevel) { // IncreaseLevel complains unless it raises the level
		clientGo = clientGo.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
	}
	c.clientGoLog = zapr.NewLogger(clientGo)
	var err error
	if c.metrics, err = newLeaseMetrics(cfg.Metrics, name); err != nil {
		c.log.Warn("leader election metrics not registered", zap.Error(err))
	}

	released := make(chan string, 1)
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { c.watch(watchCtx, released) })
	defer func() {
		stopWatch()
		watching.Wait()
	}()

	for {
		out := outcomeShutdown
		if ctx.Err() == nil {
			var err error
			if out, err = c.term(ctx, released); err != nil {
				return err
			}
		}
		switch out {
		case outcomeRestart:
			continue
		case outcomeShutdown:
			// A claim naming this replica may have landed with no term
			// leading under it: a write cancelled in flight by a takeover
			// restart, or the watch's claim just before the shutdown. A
			// term that led may not have released it either: its release
			// is refused within a fenced term's window (Terms), or fails.
			// So the check follows every shutdown.
			// Checked once the watch has stopped and its claim in progress
			// is over, so a standby need not wait for the Lease to
			// expire. Best effort: the elector's own write, cancelled by
			// the shutdown, may still land after this read.
			stopWatch()
			watching.Wait()
			c.releaseIfHeld()
			return nil
		case outcomeLeadReturned:
			return ErrLeadReturned
		default:
			return ErrLeadershipLost
		}
	}
}

type outcome int

const (
	outcomeRestart outcome = iota
	outcomeShutdown
	outcomeLost
	outcomeLeadReturned
)

// candidate is one Run: one lease, one identity.
type candidate struct {
	cfg         Config
	name        string
	lead        func(context.Context)
	log         *zap.Logger
	clientGoLog klog.Logger
	metrics     leaseMetrics

	// notOurs is signalled, without blocking, whenever the Lease watch
	// shows the Lease held by another, released or deleted; a leading
	// term then asks the API server (watchHolder).
	notOurs chan struct{}
	// presence is the Lease as the watch last saw it; a Create waits on it.
	presence presence
	// claimedVersion is the resourceVersion of the last claim the watch
	// wrote (take), which began a term the elector then carries on.
	claimedVersion atomic.Pointer[string]
	// claimsSince is when this Run began or its last term ended,
	// whichever is later: a term of this process's incarnation begun
	// since is the watch's claim (leaseLock.claimedJustNow).
	claimsSince atomic.Pointer[time.Time]
}

// releaseIfHeld releases the Lease if the API server names this replica its
// holder while no term leads.
func (c *candidate) releaseIfHeld() {
	lock := c.newFencedLock()
	var withdraw func()
	if c.cfg.Placement != nil {
		// Others must not count a replica leaving as the least loaded.
		withdraw = c.cfg.Placement.Withdraw
	}
	wait := func(until time.Time) {
		c.log.Info("waiting until a fenced term's writes can no longer land before releasing the lease",
			zap.String("until", until.UTC().Format(time.RFC3339Nano)))
		time.Sleep(time.Until(until))
	}
	switch released, err := lock.releaseIfHeld(c.cfg.RenewDeadline, wait, withdraw); {
	case released:
		c.log.Info("released lease found held while shutting down")
	case err != nil:
		c.log.Warn("lease held while shutting down not released", zap.Error(err))
	}
}

// newFencedLock is the lock of one term or release check: it holds a
// release back while a fenced term of the Lease may still be writing.
func (c *candidate) newFencedLock() *fencedLock {
	lock := newFencedLock(c.newLeaseLock(), c.cfg.RenewDeadline)
	lock.releaseNotBefore = func() time.Time { return c.cfg.Terms.releaseNotBefore(c.name) }
	lock.mayCreate = func() error { return c.presence.mayCreate(c.cfg.LeaseDuration) }
	return lock
}

func (c *candidate) newLeaseLock() *leaseLock {
	return &leaseLock{
		namespace: c.cfg.Namespace, name: c.name, identity: c.cfg.Identity,
		client: c.cfg.Client.CoordinationV1(), incarnation: c.cfg.Incarnation,
		claimsSince: *c.claimsSince.Load(),
		claimed: func() string {
			if v := c.claimedVersion.Load(); v != nil {
				return *v
			}
			return ""
		},
	}
}

// term runs one client-go elector: standby until it acquires the Lease (or
// a takeover restart or shutdown ends it), then, if it acquired, one
// leadership term.
func (c *candidate) term(ctx context.Context, released <-chan string) (outcome, error) {
	lock := c.newFencedLock()
	if c.cfg.Placement != nil {
		lock.mayAcquire = func() bool { return c.cfg.Placement.MayAcquire(c.name) }
	}
	started := make(chan context.Context, 1)
	stopped := make(chan struct{})
	le, err := k8sle.NewLeaderElector(k8sle.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   c.cfg.LeaseDuration,
		RenewDeadline:   c.cfg.RenewDeadline,
		RetryPeriod:     c.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            c.name,
		Callbacks: k8sle.LeaderCallbacks{
			// Both are called by client-go (OnStartedLeading in its own
			// goroutine) and must not block.
			OnStartedLeading: func(ctx context.Context) { started <- ctx },
			OnStoppedLeading: func() { close(stopped) },
		},
	})
	if err != nil {
		return outcomeLost, fmt.Errorf("leaderelection: lease %q: %w", c.name, err)
	}

	// The elector's context is not cancelled by ctx: on shutdown it is
	// cancelled only after lead has returned, because cancelling it is what
	// makes client-go release the Lease (ReleaseOnCancel).
	electorCtx, cancelElector := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), c.clientGoLog))
	defer cancelElector()
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		le.Run(electorCtx)
	}()
	stopElector := func() {
		lock.openGate()
		cancelElector()
		<-electorDone
	}
	// An elector stopped just as it acquired releases the Lease itself
	// (ReleaseOnCancel) before lead ever ran; logged like every other
	// release.
	stopStandby := func(why string) {
		stopElector()
		if lock.wasReleased() {
			c.log.Info("released lease", zap.String("reason", why))
		}
	}

	// Standby.
	var leaderCtx context.Context
	select {
	case leaderCtx = <-started:
	case <-ctx.Done():
		// lead never ran; Run releases what a claim may have left held
		stopStandby("acquired as the process began shutting down")
		return outcomeShutdown, nil
	case reason := <-released:
		select {
		case leaderCtx = <-started:
		default:
			c.log.Info("takeover triggered", zap.String("reason", reason))
			stopStandby("acquired as a takeover restarted the election")
			return outcomeRestart, nil
		}
	case <-electorDone:
		select {
		case leaderCtx = <-started:
		default:
			// Not expected: client-go only stops before leading when its
			// context is done.
			return outcomeRestart, nil
		}
	}

	return c.leading(ctx, lock, leaderCtx, stopped, stopElector), nil
}

// drain is a term's graceful end, on shutdown or to hand the Lease over:
// lead is asked to stop (stopping closes) and its context stays valid while
// it drains, for at most timeout; then end cancels it.
type drain struct {
	timeout  time.Duration
	end      func(cause error, reason string)
	log      *zap.Logger
	stopping chan struct{}

	mu    sync.Mutex
	timer *time.Timer
	cause error
	over  bool // the timer must not start once the term is over
}

// begin asks lead to stop, once, unless the term is over; why says what
// for, in the log line.
func (d *drain) begin(cause error, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cause != nil || d.over {
		return
	}
	d.cause = cause
	close(d.stopping)
	if d.timeout <= 0 {
		d.log.Info(why + "; no drain timeout, so in-flight work is cancelled")
		d.end(cause, "")
		return
	}
	d.log.Info(why+"; finishing in-flight work first", zap.Duration("drainTimeout", d.timeout))
	d.timer = time.AfterFunc(d.timeout, func() {
		d.log.Warn("drain timeout reached; cancelling in-flight work")
		d.end(cause, "")
	})
}

// asked is the cause lead was asked to stop for, nil if it was not.
func (d *drain) asked() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cause
}

// termOver stops the timer and any later begin.
func (d *drain) termOver() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.over = true
	if d.timer != nil {
		d.timer.Stop()
	}
}

// leading is one leadership term, from the acquisition until lead has
// returned and the Lease is released (or known lost).
func (c *candidate) leading(ctx context.Context, lock *fencedLock, leaderCtx context.Context, stopped <-chan struct{}, stopElector func()) outcome {
	acquiredAt := time.Now()
	c.metrics.isLeader.Set(1)
	c.metrics.transitions.Inc()
	untrack := c.cfg.Terms.track(c.name, c.cfg.Identity, c.cfg.LeaseDuration, c.cfg.RenewDeadline, lock.renewedAt)
	c.log.Info("acquired lease")

	leadCtx, cancelLead := context.WithCancelCause(leaderCtx)
	defer cancelLead(nil)
	var (
		endOnce  sync.Once
		endCause error
	)
	end := func(cause error, reason string) {
		endOnce.Do(func() {
			endCause = cause
			cancelLead(cause)
			switch {
			case errors.Is(cause, ErrLeadershipLost):
				if c.cfg.OnFence != nil {
					c.cfg.OnFence()
				}
				c.cfg.Terms.fenced(c.name, lock.renewedAt(), c.cfg.LeaseDuration)
				c.metrics.isLeader.Set(0)
				// renewedAt (to the nanosecond) lets an audit of the
				// API server's log check that nothing was written once
				// the Lease could have expired.
				c.log.Warn("lost lease", zap.String("reason", reason),
					zap.Duration("sinceLastRenewal", time.Since(lock.renewedAt())),
					zap.String("renewedAt", lock.renewedAt().UTC().Format(time.RFC3339Nano)))
			case errors.Is(cause, ErrLeadReturned):
				c.log.Warn("lead returned while leading; giving the lease up")
			}
		})
	}
	// A term ends gracefully on shutdown or to hand the Lease over.
	d := &drain{timeout: c.cfg.DrainTimeout, end: end, log: c.log, stopping: make(chan struct{})}
	stopOnShutdown := context.AfterFunc(ctx, func() {
		d.begin(errShutdown, "shutting down")
	})
	defer func() {
		stopOnShutdown()
		d.termOver()
	}()
	leadDone := make(chan struct{})
	var watchers sync.WaitGroup
	watchers.Go(func() { c.fence(leadCtx, lock, end) })
	// A signal pending from before this term is not drained: it may be an
	// event after the acquisition, which the watch does not send twice.
	// Checking it costs one GET.
	watchers.Go(func() { c.watchHolder(leadCtx, end) })
	if c.cfg.Placement != nil {
		watchers.Go(func() { c.watchHandOver(leadDone, d.begin) })
	}
	watchers.Go(func() {
		select {
		case <-leaderCtx.Done():
			end(ErrLeadershipLost, "client-go elector stopped leading")
		case <-stopped:
			end(ErrLeadershipLost, "client-go elector stopped leading")
		case <-leadDone:
		}
	})

	if leaderCtx.Err() == nil {
		c.lead(context.WithValue(fence.WithWriteDeadline(leadCtx, func() time.Time { return lock.renewedAt().Add(c.cfg.RenewDeadline) }),
			stoppingKey{}, d.stopping))
	}
	close(leadDone)
	asked := d.asked()
	switch {
	case leadCtx.Err() == nil && asked != nil:
		end(asked, "") // lead drained and returned, as asked
	case leadCtx.Err() == nil && ctx.Err() != nil:
		end(errShutdown, "")
	case leadCtx.Err() == nil:
		end(ErrLeadReturned, "")
	default:
		// Cancelled by end, or by client-go (leaderCtx) before the watcher
		// above classified it.
		end(ErrLeadershipLost, "client-go elector stopped leading")
	}
	watchers.Wait()

	// lead has returned: only now may the Lease be released. A replica
	// shutting down first stops counting as one, so the Lease goes to a
	// replica that stays rather than waiting for this one.
	if errors.Is(endCause, errShutdown) && c.cfg.Placement != nil {
		c.cfg.Placement.Withdraw()
	}
	stopElector()
	ended := time.Now()
	c.claimsSince.Store(&ended)
	if errors.Is(endCause, ErrLeadershipLost) {
		// A renewal sent before the fence may have landed after it.
		c.cfg.Terms.fenced(c.name, lock.renewedAt(), c.cfg.LeaseDuration)
	}
	c.metrics.isLeader.Set(0)
	c.metrics.transitions.Inc()
	untrack()
	fields := []zap.Field{zap.Duration("held", time.Since(acquiredAt))}
	if lock.wasReleased() {
		c.log.Info("released lease", fields...)
	} else {
		c.log.Info("stopped leading without releasing the lease", fields...)
	}

	switch {
	case errors.Is(endCause, errShutdown), ctx.Err() != nil:
		// A fence during the shutdown's drain (the API server away) ends a
		// term that was stopping anyway: a shutdown, not a lost lease,
		// which the controllers take for a failure.
		return outcomeShutdown
	case errors.Is(endCause, errHandOver):
		return outcomeRestart // a standby again
	case errors.Is(endCause, ErrLeadReturned):
		return outcomeLeadReturned
	default:
		return outcomeLost
	}
}

// watchHandOver asks the term to stop (beginStop) when the placement gives its
// Lease to a replica that leads fewer, checking every retry period until
// lead is done.
func (c *candidate) watchHandOver(leadDone <-chan struct{}, beginStop func(error, string)) {
	tick := time.NewTicker(c.cfg.RetryPeriod)
	defer tick.Stop()
	for {
		select {
		case <-leadDone:
			return
		case <-tick.C:
			select {
			case <-leadDone: // lead returned on its own: not a hand-over
				return
			default:
			}
			// A hand-over releases the Lease, which waits while a fenced
			// term's writes may land: handing over then would only bounce
			// the Lease back to this replica.
			if time.Now().Before(c.cfg.Terms.releaseNotBefore(c.name)) {
				continue
			}
			if c.cfg.Placement.ShouldHandOver(c.name) {
				beginStop(errHandOver, "handing the lease over to a replica that leads fewer")
				return
			}
		}
	}
}

// watchHolder ends the term with ErrLeadershipLost as soon as the Lease is
// held by another, released by another or deleted. A standby may then lead
// at once (it finds itself named, or the Lease free), and the renew
// deadline would leave two leaders writing for up to that long. A watch
// event may be older than this term, so the API server is asked first.
func (c *candidate) watchHolder(leadCtx context.Context, end func(error, string)) {
	for {
		select {
		case <-leadCtx.Done():
			return
		case <-c.notOurs:
		}
		for {
			reason, err := c.heldElsewhere(leadCtx)
			if reason != "" {
				end(ErrLeadershipLost, reason)
				return
			}
			if err == nil {
				break
			}
			// Asked again every retry period; meanwhile the fence bounds
			// the term, as for any API server that is away.
			t := time.NewTimer(c.cfg.RetryPeriod)
			select {
			case <-leadCtx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// heldElsewhere reads the Lease and says why this replica no longer holds
// it, "" when it does or the read failed (err).
func (c *candidate) heldElsewhere(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RenewDeadline)
	defer cancel()
	lease, err := c.cfg.Client.CoordinationV1().Leases(c.cfg.Namespace).Get(ctx, c.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "lease deleted", nil
	case err != nil:
		return "", err
	}
	switch holder := deref(lease.Spec.HolderIdentity); holder {
	case c.cfg.Identity:
		return "", nil
	case "":
		return "lease released by another writer", nil
	default:
		// Whoever may write Leases wrote it; bounded all the same.
		return fmt.Sprintf("lease taken by %.253q", holder), nil
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// fence ends the term with ErrLeadershipLost once RenewDeadline has passed
// since the last successful renewal was sent. client-go's own renew loop
// gives up later (up to RetryPeriod + RenewDeadline after the last success
// returned), so this is what bounds the lead context by the renew deadline.
func (c *candidate) fence(leadCtx context.Context, lock *fencedLock, end func(error, string)) {
	for {
		wait := time.Until(lock.renewedAt().Add(c.cfg.RenewDeadline))
		if wait <= 0 {
			end(ErrLeadershipLost, "lease not renewed within the renew deadline")
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-leadCtx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
