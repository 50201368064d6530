//go:build e2e

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/test/cluster"
)

// The API server stops answering for longer than the renew deadline: every
// leader fences itself (no write after its deadline) and rejoins the
// election in process. Nothing restarts, the Leases are led again soon
// after the API server is back, and a rollout completes.
func TestAPIServerOutageRejoinsWithoutRestart(t *testing.T) {
	ctx := context.Background()
	waitRolledOut(t, controllers)
	leasesHeldByRunningPods(t)
	before := pods(t, controllers)
	webhookBefore := pods(t, webhook)

	outage := leaseDuration + 5*time.Second // past the renew deadline and the lease
	if d, err := time.ParseDuration(os.Getenv("E2E_API_OUTAGE")); err == nil && d > 0 {
		outage = d // longer outages, measured by hand: E2E_API_OUTAGE=60s
	}
	stopped, resumed, err := cluster.APIServerOutage(ctx, outage)
	if err != nil {
		t.Fatal(err)
	}
	back := apiServerBack(t)
	actedOnAfterOutage(t, back)
	// Every Lease led again, renewed after the API server came back.
	var led time.Time
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{leaderelection.LeaseMaterialize, leaderelection.LeaseBalancer, leaderelection.LeaseConsole} {
			l, err := c.HeldByRunningPod(ctx, name)
			if err != nil || l.Spec.RenewTime == nil || l.Spec.RenewTime.Time.Before(back) {
				return false, nil
			}
		}
		led = time.Now()
		return true, nil
	}); err != nil {
		t.Fatalf("the leases were not led again after the outage: %v", err)
	}
	t.Logf("API server stopped %v; answering again %v after it was continued; every lease led %v after that",
		resumed.Sub(stopped).Round(time.Millisecond), back.Sub(resumed).Round(time.Millisecond), led.Sub(back).Round(time.Millisecond))
	if after := pods(t, controllers); after != before {
		t.Errorf("controllers pods restarted or replaced across the outage: before %v, after %v", before, after)
	}
	if after := pods(t, webhook); after != webhookBefore {
		t.Errorf("webhook pods restarted or replaced across the outage: before %v, after %v", webhookBefore, after)
	}
	// The leaders fenced themselves and rejoined, in process.
	list, err := c.Kube.CoreV1().Pods(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controllers"})
	if err != nil {
		t.Fatal(err)
	}
	rejoined := 0
	for _, p := range list.Items {
		raw, err := c.Kube.CoreV1().Pods(operatorNS).GetLogs(p.Name, &corev1.PodLogOptions{SinceTime: &metav1.Time{Time: stopped}}).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rejoined += strings.Count(string(raw), "rejoining the election")
	}
	if rejoined == 0 {
		t.Error(`no controllers pod logged "rejoining the election": the outage did not fence a leader`)
	}
	fenced := 0
	for _, ws := range noWriteWhileFenced(t) {
		fenced += windowsSince(ws, stopped)
	}
	if fenced == 0 {
		t.Error("no fenced window since the outage found in the controllers' logs: the audit check proved nothing")
	}
	if err := c.WaitRolloutComplete(ctx, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// The API server SIGKILLed and kept down (what a control-plane upgrade or
// crash does: connections reset, then refused), then started: the
// controllers are not blind once it answers. A change written at its first
// healthy answer reaches a child object as fast as without an outage (the
// time is reported: docs/benchmarks.md), and the rollout completes without
// an operator restart.
func TestAPIServerKilledAndRestartedChangeActedOn(t *testing.T) {
	ctx := context.Background()
	waitRolledOut(t, controllers)
	leasesHeldByRunningPods(t)
	before := pods(t, controllers)
	outage := 15 * time.Second
	if d, err := time.ParseDuration(os.Getenv("E2E_API_OUTAGE")); err == nil && d > 0 {
		outage = d
	}
	killed := time.Now()
	if err := cluster.KillComponentsFor(ctx, outage, "kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	back := apiServerBack(t)
	t.Logf("kube-apiserver SIGKILLed, down %v, answering %v after the kill", outage, back.Sub(killed).Round(time.Millisecond))
	actedOnAfterOutage(t, back)
	if err := c.WaitRolloutComplete(ctx, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	if after := pods(t, controllers); after != before {
		t.Errorf("controllers pods restarted or replaced across the outage: before %v, after %v", before, after)
	}
}

// apiServerBack waits for the API server's first healthy answer and returns
// when it came.
func apiServerBack(t *testing.T) time.Time {
	t.Helper()
	var back time.Time
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		back = time.Now()
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the API server did not come back: %v", err)
	}
	return back
}

// actedOnAfterOutage writes a change to the sample at once and reports how
// long after the write the new generation's StatefulSet existed: what the
// controllers did with a change made as soon as the API server was back.
func actedOnAfterOutage(t *testing.T, back time.Time) {
	t.Helper()
	ctx := context.Background()
	newest := uint64(0)
	for _, g := range environmentdGenerations(t) {
		newest = max(newest, g)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return c.RequestRollout(ctx) == nil, nil // the webhook may still be reconnecting
	}); err != nil {
		t.Fatalf("no change could be written after the outage: %v", err)
	}
	written := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		gens, err := listEnvironmentdGenerations(ctx)
		if err != nil {
			return false, nil
		}
		for _, g := range gens {
			if g > newest {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the change written after the outage did not reach a StatefulSet: %v", err)
	}
	t.Logf("change written %v after the API server's first healthy answer; its StatefulSet seen %v after the write",
		written.Sub(back).Round(time.Millisecond), time.Since(written).Round(time.Millisecond))
}

// Each webhook pod in turn SIGKILLed under a steady load of reads at v1
// (one of them is the one the API server's connection uses), nothing
// drained, as in an OOM kill. The API server does not retry a conversion
// whose connection dies, so reads in flight on the killed process fail
// (each reader has one in flight), and a few more can race the API server
// noticing a dead idle connection: the bound is twice the readers. None may
// fail because a connection was refused: the supervisor holds the listening
// socket and starts a new server at once (before it did, a kill cost up to
// 18 reads, mostly refused dials; docs/benchmarks.md). None may fail 15 s
// after a kill.
func TestWebhookPodSIGKILLUnderReads(t *testing.T) {
	ctx := context.Background()
	waitRolledOut(t, webhook)
	list, err := c.WebhookPods(ctx)
	if err != nil || len(list) < 2 {
		t.Fatalf("want at least 2 webhook pods: %v (%d)", err, len(list))
	}
	const readers = 8
	r := c.StartReaders(readers)
	defer r.Stop()
	time.Sleep(2 * time.Second)
	for _, victim := range list {
		k, err := c.KillWebhookUnderReads(ctx, r, &victim, 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("SIGKILL under %d readers: %s", readers, k)
		if k.ByCause[cluster.CauseRefused] > 0 {
			t.Errorf("%s: %d reads failed on a refused connection: nothing held the listening socket while the server restarted", victim.Name, k.ByCause[cluster.CauseRefused])
		}
		if k.Failed > 2*readers {
			t.Errorf("%s: %d reads failed, more than twice the %d in flight", victim.Name, k.Failed, readers)
		}
		late := r.Failed()
		time.Sleep(5 * time.Second)
		if n := k.FailedAfter + r.Failed() - late; n > 0 {
			t.Errorf("%d reads failed more than 15 s after the SIGKILL of %s", n, victim.Name)
		}
	}
	for cause, example := range r.Examples() {
		t.Logf("first %s failure: %s", cause, example)
	}
}
