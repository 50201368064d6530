package materialize_test

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

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
	time.Sleep(3 * time.Second) // events of its children and the Balancer's come meanwhile
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

// The Role and RoleBinding named after the Materialize, made by upstream
// orchestratord (or an earlier version of this operator), are left as they
// are: this operator binds environmentd's ClusterRole under its own name,
// since a RoleBinding's roleRef is immutable and either operator's apply of
// the other's roleRef under one name would fail forever. After a switch
// back upstream applies its own again, next to this operator's.
func TestUpstreamRoleAndRoleBindingAreLeftAlone(t *testing.T) {
	ns := environmentNamespace(t)
	first := startController(t)
	ctx := context.Background()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mz := waitRolledOut(t, ns, "mz", 1)
	first.stop()

	// As upstream left the environment: its Role and RoleBinding, and none
	// of this operator's.
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ours := "mz" + mz.Status.ResourceID + "-environmentd"
	if err := kube.RbacV1().RoleBindings(ns).Delete(ctx, ours, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	owner := upstream.Owner{APIVersion: "materialize.cloud/v1alpha1", Kind: "Materialize", Name: "mz", Namespace: ns,
		UID: mz.UID, ResourceID: mz.Status.ResourceID}
	applyUpstream := func() (roleRV, bindingRV string) {
		t.Helper()
		body, opts, err := upstream.ApplyPatch(upstream.Role(owner))
		if err != nil {
			t.Fatal(err)
		}
		role, err := kube.RbacV1().Roles(ns).Patch(ctx, "mz", types.ApplyPatchType, body, opts)
		if err != nil {
			t.Fatalf("upstream's Role: %v", err)
		}
		if body, opts, err = upstream.ApplyPatch(upstream.RoleBinding(owner, "mz")); err != nil {
			t.Fatal(err)
		}
		binding, err := kube.RbacV1().RoleBindings(ns).Patch(ctx, "mz", types.ApplyPatchType, body, opts)
		if err != nil {
			t.Fatalf("upstream's RoleBinding: %v", err)
		}
		return role.ResourceVersion, binding.ResourceVersion
	}
	roleRV, bindingRV := applyUpstream()

	startController(t)
	waitFor(t, "this operator's RoleBinding", func() (bool, error) {
		rb, err := kube.RbacV1().RoleBindings(ns).Get(ctx, ours, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err == nil && (rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != materialize.DefaultEnvironmentdClusterRole) {
			t.Fatalf("roleRef %+v, want the ClusterRole %s", rb.RoleRef, materialize.DefaultEnvironmentdClusterRole)
		}
		return err == nil, err
	})
	role, err := kube.RbacV1().Roles(ns).Get(ctx, "mz", metav1.GetOptions{})
	if err != nil || role.ResourceVersion != roleRV {
		t.Errorf("upstream's Role was changed or removed (%v): resourceVersion %s, was %s", err, role.ResourceVersion, roleRV)
	}
	binding, err := kube.RbacV1().RoleBindings(ns).Get(ctx, "mz", metav1.GetOptions{})
	if err != nil || binding.ResourceVersion != bindingRV || binding.RoleRef.Kind != "Role" {
		t.Errorf("upstream's RoleBinding was changed or removed (%v): resourceVersion %s, was %s, roleRef %+v",
			err, binding.ResourceVersion, bindingRV, binding.RoleRef)
	}
	// Switching back, upstream applies its own again: no conflict with
	// this operator's.
	applyUpstream()
}
