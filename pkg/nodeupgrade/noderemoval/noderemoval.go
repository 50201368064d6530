// Package noderemoval triggers rollouts of Materializes whose environmentd
// or clusterd pods run on nodes a node autoscaler has marked for removal:
// Karpenter's karpenter.sh/disrupted taint and the cluster autoscaler's
// ToBeDeletedByClusterAutoscaler. Both are set just before the node is
// drained, so the rollout races the drain: it helps where the drain waits
// (PodDisruptionBudgets, Karpenter's termination grace period) and is
// harmless where it does not. Opt-in (--node-removal-rollout-trigger), and
// cloud-neutral: package nodeupgrade does the work.
package noderemoval

import (
	"context"
	"sort"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade"
)

// The taints that mark a node for removal.
const (
	KarpenterDisruptedTaint      = "karpenter.sh/disrupted"
	ClusterAutoscalerDeleteTaint = "ToBeDeletedByClusterAutoscaler"
)

// DefaultScanInterval is how often nodes are listed: a drain starts soon
// after the taint, so this is far shorter than the GKE trigger's minute.
const DefaultScanInterval = 15 * time.Second

// scope is the trigger's one scope: a Materialize is triggered once while
// its pods sit on marked nodes, and again only after they no longer do.
const scope = nodeupgrade.TriggerNodeRemoval

// MarkedForRemoval reports the taint marking n for removal, if any.
func MarkedForRemoval(n *corev1.Node) (string, bool) {
	for _, t := range n.Spec.Taints {
		if t.Key == KarpenterDisruptedTaint || t.Key == ClusterAutoscalerDeleteTaint {
			return t.Key, true
		}
	}
	return "", false
}

// Run scans the nodes every interval (DefaultScanInterval when zero) until
// ctx ends or leaderelection.Stopping(ctx) closes. ctx must be the lead
// context of the materialize controller's Lease, and trigger's clients the
// fenced ones.
func Run(ctx context.Context, interval time.Duration, trigger *nodeupgrade.Trigger, log *zap.Logger) {
	if interval <= 0 {
		interval = DefaultScanInterval
	}
	log.Info("node removal: starting the node removal rollout trigger", zap.Duration("interval", interval))
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	marked := map[string]bool{}
	for {
		marked = scan(ctx, trigger, log, marked)
		select {
		case <-ctx.Done():
			return
		case <-leaderelection.Stopping(ctx):
			return
		case <-ticker.C:
		}
	}
}

// scan triggers the rollouts for the nodes marked now, and returns them;
// before are the nodes marked at the previous scan (logged once each).
func scan(ctx context.Context, trigger *nodeupgrade.Trigger, log *zap.Logger, before map[string]bool) map[string]bool {
	taints := map[string]string{}
	nodes, err := trigger.Nodes(ctx, "", func(n *corev1.Node) bool {
		taint, ok := MarkedForRemoval(n)
		if ok {
			taints[n.Name] = taint
		}
		return ok
	})
	if err != nil {
		log.Warn("node removal: failed to list nodes", zap.Error(err))
		trigger.Metrics.Error(scope, nodeupgrade.OpNodes)
		return before
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !before[n] {
			log.Info("node removal: node marked for removal", zap.String("node", n), zap.String("taint", taints[n]))
		}
	}
	affected, err := trigger.Affected(ctx, nodes)
	if err != nil {
		log.Warn("node removal: failed to find the pods on nodes marked for removal", zap.Error(err))
		trigger.Metrics.Error(scope, nodeupgrade.OpPods)
		return nodes
	}
	trigger.Retain(scope, affected)
	if len(affected) > 0 {
		trigger.RollOut(ctx, scope, "nodes marked for removal by Karpenter or the cluster autoscaler", affected)
	}
	return nodes
}
