package materialize_test

import (
	"context"
	"testing"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
)

// staleReconcile runs one reconcile whose informer cache holds only cached,
// an older copy of the object than the API server's: a second event, or a
// new leader right after a handover, sees the object before the previous
// writer's assignment.
func staleReconcile(t *testing.T, cached *v1alpha1.Materialize) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	mz := versioned.NewForConfigOrDie(cp.Config)
	kubeInformers, mzInformers := controller.NewInformers(kube, mz)
	d := controller.Deps{
		Kube: kube, MZ: mz,
		KubeInformers: kubeInformers,
		MZInformers:   mzInformers,
		Recorder:      record.NewFakeRecorder(100), Log: zap.NewNop(), Workers: 1,
	}
	r := materialize.NewReconciler(d, materialize.Options{})
	if err := d.MZInformers.Materialize().V1alpha1().Materializes().Informer().GetIndexer().Add(cached); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), cached.Namespace+"/"+cached.Name); err != nil {
		t.Logf("reconcile: %v", err) // a conflict is a correct outcome too
	}
}

// Defect 2 of issue #12: resourceId and environmentId were assigned from the
// cache with a forced apply, so a stale cache wrote a second id over the
// first (two environmentd StatefulSets on one backend, one never cleaned
// up). They are decided on a fresh read and written with its resourceVersion.
func TestStaleCacheAssignsNoSecondID(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	client := mzClient().MaterializeV1alpha1().Materializes(ns)

	// The previous leader assigned the resource id (of a Materialize whose
	// spec is complete, so the resource id is what a pass decides)...
	complete := newMaterialize(ns, "mz")
	complete.Spec.EnvironmentID = "0b0b0b0b-1111-4222-8333-444444444444"
	complete.Spec.RequestRollout = "6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00"
	created, err := client.Create(ctx, complete, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := created.DeepCopy()
	withID := created.DeepCopy()
	withID.Status.ResourceID = "firstid123"
	if _, err := client.UpdateStatus(ctx, withID, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	staleReconcile(t, stale)
	if got := get(t, ns, "mz").Status.ResourceID; got != "firstid123" {
		t.Fatalf("status.resourceId %q: a stale cache assigned a second id over firstid123", got)
	}

	// ... and the environment id and first request of another.
	created, err = client.Create(ctx, newMaterialize(ns, "mz2"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale = created.DeepCopy()
	live := created.DeepCopy()
	live.Spec.EnvironmentID = "0c0c0c0c-1111-4222-8333-444444444444"
	live.Spec.RequestRollout = "7f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00"
	if _, err := client.Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	staleReconcile(t, stale)
	after := get(t, ns, "mz2")
	if after.Spec.EnvironmentID != live.Spec.EnvironmentID || after.Spec.RequestRollout != live.Spec.RequestRollout {
		t.Fatalf("environmentId %q requestRollout %q: a stale cache replaced %q and %q",
			after.Spec.EnvironmentID, after.Spec.RequestRollout, live.Spec.EnvironmentID, live.Spec.RequestRollout)
	}
}
