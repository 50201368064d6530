package gke

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
	pubsub "google.golang.org/api/pubsub/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade"
)

// Timings of the loops' requests and retries.
const (
	maxMessages     = 100
	pullTimeout     = 2 * time.Minute // a pull waits for messages up to about a minute and a half
	requestTimeout  = 30 * time.Second
	retryAfter      = 30 * time.Second
	credentialRetry = 10 * time.Second
	// minPullSpacing keeps a server that answers empty at once from
	// being asked in a tight loop (Pub/Sub holds an empty pull open).
	minPullSpacing = time.Second
)

type watcher struct {
	cfg     *Config
	trigger *nodeupgrade.Trigger
	log     *zap.Logger
	gcp     *gcp
	armed   armedPools
	now     func() time.Time
}

// Run follows GKE node pool upgrades and triggers rollouts until ctx ends or
// leaderelection.Stopping(ctx) closes. ctx must be the lead context of the
// materialize controller's Lease, and trigger's clients the fenced ones:
// only the leader pulls notifications (and acknowledges them) and writes,
// and none of its writes lands once its term could have ended. Errors are
// logged and retried; Run returns only when it must stop.
func Run(ctx context.Context, cfg Config, trigger *nodeupgrade.Trigger, log *zap.Logger) {
	w := &watcher{cfg: &cfg, trigger: trigger, log: log.With(zap.String("cluster", cfg.ClusterName), zap.String("location", cfg.ClusterLocation)), now: time.Now}
	// loops ends on shutdown or hand-over; a scan in flight then finishes
	// under the lead context, which stays valid while the term drains.
	loops, stop := context.WithCancel(ctx)
	defer stop()
	// The pools armed are this term's: a standby follows none.
	defer w.trigger.Metrics.ArmedPools(0)
	go func() {
		select {
		case <-leaderelection.Stopping(ctx):
			stop()
		case <-loops.Done():
		}
	}()
	w.log.Info("node upgrade: starting GKE node upgrade watcher", zap.String("subscription", cfg.Subscription),
		zap.Strings("watchedNodePools", cfg.WatchedNodePools))
	for {
		g, err := newGCP(loops, &cfg)
		if err == nil {
			w.gcp = g
			break
		}
		w.log.Warn("node upgrade: failed to initialize GCP clients, retrying", zap.Error(err))
		w.trigger.Metrics.Error(nodeupgrade.TriggerGKENodePool, nodeupgrade.OpGCPClients)
		if !sleep(loops, credentialRetry) {
			return
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { w.subscribe(loops) })
	w.scanLoop(loops, ctx)
	wg.Wait()
	w.log.Info("node upgrade: GKE node upgrade watcher stopped")
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (w *watcher) arm(pool, reason string) {
	armed, refused := w.armed.arm(pool, w.now())
	w.trigger.Metrics.ArmedPools(w.armed.count())
	switch {
	case armed:
		w.log.Info("node upgrade: arming node pool", zap.String("pool", pool), zap.String("reason", reason))
	case refused:
		w.log.Warn("node upgrade: too many armed node pools; not arming", zap.String("pool", pool), zap.Int("limit", maxArmedPools))
	}
}

func (w *watcher) disarm(pool, reason string, warn bool) {
	w.armed.disarm(pool)
	w.trigger.Metrics.ArmedPools(w.armed.count())
	w.trigger.Forget(scope(pool))
	log := w.log.Info
	if warn {
		log = w.log.Warn
	}
	log("node upgrade: disarming node pool", zap.String("pool", pool), zap.String("reason", reason))
}

// scope is the trigger's scope of one arming of a pool: each Materialize
// gets one forced rollout per upgrade of the pool.
func scope(pool string) string { return nodeupgrade.TriggerGKENodePool + "/" + pool }

// scanLoop polls the GKE API for upgrades (at once, then every
// PollInterval) and checks the armed pools every ScanInterval. Checks run
// under lead, so one in flight when loops ends finishes.
func (w *watcher) scanLoop(loops, lead context.Context) {
	ticker := time.NewTicker(w.cfg.scanInterval())
	defer ticker.Stop()
	var lastPoll time.Time
	for {
		if lastPoll.IsZero() || w.now().Sub(lastPoll) >= w.cfg.pollInterval() {
			ctx, cancel := context.WithTimeout(loops, requestTimeout)
			pools, err := w.gcp.upgradingPools(ctx, w.cfg)
			cancel()
			if err != nil {
				if loops.Err() != nil {
					return
				}
				w.log.Warn("node upgrade: failed to poll GKE for node pool upgrades", zap.Error(err))
				w.trigger.Metrics.Error(nodeupgrade.TriggerGKENodePool, nodeupgrade.OpGKEPoll)
			} else {
				lastPoll = w.now()
				for _, p := range pools {
					w.arm(p, "GKE API reports an upgrade in progress")
				}
			}
		}
		names, armedAt := w.armed.list()
		for _, pool := range names {
			if loops.Err() != nil {
				return
			}
			w.check(lead, pool, armedAt[pool])
		}
		select {
		case <-loops.Done():
			return
		case <-ticker.C:
		}
	}
}

// check follows one armed pool: it disarms it once its upgrade is over, and
// once every blue node is cordoned triggers the rollouts.
func (w *watcher) check(ctx context.Context, pool string, armedAt time.Time) {
	if expired(armedAt, w.now()) {
		w.disarm(pool, "armed for longer than 14 days", true)
		return
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	phase, gone, err := w.gcp.nodePoolPhase(rctx, w.cfg.nodePoolPath(pool))
	cancel()
	switch {
	case err != nil:
		w.log.Warn("node upgrade: failed to check armed node pool", zap.String("pool", pool), zap.Error(err))
		w.trigger.Metrics.Error(nodeupgrade.TriggerGKENodePool, nodeupgrade.OpGKECheck)
		return
	case gone:
		w.disarm(pool, "the node pool no longer exists", false)
		return
	case phase == "":
		// The upgrade is over, or the pool does not use blue-green
		// upgrades: a surge upgrade drains nodes as it replaces them,
		// leaving no window to move pods gracefully.
		w.disarm(pool, "no blue-green upgrade in progress; if this pool was upgraded with the surge strategy, "+
			"its pods were NOT protected: configure the pool to use blue-green upgrades", false)
		return
	case !BluePoolFullyCordoned(phase):
		// ROLLBACK_STARTED uncordons the blue pool: nothing to move away
		// from, but it stays armed in case the upgrade is retried.
		w.log.Debug("node upgrade: armed node pool not fully cordoned yet", zap.String("pool", pool), zap.String("phase", phase))
		return
	}
	nodes, err := w.trigger.Nodes(ctx, NodePoolLabel+"="+pool, func(n *corev1.Node) bool { return n.Spec.Unschedulable })
	if err != nil {
		w.log.Warn("node upgrade: failed to list the node pool's nodes", zap.String("pool", pool), zap.Error(err))
		w.trigger.Metrics.Error(nodeupgrade.TriggerGKENodePool, nodeupgrade.OpNodes)
		return
	}
	if len(nodes) == 0 {
		return
	}
	affected, err := w.trigger.Affected(ctx, nodes)
	if err != nil {
		w.log.Warn("node upgrade: failed to find the pods on the node pool's cordoned nodes", zap.String("pool", pool), zap.Error(err))
		w.trigger.Metrics.Error(nodeupgrade.TriggerGKENodePool, nodeupgrade.OpPods)
		return
	}
	w.trigger.RollOut(ctx, scope(pool), "GKE is upgrading node pool "+pool+" ("+phase+")", affected)
}

// subscribe pulls the cluster's notifications and arms the pools that start
// upgrading, until ctx ends. Every message pulled is acknowledged, read or
// not: arming is idempotent, and a message that cannot be read never will.
func (w *watcher) subscribe(ctx context.Context) {
	limit, smallPulls := int64(maxMessages), 0
	for ctx.Err() == nil {
		start := w.now()
		pctx, cancel := context.WithTimeout(ctx, pullTimeout)
		resp, err := w.gcp.pubsub.Projects.Subscriptions.Pull(w.cfg.Subscription, &pubsub.PullRequest{MaxMessages: limit}).Context(pctx).Do()
		cancel()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, errResponseTooLarge) && limit > 1:
				// A message this large fits alone: pull one at a time
				// for a while.
				w.log.Warn("node upgrade: Pub/Sub pull response too large; pulling one message at a time", zap.Int("limit", maxResponse))
				limit, smallPulls = 1, maxMessages
			default:
				w.log.Warn("node upgrade: failed to pull GKE cluster notifications", zap.Error(err))
				w.trigger.Metrics.Error(nodeupgrade.TriggerGKENodePool, nodeupgrade.OpPubSubPull)
				sleep(ctx, retryAfter)
			}
			continue
		}
		msgs := resp.ReceivedMessages
		if int64(len(msgs)) > limit {
			msgs = msgs[:limit] // the rest is redelivered
		}
		if len(msgs) == 0 {
			// A pull that timed out empty: pull again.
			if w.now().Sub(start) < minPullSpacing {
				sleep(ctx, minPullSpacing)
			}
			continue
		}
		ackIDs := make([]string, 0, len(msgs))
		for _, m := range msgs {
			if m == nil {
				continue
			}
			if m.AckId != "" {
				ackIDs = append(ackIDs, m.AckId)
			}
			w.handle(m.Message)
		}
		if len(ackIDs) > 0 {
			actx, cancel := context.WithTimeout(ctx, requestTimeout)
			_, err := w.gcp.pubsub.Projects.Subscriptions.Acknowledge(w.cfg.Subscription, &pubsub.AcknowledgeRequest{AckIds: ackIDs}).Context(actx).Do()
			cancel()
			if err != nil && ctx.Err() == nil {
				// Redelivered later; arming is idempotent.
				w.log.Warn("node upgrade: failed to acknowledge GKE cluster notifications", zap.Int("messages", len(ackIDs)), zap.Error(err))
				w.trigger.Metrics.Error(nodeupgrade.TriggerGKENodePool, nodeupgrade.OpPubSubAck)
			}
		}
		if smallPulls > 0 {
			if smallPulls--; smallPulls == 0 {
				limit = maxMessages
			}
		}
	}
}

func (w *watcher) handle(m *pubsub.PubsubMessage) {
	if m == nil {
		return
	}
	pool, ignored, err := w.cfg.upgradingPool(m.Attributes)
	switch {
	case err != nil:
		w.trigger.Metrics.Notification("malformed")
		w.log.Warn("node upgrade: malformed GKE notification; acknowledging it", zap.String("messageId", truncate(m.MessageId, 64)), zap.Error(err))
	case pool == "":
		w.trigger.Metrics.Notification("ignored")
		w.log.Debug("node upgrade: ignoring notification", zap.String("messageId", truncate(m.MessageId, 64)), zap.String("reason", ignored))
	default:
		w.trigger.Metrics.Notification("armed")
		w.arm(pool, "received a GKE node pool UpgradeEvent notification")
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
