package materialize_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/materializeinc/orchestratord/pkg/controllers/unreadable"
	"github.com/materializeinc/orchestratord/pkg/crds"
)

// badCPU is a cpu request Go's resource.ParseQuantity refuses: this CRD's
// quantity pattern refuses it, upstream's CRD has none, so the API server
// may hold such objects (written while upstream's CRD was installed),
// which the typed client cannot read.
const badCPU = `{"spec":{"environmentdResourceRequirements":{"requests":{"cpu":"1e1.5"}}}}`

// costlyCPU is a cpu request upstream's CRD admits that
// resource.ParseQuantity takes longer than anyone waits to read (once
// Quantity.UnmarshalJSON has trimmed the space).
const costlyCPU = `{"spec":{"environmentdResourceRequirements":{"requests":{"cpu":"1e-100000000 "}}}}`

// A Materialize the operator's types cannot read stalls only itself: the
// others in the cluster are reconciled (the informers list and watch past
// it), it gets a Warning Event saying why, and once fixed it is reconciled
// too. Before, one such object failed every LIST: the informer never
// synced and no Materialize anywhere was reconciled.
func TestUnreadableMaterializeStallsOnlyItself(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	rest := mzClient().MaterializeV1alpha1().RESTClient()
	bad := newMaterialize(ns, "bad")
	bad.APIVersion, bad.Kind = "materialize.cloud/v1alpha1", "Materialize"
	body, err := json.Marshal(bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := rest.Post().Namespace(ns).Resource("materializes").Body(body).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	patch := func(name, patch string) {
		t.Helper()
		if err := rest.Patch(types.MergePatchType).Namespace(ns).Resource("materializes").Name(name).Body([]byte(patch)).Do(ctx).Error(); err != nil {
			t.Fatal(err)
		}
	}
	patchUnparsable := func(name, patch string) {
		t.Helper()
		if err := cp.WithUpstreamQuantities(ctx, crds.MaterializeCRDName, func() error {
			return rest.Patch(types.MergePatchType).Namespace(ns).Resource("materializes").Name(name).Body([]byte(patch)).Do(ctx).Error()
		}); err != nil {
			t.Fatal(err)
		}
	}
	patchUnparsable("bad", badCPU)
	// One that resource.ParseQuantity would take for ever to read: the
	// informers must not try.
	costly := newMaterialize(ns, "costly")
	costly.APIVersion, costly.Kind = "materialize.cloud/v1alpha1", "Materialize"
	if body, err = json.Marshal(costly); err != nil {
		t.Fatal(err)
	}
	if err := rest.Post().Namespace(ns).Resource("materializes").Body(body).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	patchUnparsable("costly", costlyCPU)
	// What a tenant could do under upstream's CRD: the API server stores
	// it, client-go cannot read it.
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("the typed client lists the namespace: the API server no longer stores a quantity Go refuses, so this test shows nothing")
	}
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "good"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resourceID := func(name string) string {
		raw, err := rest.Get().Namespace(ns).Resource("materializes").Name(name).Do(ctx).Raw()
		if err != nil {
			t.Fatal(err)
		}
		var obj struct {
			Status struct {
				ResourceID string `json:"resourceId"`
			} `json:"status"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatal(err)
		}
		return obj.Status.ResourceID
	}
	assigned := func(name string) {
		waitFor(t, name+" reconciled", func() (bool, error) { return resourceID(name) != "", nil })
	}

	c := startController(t)
	assigned("good")
	deadline := time.After(30 * time.Second)
	// The one that does not read, and the costly one, which is not read.
	for unparsable, costly := false, false; !unparsable || !costly; {
		select {
		case e := <-c.events.Events:
			if strings.HasPrefix(e, "Warning "+unreadable.ReasonUnreadable+" ") {
				unparsable = unparsable || strings.Contains(e, "quantities must match")
				costly = costly || strings.Contains(e, "spec.environmentdResourceRequirements.requests[cpu]: a quantity with the exponent -100000000 is not read")
			}
		case <-deadline:
			t.Fatalf("Warning Unreadable Events: for the Materialize that does not read %v, for the costly one %v", unparsable, costly)
		}
	}
	for _, name := range []string{"bad", "costly"} {
		if id := resourceID(name); id != "" {
			t.Fatalf("the unreadable Materialize %s was reconciled: status.resourceId %q", name, id)
		}
	}

	// An object that stops reading while the informers watch does not end
	// their watch for everyone else.
	patchUnparsable("good", badCPU)
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "later"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	assigned("later")

	// Fixed, it is reconciled.
	patch("bad", `{"spec":{"environmentdResourceRequirements":{"requests":{"cpu":"1"}}}}`)
	assigned("bad")
}
