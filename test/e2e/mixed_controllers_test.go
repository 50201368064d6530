//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/pkg/leaderelection/spread"
	"github.com/materializeinc/orchestratord/test/cluster"
)

// Two Deployments of the controllers with different --controllers: the
// chart's, scaled to one pod running materialize and balancer, and a second
// with two pods running console only. The pod that leads materialize and
// balancer leads two more Leases than the idle console pod; placement must
// not hand either to it (it does not campaign for them: the Lease would be
// released and nobody but the first pod would take it). So, past the
// minimum hold of two lease durations: the materialize and balancer Leases
// stay with the first Deployment's pod in one term each, no console-only pod
// ever holds them, each replica publishes what it campaigns for, and a
// rollout of the sample still completes (its Console made Ready by the
// console-only Deployment).
func TestMixedControllersDeploymentsPlaceLeasesOnlyWhereTheyCampaign(t *testing.T) {
	ctx := context.Background()
	const consoleOnly = controllers + "-console"

	orig, err := c.Kube.AppsV1().Deployments(operatorNS).Get(ctx, controllers, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setControllers := func(d *appsv1.Deployment, list string) {
		t.Helper()
		args := d.Spec.Template.Spec.Containers[0].Args
		for i, a := range args {
			if strings.HasPrefix(a, "--controllers=") {
				args[i] = "--controllers=" + list
				return
			}
		}
		t.Fatalf("the chart's controllers container has no --controllers argument: %v", args)
	}

	// The chart's Deployment: one pod, materialize and balancer.
	edited := orig.DeepCopy()
	setControllers(edited, "materialize,balancer")
	edited.Spec.Replicas = ptrTo(int32(1))
	if _, err := c.Kube.AppsV1().Deployments(operatorNS).Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.AppsV1().Deployments(operatorNS).Delete(ctx, consoleOnly, metav1.DeleteOptions{})
		d, err := c.Kube.AppsV1().Deployments(operatorNS).Get(ctx, controllers, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Replicas = orig.Spec.Replicas
		d.Spec.Template.Spec.Containers[0].Args = orig.Spec.Template.Spec.Containers[0].Args
		if _, err := c.Kube.AppsV1().Deployments(operatorNS).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRolledOut(t, controllers)
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 4*leaseDuration+time.Minute, true, func(ctx context.Context) (bool, error) {
			pods, err := c.Pods(ctx, consoleOnly)
			return err == nil && len(pods) == 0, nil
		}); err != nil {
			t.Fatalf("the console-only pods did not go: %v", err)
		}
		leasesHeldByRunningPods(t)
		presenceLeasesOwnedByLivePods(t)
	})

	// The second Deployment: a copy with its own component label (so that
	// neither Deployment's pods count as the other's), two pods, console.
	second := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: consoleOnly, Namespace: operatorNS}}
	second.Spec = *orig.Spec.DeepCopy()
	second.Spec.Replicas = ptrTo(int32(2))
	for _, labels := range []map[string]string{second.Spec.Selector.MatchLabels, second.Spec.Template.Labels} {
		labels["app.kubernetes.io/component"] = "controllers-console"
	}
	setControllers(second, "console")
	if _, err := c.Kube.AppsV1().Deployments(operatorNS).Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, controllers)
	waitRolledOut(t, consoleOnly)

	first, err := c.Pods(ctx, controllers)
	if err != nil || len(first) != 1 {
		t.Fatalf("want one pod of %s: %v %v", controllers, first, err)
	}
	consolePods, err := c.Pods(ctx, consoleOnly)
	if err != nil || len(consolePods) != 2 {
		t.Fatalf("want two pods of %s: %v %v", consoleOnly, consolePods, err)
	}
	var leader string
	for name := range first {
		leader = name
	}

	// Each replica says what it campaigns for.
	// (the Lease names, sorted)
	wantCampaigns := map[string]string{leader: leaderelection.LeaseBalancer + "," + leaderelection.LeaseMaterialize}
	for name := range consolePods {
		wantCampaigns[name] = leaderelection.LeaseConsole
	}
	for pod, want := range wantCampaigns {
		var got string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := c.Lease(ctx, spread.ReplicaLeaseName(pod))
			if err != nil {
				return false, nil
			}
			got = l.Annotations[spread.CampaignsAnnotation]
			return got == want, nil
		})
		if err != nil {
			t.Fatalf("presence Lease of %s campaigns for %q, want %q", pod, got, want)
		}
	}

	// Every Lease led where it is campaigned for.
	held := func(ctx context.Context) (map[string]string, error) {
		holders := map[string]string{}
		for _, name := range []string{leaderelection.LeaseMaterialize, leaderelection.LeaseBalancer, leaderelection.LeaseConsole} {
			l, err := c.Lease(ctx, name)
			if err != nil {
				return nil, err
			}
			holders[name] = cluster.Holder(l)
		}
		return holders, nil
	}
	var holders map[string]string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 4*leaseDuration+time.Minute, true, func(ctx context.Context) (bool, error) {
		holders, err = held(ctx)
		return err == nil && holders[leaderelection.LeaseMaterialize] == leader && holders[leaderelection.LeaseBalancer] == leader &&
			consolePods[holders[leaderelection.LeaseConsole]] != "", nil
	}); err != nil {
		t.Fatalf("leases not led where they are campaigned for: %v (materialize and balancer pod %s, console pods %s)", holders, leader, cluster.Describe(consolePods))
	}

	// Past the minimum hold, with margin, nothing moves: a hand-over to a
	// pod that does not campaign would show as a release or a new term.
	terms := map[string]int32{}
	var heldSince time.Time
	for _, name := range []string{leaderelection.LeaseMaterialize, leaderelection.LeaseBalancer} {
		l, err := c.Lease(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		terms[name] = *l.Spec.LeaseTransitions
		if at := l.Spec.AcquireTime.Time; at.After(heldSince) {
			heldSince = at
		}
	}
	until := heldSince.Add(3*leaseDuration + 2*retryPeriod)
	t.Logf("materialize and balancer led by %s since %s; watching until %s", leader, heldSince.Format(time.RFC3339), until.Format(time.RFC3339))
	for time.Now().Before(until) {
		for _, name := range []string{leaderelection.LeaseMaterialize, leaderelection.LeaseBalancer} {
			l, err := c.Lease(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if h := cluster.Holder(l); h != leader || *l.Spec.LeaseTransitions != terms[name] {
				t.Fatalf("lease %s moved to %q (transitions %d, was %d): placed on a replica that does not campaign for it",
					name, h, *l.Spec.LeaseTransitions, terms[name])
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if now, err := c.Pods(ctx, controllers); err != nil || cluster.Describe(now) != cluster.Describe(first) {
		t.Fatalf("the materialize and balancer pod was restarted or replaced: %s -> %s (%v)", cluster.Describe(first), cluster.Describe(now), err)
	}
	requestRolloutAndWait(t)

	// And the console-only pod reconciles: the Console's Deployment,
	// deleted, is made again (nobody else campaigns for console).
	deps, err := c.Kube.AppsV1().Deployments(cluster.SampleNamespace).List(ctx, metav1.ListOptions{LabelSelector: "materialize.cloud/app=console"})
	if err != nil || len(deps.Items) != 1 {
		t.Fatalf("want the sample's one console Deployment: %v", err)
	}
	gone := deps.Items[0]
	if err := c.Kube.AppsV1().Deployments(cluster.SampleNamespace).Delete(ctx, gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := c.Kube.AppsV1().Deployments(cluster.SampleNamespace).Get(ctx, gone.Name, metav1.GetOptions{})
		return err == nil && d.UID != gone.UID, nil
	}); err != nil {
		t.Fatalf("the console Deployment %s was not made again by the console-only pod: %v", gone.Name, err)
	}
}
