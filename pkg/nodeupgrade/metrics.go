package nodeupgrade

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count what the node triggers decide and what fails, so that a
// trigger that cannot reach GKE or Pub/Sub, or cannot write, shows before a
// node pool upgrade evicts the environments it should have moved. A nil
// *Metrics counts nothing. Label values come from this code only.
type Metrics struct {
	rollouts      *prometheus.CounterVec
	errors        *prometheus.CounterVec
	notifications *prometheus.CounterVec
	armedPools    prometheus.Gauge
}

// Triggers and the operations each can fail at, for the series NewMetrics
// starts at zero (so that increase() sees the first failure).
var triggerOperations = map[string][]string{
	TriggerGKENodePool: {OpGCPClients, OpGKEPoll, OpGKECheck, OpPubSubPull, OpPubSubAck, OpNodes, OpPods, OpMaterialize},
	TriggerNodeRemoval: {OpNodes, OpPods, OpMaterialize},
}

// NewMetrics registers the node triggers' metrics with reg, with the
// series of the enabled triggers (TriggerGKENodePool, TriggerNodeRemoval)
// at zero.
func NewMetrics(reg prometheus.Registerer, enabled ...string) *Metrics {
	m := &Metrics{
		rollouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orchestratord_node_trigger_rollouts_total",
			Help: "Decisions of the node triggers for a Materialize with pods on nodes going away, by trigger (gke-node-pool, node-removal) and outcome (triggered, already_triggered, cooling_down, in_progress, gone, deleting, failed).",
		}, []string{"trigger", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orchestratord_node_trigger_errors_total",
			Help: "Failed steps of the node triggers (retried), by trigger and operation.",
		}, []string{"trigger", "operation"}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orchestratord_node_upgrade_notifications_total",
			Help: "GKE cluster notifications pulled from Pub/Sub, by result (armed, ignored, malformed).",
		}, []string{"result"}),
		armedPools: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "orchestratord_node_upgrade_armed_pools",
			Help: "GKE node pools whose upgrade the leader follows now.",
		}),
	}
	reg.MustRegister(m.rollouts, m.errors, m.notifications, m.armedPools)
	for _, trigger := range enabled {
		for _, op := range triggerOperations[trigger] {
			m.errors.WithLabelValues(trigger, op)
		}
		for _, o := range []Outcome{Triggered, AlreadyDone, CoolingDown, InProgress, Gone, Deleting, Failed} {
			m.rollouts.WithLabelValues(trigger, o.label())
		}
	}
	return m
}

// Operations a node trigger can fail at (the errors metric's label).
const (
	OpGCPClients = "gcp_clients"
	OpGKEPoll    = "gke_poll"
	OpGKECheck   = "gke_check"
	OpPubSubPull = "pubsub_pull"
	OpPubSubAck  = "pubsub_ack"
	OpNodes      = "list_nodes"
	OpPods       = "list_pods"
	// OpMaterialize: reading or patching a Materialize to request its
	// rollout (the step that protects it).
	OpMaterialize = "update_materialize"
)

// The triggers, as named in scopes ("<trigger>/...") and metrics.
const (
	TriggerGKENodePool = "gke-node-pool"
	TriggerNodeRemoval = "node-removal"
)

// Error counts a failed operation of the trigger named by scope.
func (m *Metrics) Error(scope, operation string) {
	if m != nil {
		m.errors.WithLabelValues(triggerOf(scope), operation).Inc()
	}
}

// Notification counts a pulled notification by result.
func (m *Metrics) Notification(result string) {
	if m != nil {
		m.notifications.WithLabelValues(result).Inc()
	}
}

// ArmedPools sets the number of armed pools.
func (m *Metrics) ArmedPools(n int) {
	if m != nil {
		m.armedPools.Set(float64(n))
	}
}

func (m *Metrics) rollout(scope string, o Outcome) {
	if m != nil {
		m.rollouts.WithLabelValues(triggerOf(scope), o.label()).Inc()
		if o == Failed {
			m.Error(scope, OpMaterialize)
		}
	}
}

// triggerOf is the trigger a scope belongs to: what precedes its first "/"
// ("gke-node-pool/<pool>" is one arming of one pool).
func triggerOf(scope string) string {
	trigger, _, _ := strings.Cut(scope, "/")
	return trigger
}
