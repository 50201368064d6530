package materialize

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"

	mzlisters "github.com/materializeinc/orchestratord/pkg/client/listers/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize/rollout"
)

const conditionsHelp = "Materializes in the informer cache by the status and reason of their UpToDate and LicenseKey conditions " +
	"(a rollout past its timeout: UpToDate False RolloutTimeout; a licence about to expire: LicenseKey ExpiringSoon). " +
	"Every replica reports the same counts."

var conditionsDesc = prometheus.NewDesc("orchestratord_materializes", conditionsHelp, []string{"condition", "status", "reason"}, nil)

// knownReasons bounds the reason label to the reasons this operator (or
// upstream's, whose reasons are the same) writes: a status anyone else
// wrote counts as Other, so no label value comes from a tenant.
var knownReasons = map[string]map[string]bool{
	rollout.ConditionUpToDate: {
		rollout.ReasonApplied: true, rollout.ReasonApplying: true, rollout.ReasonReadyToPromote: true, rollout.ReasonPromoting: true,
		rollout.ReasonWaitingForApproval: true, rollout.ReasonFailedDeploy: true, rollout.ReasonRolloutTimeout: true,
	},
	ConditionLicenseKey: {
		ReasonLicenseValid: true, ReasonLicenseExpiring: true, ReasonLicenseExpired: true, ReasonLicenseInvalid: true,
	},
}

// ConditionsCollector counts, at each scrape, the Materializes of the
// lister by condition: what alerts on stuck rollouts and expiring
// licences need, at a cost of one pass over the cache per scrape.
func ConditionsCollector(materializes mzlisters.MaterializeLister) prometheus.Collector {
	return conditionsCollector{materializes: materializes}
}

type conditionsCollector struct {
	materializes mzlisters.MaterializeLister
}

func (c conditionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- conditionsDesc }

type conditionKey struct{ condition, status, reason string }

func (c conditionsCollector) Collect(ch chan<- prometheus.Metric) {
	all, err := c.materializes.List(labels.Everything())
	if err != nil {
		return
	}
	counts := map[conditionKey]int{}
	for _, mz := range all {
		for condition, reasons := range knownReasons {
			cond := meta.FindStatusCondition(mz.Status.Conditions, condition)
			if cond == nil {
				continue
			}
			key := conditionKey{condition, "Unknown", "Other"}
			switch cond.Status {
			case "True", "False":
				key.status = string(cond.Status)
			}
			if reasons[cond.Reason] {
				key.reason = cond.Reason
			}
			counts[key]++
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(conditionsDesc, prometheus.GaugeValue, float64(n), k.condition, k.status, k.reason)
	}
}
