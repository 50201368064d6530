package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
)

func TestTrimForCacheKeepsOnlyThisOperatorsManagedFields(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"},
		{Manager: apply.FieldManager, Operation: metav1.ManagedFieldsOperationApply},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate},
		{Manager: apply.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate},
	}}}
	out, err := TrimForCache(d)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*appsv1.Deployment).ManagedFields
	if len(got) != 2 || got[0].Operation != metav1.ManagedFieldsOperationApply || got[1].Operation != metav1.ManagedFieldsOperationUpdate {
		t.Errorf("kept %v, want this operator's apply and update entries only", got)
	}
	for _, e := range got {
		if e.Manager != apply.FieldManager {
			t.Errorf("kept %s's entry", e.Manager)
		}
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/d", Obj: d}
	if out, err := TrimForCache(tombstone); err != nil || out != any(tombstone) {
		t.Errorf("a tombstone must pass through unchanged: %v, %v", out, err)
	}
}
