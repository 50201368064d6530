package app_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/crds"
	"github.com/materializeinc/orchestratord/test/upstream"
)

// Through the built binary, on a real API server: a Materialize holding a
// quantity Go takes for ever to read, stored while upstream's CRD (no
// quantity pattern) was installed, stalls only itself, so another rolls
// out; deleted, it has upstream's finalizer released, which the reconciler
// counts as done although its client refuses the object the patch returns
// (unreadable.GuardTransport): without the guard the worker would decode
// it for ever, and without counting it done the release would be an error.
func TestCostlyQuantityThroughTheBinary(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "costly-")
	mzc := versioned.NewForConfigOrDie(cp.Config)
	createMaterialize(t, ns, "costly")
	rest := mzc.MaterializeV1alpha1().RESTClient()
	patch := `{"metadata":{"finalizers":["` + upstream.Finalizer + `"]},` +
		`"spec":{"environmentdResourceRequirements":{"requests":{"cpu":"1e-100000000 "}}}}`
	if err := cp.WithUpstreamQuantities(ctx, crds.MaterializeCRDName, func() error {
		return rest.Patch(types.MergePatchType).Namespace(ns).Resource("materializes").Name("costly").Body([]byte(patch)).Do(ctx).Error()
	}); err != nil {
		t.Fatal(err)
	}
	startReplicas(t, ns, 1)
	createMaterialize(t, ns, "good")
	rolledOut(t, ns, "good", 60*time.Second)

	if err := rest.Delete().Namespace(ns).Resource("materializes").Name("costly").Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the costly Materialize gone", func() bool {
		// Raw: the typed client would decode it.
		err := rest.Get().Namespace(ns).Resource("materializes").Name("costly").Do(ctx).Error()
		return apierrors.IsNotFound(err)
	})
	// Events are recorded asynchronously, so the release's may land after
	// the object is gone.
	events := kubernetes.NewForConfigOrDie(cp.Config).CoreV1().Events(ns)
	reasons := map[string]bool{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := events.List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=costly"})
		if err != nil {
			return false, nil
		}
		reasons = map[string]bool{}
		for _, e := range list.Items {
			reasons[e.Reason] = true
		}
		return reasons["FinalizerRemoved"] && reasons["Unreadable"], nil
	})
	if err != nil {
		t.Errorf("Events of the costly Materialize %v: want Unreadable, and FinalizerRemoved (the release counted as done)", reasons)
	}
}
