//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/conversion"
	"github.com/materializeinc/orchestratord/pkg/jsonvalue"
	"github.com/materializeinc/orchestratord/pkg/mzuuid"
)

// Switching back to upstream orchestratord (docs/migrating-from-orchestratord.md,
// "Rollback"): a workload run under this operator (a completed rollout, a v1
// write that needs no new generation, then, with this operator stopped, a v1
// write that requests one) leaves every Materialize as upstream reads it:
// its typed reader accepts both versions, and upstream's rollout_requested
// (requestRollout against lastCompletedRolloutRequest, as UUIDs) is false
// where nothing was asked for and true for the pending request, whose
// requestRollout is upstream's UUIDv5 of the v1 rollout hash.
func TestRollbackToUpstreamOrchestratord(t *testing.T) {
	ctx := context.Background()
	ns := contractNamespace(t, nil)
	createMaterialize(t, ns, standinV26_35, v1alpha1.AuthenticatorNone)
	before := waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
	materializes := c.Materialize.MaterializeV1().Materializes(ns)

	// A v1 client changes what needs no new generation.
	mz, err := materializes.Get(ctx, "mz", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mz.Spec.BalancerdReplicas = ptrTo(int32(1))
	if _, err := materializes.Update(ctx, mz, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	settled := waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 2*time.Minute)
	if settled.Status.ActiveGeneration != before.Status.ActiveGeneration {
		t.Fatalf("a balancerd-only change rolled environmentd out: generation %d -> %d", before.Status.ActiveGeneration, settled.Status.ActiveGeneration)
	}

	// This operator stops, as the first step of a rollback does.
	restore := scaleControllers(t, 0)
	defer restore()
	if requested := upstreamView(t, ns); requested {
		t.Error("upstream would see a rollout request where none was made")
	}

	// A v1 client asks for a change that needs a new generation; nobody
	// acts on it until upstream is back.
	mz, err = materializes.Get(ctx, "mz", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mz.Spec.PodAnnotations = map[string]string{"example.com/rollback": "1"}
	if _, err := materializes.Update(ctx, mz, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if requested := upstreamView(t, ns); !requested {
		t.Error("upstream would not see the pending request")
	}
	stored, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Get(ctx, "mz", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status.ActiveGeneration != before.Status.ActiveGeneration {
		t.Errorf("active generation %d -> %d while no operator ran", before.Status.ActiveGeneration, stored.Status.ActiveGeneration)
	}
}

// upstreamView reads the Materialize at both versions as the API server
// returns it, requires upstream's typed reader to accept both, checks the
// derived request, and returns upstream's rollout_requested.
func upstreamView(t *testing.T, ns string) (requested bool) {
	t.Helper()
	objects := map[string]map[string]any{}
	for _, version := range []string{conversion.V1Alpha1, conversion.V1} {
		raw, err := c.Materialize.MaterializeV1alpha1().RESTClient().Get().AbsPath("/apis/" + version).
			Namespace(ns).Resource("materializes").Name("mz").DoRaw(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonvalue.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		obj := v.(map[string]any)
		if err := conversion.UpstreamReads(obj); err != nil {
			t.Fatalf("upstream's typed reader refuses the Materialize at %s: %v\n%s", version, err, raw)
		}
		objects[version] = obj
	}
	alpha, v1 := objects[conversion.V1Alpha1], objects[conversion.V1]
	spec, status := alpha["spec"].(map[string]any), alpha["status"].(map[string]any)
	request, _ := spec["requestRollout"].(string)
	last, _ := status["lastCompletedRolloutRequest"].(string)
	if _, ok := status["resourcesHash"].(string); !ok {
		t.Errorf("status.resourcesHash missing: %v", status)
	}
	annotations, _ := v1["metadata"].(map[string]any)["annotations"].(map[string]any)
	annotationValues := map[string]string{}
	for k, v := range annotations {
		annotationValues[k] = v.(string)
	}
	hash, err := conversion.RolloutHash(v1["spec"].(map[string]any), annotationValues)
	if err != nil {
		t.Fatal(err)
	}
	requested = mzuuid.Value(request) != mzuuid.Value(last)
	if requested && request != conversion.RolloutRequest(hash) {
		t.Errorf("requestRollout %s, want upstream's UUIDv5 of the v1 rollout hash, %s", request, conversion.RolloutRequest(hash))
	}
	t.Logf("requestRollout %s, lastCompletedRolloutRequest %s", request, last)
	return requested
}
