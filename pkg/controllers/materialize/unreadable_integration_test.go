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
)

// badCPU is a cpu request the CRD's quantity pattern admits and Go's
// resource.ParseQuantity refuses: the API server stores it, the typed
// client cannot read it.
const badCPU = `{"spec":{"environmentdResourceRequirements":{"requests":{"cpu":"1e1.5"}}}}`

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
	patch("bad", badCPU)
	// What a tenant can do: the API server stores it, client-go cannot read it.
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
	for reported := false; !reported; {
		select {
		case e := <-c.events.Events:
			reported = strings.HasPrefix(e, "Warning "+unreadable.ReasonUnreadable+" ") && strings.Contains(e, "quantit")
		case <-deadline:
			t.Fatal("no Warning Unreadable Event for the Materialize that does not read")
		}
	}
	if id := resourceID("bad"); id != "" {
		t.Fatalf("the unreadable Materialize was reconciled: status.resourceId %q", id)
	}

	// An object that stops reading while the informers watch does not end
	// their watch for everyone else.
	patch("good", badCPU)
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "later"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	assigned("later")

	// Fixed, it is reconciled.
	patch("bad", `{"spec":{"environmentdResourceRequirements":{"requests":{"cpu":"1"}}}}`)
	assigned("bad")
}
