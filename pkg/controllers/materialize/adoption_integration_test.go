package materialize_test

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
	"github.com/materializeinc/orchestratord/test/fixture"
	"github.com/materializeinc/orchestratord/test/upstream"
)

// As upstream, the Console is applied only once the Balancer is Ready:
// the console sends its API requests to balancerd.
func TestConsoleWaitsForTheBalancer(t *testing.T) {
	env.SetAutoAdvance(true)
	ns := newNamespace(t)
	startController(t)
	ctx := context.Background()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, ns, "mz", 1)
	waitFor(t, "balancer", func() (bool, error) {
		_, err := mzClient().MaterializeV1alpha1().Balancers(ns).Get(ctx, "mz", metav1.GetOptions{})
		return err == nil, nil
	})
	time.Sleep(3 * materialize.BalancerWait) // a few looks at a Balancer that is not Ready
	if _, err := mzClient().MaterializeV1alpha1().Consoles(ns).Get(ctx, "mz", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Console exists while its Balancer is not Ready (err %v)", err)
	}
	fixture.KeepBalancersReady(t, mzClient(), ns)
	waitFor(t, "console once the balancer is Ready", func() (bool, error) {
		_, err := mzClient().MaterializeV1alpha1().Consoles(ns).Get(ctx, "mz", metav1.GetOptions{})
		return err == nil, nil
	})
}

// A Materialize upstream orchestratord ran carries its finalizer; deleting
// it after the switch completes instead of hanging in Terminating.
func TestUpstreamFinalizerIsReleasedOnDelete(t *testing.T) {
	ns := environmentNamespace(t)
	startController(t)
	ctx := context.Background()
	mz := newMaterialize(ns, "mz")
	mz.Finalizers = []string{upstream.Finalizer, "example.com/keep"}
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, ns, "mz", 1)
	if f := get(t, ns, "mz").Finalizers; !slices.Contains(f, upstream.Finalizer) {
		t.Fatalf("finalizers %v: upstream's was removed before the delete", f)
	}
	if err := mzClient().MaterializeV1alpha1().Materializes(ns).Delete(ctx, "mz", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "upstream's finalizer released, another kept", func() (bool, error) {
		f := get(t, ns, "mz").Finalizers
		return slices.Equal(f, []string{"example.com/keep"}), nil
	})
	update(t, ns, "mz", func(m *v1alpha1.Materialize) { m.Finalizers = nil })
	waitFor(t, "the Materialize gone", func() (bool, error) {
		_, err := mzClient().MaterializeV1alpha1().Materializes(ns).Get(ctx, "mz", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
