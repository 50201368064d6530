package materialize

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	mzlisters "github.com/materializeinc/orchestratord/pkg/client/listers/materialize/v1alpha1"
)

func TestConditionsCollectorCountsByBoundedReason(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	add := func(name string, conds ...metav1.Condition) {
		mz := &v1alpha1.Materialize{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: name}}
		mz.Status.Conditions = conds
		if err := indexer.Add(mz); err != nil {
			t.Fatal(err)
		}
	}
	cond := func(typ, status, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason}
	}
	add("a", cond("UpToDate", "True", "Applied"), cond("LicenseKey", "True", "Valid"))
	add("b", cond("UpToDate", "True", "Applied"), cond("LicenseKey", "False", "ExpiringSoon"))
	add("c", cond("UpToDate", "False", "RolloutTimeout"))
	// A status written by someone else: its reason is not a label value.
	add("d", cond("UpToDate", "False", "tenant-chosen-"+strings.Repeat("x", 100)))
	add("e")

	reg := prometheus.NewRegistry()
	reg.MustRegister(ConditionsCollector(mzlisters.NewMaterializeLister(indexer)))
	want := `
# HELP orchestratord_materializes ` + conditionsHelp + `
# TYPE orchestratord_materializes gauge
orchestratord_materializes{condition="LicenseKey",reason="ExpiringSoon",status="False"} 1
orchestratord_materializes{condition="LicenseKey",reason="Valid",status="True"} 1
orchestratord_materializes{condition="UpToDate",reason="Applied",status="True"} 2
orchestratord_materializes{condition="UpToDate",reason="Other",status="False"} 1
orchestratord_materializes{condition="UpToDate",reason="RolloutTimeout",status="False"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
