package app_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/test/fixture"
)

func setSpec(t *testing.T, ns, name string, change func(*v1alpha1.MaterializeSpec)) {
	t.Helper()
	mzs := versioned.NewForConfigOrDie(cp.Config).MaterializeV1alpha1().Materializes(ns)
	waitFor(t, 10*time.Second, "update", func() bool {
		mz, err := mzs.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		change(&mz.Spec)
		_, err = mzs.Update(context.Background(), mz, metav1.UpdateOptions{})
		return err == nil
	})
}

func reason(t *testing.T, ns, name string) string {
	t.Helper()
	mz, err := versioned.NewForConfigOrDie(cp.Config).MaterializeV1alpha1().Materializes(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	if c := meta.FindStatusCondition(mz.Status.Conditions, "UpToDate"); c != nil {
		return c.Reason
	}
	return ""
}

// Image changes roll out through the built binary with every strategy, and
// a restarted process (a new leadership term re-listing everything) writes
// nothing once all is converged.
func TestRolloutStrategiesThroughTheBinary(t *testing.T) {
	ns := newNamespace(t, "strategies-")
	// No nodes run balancerd: its Deployments report Available as one would,
	// so the Balancer becomes Ready and the Console follows.
	fixture.KeepDeploymentsAvailable(t, kubernetes.NewForConfigOrDie(cp.Config), ns, "-balancerd")
	first := startReplicas(t, ns, 1)
	createMaterialize(t, ns, "mz")
	rolledOut(t, ns, "mz", 60*time.Second)

	steps := []struct {
		strategy v1alpha1.MaterializeRolloutStrategy
		image    string
		request  string
	}{
		{v1alpha1.RolloutWaitUntilReady, "materialize/environmentd:v26.2.0", "a1111111-1111-4111-8111-111111111111"},
		{v1alpha1.RolloutManuallyPromote, "materialize/environmentd:v26.3.0", "a2222222-2222-4222-8222-222222222222"},
		{v1alpha1.RolloutImmediatelyPromoteCausingDowntime, "materialize/environmentd:v26.4.0", "a3333333-3333-4333-8333-333333333333"},
	}
	for i, step := range steps {
		setSpec(t, ns, "mz", func(s *v1alpha1.MaterializeSpec) {
			s.RolloutStrategy, s.EnvironmentdImageRef, s.RequestRollout = step.strategy, step.image, step.request
		})
		if step.strategy == v1alpha1.RolloutManuallyPromote {
			waitFor(t, 30*time.Second, "ReadyToPromote", func() bool { return reason(t, ns, "mz") == "ReadyToPromote" })
			setSpec(t, ns, "mz", func(s *v1alpha1.MaterializeSpec) { s.ForcePromote = s.RequestRollout })
		}
		mz := rolledOut(t, ns, "mz", 60*time.Second)
		if mz.Status.ActiveGeneration != uint64(i+2) || mz.Status.LastCompletedRolloutEnvironmentdImageRef != step.image {
			t.Fatalf("%s: status %+v", step.strategy, mz.Status)
		}
	}

	// Balancer and Console follow the image a rollout completes, so they
	// converge just after it: wait for their Deployments before restarting.
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	last := steps[len(steps)-1].image
	for _, name := range []string{"balancerd", "console"} {
		want := strings.Replace(last, "environmentd", name, 1)
		waitFor(t, 30*time.Second, name+" on "+want, func() bool {
			list, err := kube.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return false
			}
			for _, d := range list.Items {
				if strings.HasSuffix(d.Name, "-"+name) && d.Spec.Template.Spec.Containers[0].Image == want {
					return true
				}
			}
			return false
		})
	}
	mzc := versioned.NewForConfigOrDie(cp.Config)
	waitFor(t, 30*time.Second, "Balancer and Console status for their current spec", func() bool {
		b, errB := mzc.MaterializeV1alpha1().Balancers(ns).Get(context.Background(), "mz", metav1.GetOptions{})
		c, errC := mzc.MaterializeV1alpha1().Consoles(ns).Get(context.Background(), "mz", metav1.GetOptions{})
		if errB != nil || errC != nil {
			return false
		}
		current := func(conds []metav1.Condition, gen int64) bool {
			cond := meta.FindStatusCondition(conds, "Ready")
			return cond != nil && cond.ObservedGeneration == gen
		}
		return current(b.Status.Conditions, b.Generation) && current(c.Status.Conditions, c.Generation)
	})

	// Restart: a new process, a new term, every object listed again.
	for _, r := range first {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		<-r.exited
	}
	since := time.Now()
	second := startReplica(t, ns, ns+"-again")
	waitFor(t, 30*time.Second, "the new replica to lead", func() bool {
		return holder(t, ns, "orchestratord-materialize-controller") == second.identity
	})
	time.Sleep(3 * time.Second)
	events, err := cp.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var writes []string
	for _, ev := range events {
		if strings.HasPrefix(ev.UserAgent, "orchestratord-controllers/"+second.identity) && ev.IsWrite() &&
			ev.RequestReceivedTimestamp.After(since) && ev.ObjectRef != nil && ev.ObjectRef.Namespace == ns && ev.ObjectRef.Resource != "leases" {
			writes = append(writes, ev.Verb+" "+ev.RequestURI)
		}
	}
	if len(writes) > 0 {
		t.Errorf("the resync of a converged environment wrote %d times: %v", len(writes), writes)
	}
}
