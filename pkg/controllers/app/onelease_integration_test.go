package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/test/audit"
)

// leaseTerm is what a term of a Lease looks like from outside: a new term
// changes the acquire time and counts a transition.
type leaseTerm struct {
	holder      string
	acquired    time.Time
	transitions int32
}

func termOf(t *testing.T, ns, name string) leaseTerm {
	t.Helper()
	l := lease(t, ns, name)
	if l == nil || l.Spec.HolderIdentity == nil || l.Spec.AcquireTime == nil || l.Spec.LeaseTransitions == nil {
		t.Fatalf("lease %s has no holder", name)
	}
	return leaseTerm{holder: *l.Spec.HolderIdentity, acquired: l.Spec.AcquireTime.Time, transitions: *l.Spec.LeaseTransitions}
}

// leaseLogged counts the lines with message msg about lease in the
// replica's log ("lost lease": its lead context cancelled at the renew
// deadline; "acquired lease": a new term).
func leaseLogged(t *testing.T, r *replica, msg, lease string) int {
	t.Helper()
	return r.logLines(t, func(line string) bool {
		return strings.Contains(line, `"msg":"`+msg+`"`) && strings.Contains(line, "/"+lease+`"`)
	})
}

// refuseRenewals makes the API server refuse every update of one Lease,
// with a ValidatingAdmissionPolicy; the returned function lifts it.
func refuseRenewals(t *testing.T, ns, name string) (lift func()) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ctx := context.Background()
	policyName := ns + "-refuse-" + name
	fail := admissionregistrationv1.Fail
	_, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{
						APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"leases"},
					},
				},
			}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name:       "this-lease",
				Expression: "object.metadata.namespace == '" + ns + "' && object.metadata.name == '" + name + "'",
			}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "the test refuses this Lease's renewals"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lifted := false
	lift = func() {
		if lifted {
			return
		}
		lifted = true
		_ = kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, policyName, metav1.DeleteOptions{})
		_ = kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, policyName, metav1.DeleteOptions{})
	}
	t.Cleanup(lift)
	return lift
}

// giveAway writes another holder into a Lease, as a replica whose clock
// or network let it take the Lease over would; it returns when the
// replica that held it could have considered it its own for the last time
// (its last renewal plus the lease duration).
func giveAway(t *testing.T, ns, name, to string) (lastExpiry time.Time) {
	t.Helper()
	leases := kubernetes.NewForConfigOrDie(cp.Config).CoordinationV1().Leases(ns)
	waitFor(t, 10*time.Second, "the Lease written with another holder", func() bool {
		l, err := leases.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		lastExpiry = l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
		now := metav1.NewMicroTime(time.Now())
		l.Spec = coordinationv1.LeaseSpec{
			HolderIdentity: &to, LeaseDurationSeconds: l.Spec.LeaseDurationSeconds,
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: l.Spec.LeaseTransitions,
		}
		_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		return err == nil
	})
	return lastExpiry
}

// materializeEventsSince counts the Events about Materializes the
// replica's materialize controller recorded from since on.
func materializeEventsSince(t *testing.T, ns string, since time.Time) int {
	t.Helper()
	list, err := kubernetes.NewForConfigOrDie(cp.Config).CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Materialize" && e.Source.Component == "orchestratord" && !e.LastTimestamp.Time.Before(since.Truncate(time.Second)) {
			n++
		}
	}
	return n
}

// One process holds the three Leases. One of them is lost, first because
// the API server refuses its renewals, then because another holder takes
// it: only that reconciler stops. The process stays up and keeps the
// other two Leases with no new transition; the materialize controller
// acts on a new rollout request and its Events are still written; the
// lost Lease's controller writes nothing from the moment its Lease could
// have expired until it leads again (the API server's audit log).
func TestLosingOneLeaseStopsOnlyItsReconciler(t *testing.T) {
	ns := newNamespace(t, "onelease-")
	replicas := startReplicas(t, ns, 1)
	var r *replica
	for _, only := range replicas {
		r = only
	}
	createMaterialize(t, ns, "mz")
	rolledOut(t, ns, "mz", 60*time.Second)

	// The balancer controller writes here (its Deployment, its Service);
	// the console's waits for a Ready balancer, which no kubelet makes.
	const controller = "balancer"
	lostLease := leaderelection.LeaseName(controller)
	for i, c := range []struct {
		name string
		lose func(t *testing.T) (expiry time.Time, regain func())
	}{
		{
			name: "renewals refused",
			lose: func(t *testing.T) (time.Time, func()) {
				lift := refuseRenewals(t, ns, lostLease)
				waitFor(t, 30*time.Second, "the Lease lost", func() bool {
					return leaseLogged(t, r, "lost lease", lostLease) == 1
				})
				// Refused renewals leave its last successful one in place.
				l := lease(t, ns, lostLease)
				return l.Spec.RenewTime.Add(leaseDuration), lift
			},
		},
		{
			name: "held by another",
			lose: func(t *testing.T) (time.Time, func()) {
				expiry := giveAway(t, ns, lostLease, "someone-else")
				waitFor(t, 30*time.Second, "the Lease lost", func() bool {
					return leaseLogged(t, r, "lost lease", lostLease) == 2
				})
				// The other holder never renews: its Lease expires and the
				// replica takes it back.
				return expiry, func() {}
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			acquisitions := leaseLogged(t, r, "acquired lease", lostLease)
			kept := map[string]leaseTerm{}
			for _, name := range leaseNames {
				if name != lostLease {
					kept[name] = termOf(t, ns, name)
				}
			}
			expiry, regain := c.lose(t)

			// The materialize controller acts on a new request at once: it
			// did not have to win its Lease again.
			requested := time.Now()
			// changeEnv derives the request's id from the value's length.
			changeEnv(t, ns, "mz", "while-lost-"+strings.Repeat("x", i+1))
			rolledOut(t, ns, "mz", 60*time.Second)
			t.Logf("rollout requested while the %s Lease was lost: done %v later", controller, time.Since(requested).Round(time.Millisecond))
			waitFor(t, 10*time.Second, "an Event about the Materialize recorded after the request", func() bool {
				return materializeEventsSince(t, ns, requested) > 0
			})
			for name, before := range kept {
				if now := termOf(t, ns, name); now != before {
					t.Errorf("lease %s: term %+v became %+v while another Lease was lost", name, before, now)
				}
			}
			if !r.alive() {
				t.Fatalf("the process exited after losing one Lease: %v", r.exitErr)
			}
			for name := range kept {
				if n := leaseLogged(t, r, "lost lease", name); n > 0 {
					t.Errorf("lease %s was lost too", name)
				}
			}

			regain()
			waitFor(t, 30*time.Second, "the Lease led by the replica again", func() bool {
				return leaseLogged(t, r, "acquired lease", lostLease) > acquisitions
			})
			reacquired := termOf(t, ns, lostLease).acquired

			events, err := cp.AuditEvents()
			if err != nil {
				t.Fatal(err)
			}
			agent := "orchestratord-controllers/" + r.identity + " controller/" + controller
			var before int
			for _, ev := range events {
				if ev.By(agent) && ev.IsWrite() && ev.Succeeded() && ev.RequestReceivedTimestamp.Before(expiry) {
					before++
				}
			}
			if before == 0 {
				t.Fatalf("no writes by %q before its Lease was lost: the audit log does not attribute them", agent)
			}
			if late := audit.LateWrites(events, agent, []audit.Window{{From: expiry, To: reacquired}}); len(late) > 0 {
				t.Errorf("%d writes by the %s controller after its Lease could have expired (%v) and before it led again (%v): %v",
					len(late), controller, expiry, reacquired, late)
			}
		})
	}
}
