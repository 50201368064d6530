package materialize

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	mzlisters "github.com/materializeinc/orchestratord/pkg/client/listers/materialize/v1alpha1"
)

func TestUpstreamMetricsFollowTheMaterializeLease(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, cond := range map[string]*metav1.Condition{
		"applied":  {Type: "UpToDate", Status: metav1.ConditionTrue, Reason: "Applied"},
		"waiting":  {Type: "UpToDate", Status: metav1.ConditionFalse, Reason: "WaitingForApproval"},
		"applying": {Type: "UpToDate", Status: metav1.ConditionUnknown, Reason: "Applying"},
		"new":      nil,
	} {
		mz := &v1alpha1.Materialize{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
		if cond != nil {
			mz.Status.Conditions = []metav1.Condition{*cond}
		}
		if err := indexer.Add(mz); err != nil {
			t.Fatal(err)
		}
	}
	leading := false
	reg := prometheus.NewRegistry()
	reg.MustRegister(UpstreamMetricsCollector(mzlisters.NewMaterializeLister(indexer), func() bool { return leading }))
	expect := func(isLeader, needsUpdate float64) {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			got[f.GetName()] = f.GetMetric()[0].GetGauge().GetValue()
		}
		want := map[string]float64{"orchestratord_is_leader": isLeader, "environmentd_needs_update": needsUpdate}
		if len(got) != 2 || got["orchestratord_is_leader"] != isLeader || got["environmentd_needs_update"] != needsUpdate {
			t.Errorf("gathered %v, want %v", got, want)
		}
	}
	// A replica that does not hold the Lease reports zeros, so a sum
	// across replicas counts each Materialize once.
	expect(0, 0)
	leading = true
	expect(1, 3) // all but the applied one
}
