package leaderelection

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/leaderelection/spread"
)

// The placement against a real API server, with this package's control
// plane: its presence Lease and the sweep of stale ones.
func TestSpreadPresenceLeaseOwnedByItsPodAndStaleOnesSwept(t *testing.T) {
	ns := createNamespace(t, unique("presence"))
	cand := newTestCandidate(t, "a", ns, fast)
	pod := &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "a", UID: "uid-of-a"}
	leases := adminClient(t).CoordinationV1().Leases(ns)
	createLease := func(name string, renewed time.Duration, replica bool) {
		t.Helper()
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &name, RenewTime: &metav1.MicroTime{Time: time.Now().Add(-renewed)}}}
		if replica {
			l.Labels = map[string]string{spread.ReplicaLabel: "true"}
		}
		if _, err := leases.Create(context.Background(), l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createLease(spread.ReplicaLeaseName("gone"), spread.StaleAfter+time.Minute, true)
	createLease(spread.ReplicaLeaseName("quiet"), spread.StaleAfter-time.Minute, true)
	createLease("not-a-presence-lease", 2*spread.StaleAfter, false)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		spread.New(spread.Config{Client: cand.cfg.Client, Namespace: ns, Identity: cand.cfg.Identity, Pod: pod,
			LeaseDuration: cand.cfg.LeaseDuration, RenewDeadline: cand.cfg.RenewDeadline, RetryPeriod: cand.cfg.RetryPeriod}, []string{LeaseBalancer, LeaseConsole, LeaseMaterialize}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })

	eventually(t, "stale presence Lease swept", func() bool {
		_, err := leases.Get(context.Background(), spread.ReplicaLeaseName("gone"), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	own, err := leases.Get(context.Background(), spread.ReplicaLeaseName("a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if refs := own.OwnerReferences; len(refs) != 1 || refs[0] != *pod {
		t.Errorf("own presence Lease owners %+v, want its Pod %+v", refs, *pod)
	}
	for _, kept := range []string{spread.ReplicaLeaseName("quiet"), "not-a-presence-lease"} {
		if _, err := leases.Get(context.Background(), kept, metav1.GetOptions{}); err != nil {
			t.Errorf("%s: %v (must be kept)", kept, err)
		}
	}
}
