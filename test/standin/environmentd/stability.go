package environmentd

import (
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/materializeinc/orchestratord/pkg/imageref"
)

// stabilityGateVersion is the first environmentd whose 0dt catch-up
// requires each caught-up cluster to stay caught up and healthy for a
// period before the generation is ready (upstream #37255,
// src/adapter/src/coord/caught_up.rs).
var stabilityGateVersion = imageref.MustParseVersion("26.32.0-dev.0")

// DefaultStabilityPeriod is with_0dt_caught_up_check_stability_period's
// default.
const DefaultStabilityPeriod = 10 * time.Minute

// ClusterHealth is a caught-up cluster's replicas at one check
// (upstream's ClusterHealthSnapshot, read from the orchestrator's pod
// statuses).
type ClusterHealth struct {
	// AllHealthy: the cluster has processes and every one is Ready.
	AllHealthy bool
	// StatusChanges is when each process's readiness last changed, by pod
	// name. Upstream compares one cluster-wide maximum of its own receipt
	// times; the kubelets' times come from several clocks, so each is
	// compared with its own.
	StatusChanges map[string]time.Time
	// Restarts is each process's restart count, by pod name.
	Restarts map[string]int32
}

// clusterStability is one cluster's streak across checks (upstream's
// ClusterStabilityState).
type clusterStability struct {
	stableSince  time.Time            // zero: not in a streak
	lastChanges  map[string]time.Time // nil before the first check
	lastRestarts map[string]int32     // nil before the first check
}

// stabilityGate holds a new generation back until every caught-up cluster
// has stayed caught up and healthy for period: a crash-looping replica can
// look hydrated for a moment, and promoting then cuts over into it.
type stabilityGate struct {
	period   time.Duration
	clusters map[string]*clusterStability
}

// observe folds one check in: caughtUp are the clusters caught up at it,
// with their health. A cluster not among them starts from scratch when it
// is caught up again. It returns whether every caught-up cluster is
// stable for the period and, if not, what holds the first one back.
func (g *stabilityGate) observe(caughtUp map[string]ClusterHealth, now time.Time) (ready bool, waiting string) {
	if g.clusters == nil {
		g.clusters = map[string]*clusterStability{}
	}
	for id := range g.clusters {
		if _, ok := caughtUp[id]; !ok {
			delete(g.clusters, id)
		}
	}
	ids := make([]string, 0, len(caughtUp))
	for id := range caughtUp {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	ready = true
	for _, id := range ids {
		h := caughtUp[id]
		s := g.clusters[id]
		if s == nil {
			s = &clusterStability{}
			g.clusters[id] = s
		}
		// A readiness change between two checks is a flap even if the
		// process is Ready again; a changed restart count (or a process
		// added or gone) is a restart the readiness may not show.
		flapped := s.lastChanges != nil && !maps.EqualFunc(s.lastChanges, h.StatusChanges, time.Time.Equal)
		restarted := s.lastRestarts != nil && !maps.Equal(s.lastRestarts, h.Restarts)
		if h.AllHealthy && !flapped && !restarted {
			if s.stableSince.IsZero() {
				s.stableSince = now
			}
		} else {
			s.stableSince = time.Time{}
		}
		s.lastChanges, s.lastRestarts = maps.Clone(h.StatusChanges), maps.Clone(h.Restarts)
		if s.lastChanges == nil {
			s.lastChanges = map[string]time.Time{}
		}
		if s.lastRestarts == nil {
			s.lastRestarts = map[string]int32{}
		}
		if !s.stableSince.IsZero() && now.Sub(s.stableSince) >= g.period {
			continue
		}
		if ready {
			switch {
			case !h.AllHealthy:
				waiting = fmt.Sprintf("cluster %s: not all replicas healthy", id)
			case flapped:
				waiting = fmt.Sprintf("cluster %s: a replica's status changed since the last check", id)
			case restarted:
				waiting = fmt.Sprintf("cluster %s: a replica restarted since the last check", id)
			default:
				// No elapsed time: the line is logged once a change.
				waiting = fmt.Sprintf("cluster %s: caught up, not yet stable for %v", id, g.period)
			}
		}
		ready = false
	}
	return ready, waiting
}
