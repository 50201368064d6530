package materialize

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"

	mzlisters "github.com/materializeinc/orchestratord/pkg/client/listers/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize/rollout"
)

// Upstream orchestratord's two metrics, under its names, so dashboards and
// alerts written for it keep working: summed across the replicas,
// orchestratord_is_leader is 1 and environmentd_needs_update counts once.
var (
	upstreamIsLeaderDesc = prometheus.NewDesc("orchestratord_is_leader",
		"1 while this replica holds the materialize controller's Lease (upstream orchestratord's metric; here each "+
			"reconciler has its own Lease: orchestratord_leader_election_is_leader has them all), else 0. "+
			"Summed across the replicas it is 1.", nil, nil)
	upstreamNeedsUpdateDesc = prometheus.NewDesc("environmentd_needs_update",
		"Materializes whose spec is not what runs (UpToDate not True: changes waiting for approval, a rollout "+
			"in progress, failed or timed out), counted by the replica holding the materialize Lease; the others "+
			"report 0 (upstream orchestratord's metric).", nil, nil)
)

// UpstreamMetricsCollector reports upstream's metrics at each scrape from the
// lister, as this replica's leading() says.
func UpstreamMetricsCollector(materializes mzlisters.MaterializeLister, leading func() bool) prometheus.Collector {
	return upstreamCollector{materializes: materializes, leading: leading}
}

type upstreamCollector struct {
	materializes mzlisters.MaterializeLister
	leading      func() bool
}

func (c upstreamCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- upstreamIsLeaderDesc
	ch <- upstreamNeedsUpdateDesc
}

func (c upstreamCollector) Collect(ch chan<- prometheus.Metric) {
	leader, needsUpdate := 0.0, 0.0
	if c.leading() {
		leader = 1
		all, err := c.materializes.List(labels.Everything())
		if err != nil {
			return
		}
		for _, mz := range all {
			if !meta.IsStatusConditionTrue(mz.Status.Conditions, rollout.ConditionUpToDate) {
				needsUpdate++
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(upstreamIsLeaderDesc, prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(upstreamNeedsUpdateDesc, prometheus.GaugeValue, needsUpdate)
}
