// Command failover-bench measures, on the local cluster that
// hack/cluster/run.sh sets up (`make bench-cluster` runs both), how long the
// materialize controller is without a leader and whether conversions fail
// while the operator's pods come and go:
//
//   - graceful handover: delete the pod holding the materialize Lease
//     (cluster.DeleteHolder: its SIGTERM releases the Lease); time from the
//     delete to the release, and from the release to the new holder's
//     acquireTime;
//   - crash failover: SIGKILL the holder's process (cluster.KillHolder),
//     then, separately, every process of its pod; the kubelet reports the
//     container terminated (a standby claims the Lease) or restarts it (the
//     restarted process reclaims it); time from the kill to the new term's
//     acquireTime. The killed pod is then replaced, so that every kill is a
//     first crash (the kubelet backs off restarting a crash-looping one);
//   - expiry failover: SIGKILL the holder's process and remove its pod at
//     once (cluster.CrashHolder), so no kubelet reports the death; a standby
//     claims the Lease once it expires; time from the kill to the new
//     holder's acquireTime, and from the holder's last renewal, which is
//     what the lease duration bounds;
//   - webhook rollout: `rollout restart` of the webhook while readers GET the
//     sample at v1 (every read converts), from two seconds before the
//     restart until it completes; failed reads per rollout;
//   - webhook SIGKILL (mode webhook-kill): under the same readers, SIGKILL
//     one webhook pod's process (the pods in turn) and count the failed
//     reads of the 15 s after it, by cause; the killed pod is then
//     replaced gracefully (no read may fail then), so every kill is a
//     first crash.
//
// Lease times come from the Lease itself (renewTime and acquireTime are
// stamped by the holders' clocks, which on a single-node cluster are this
// machine's clock).
// The crash mode runs as root on the node.
//
//	KUBECONFIG=... go run ./hack/bench/failover -runs 20 -rollouts 5
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/test/cluster"
)

func main() {
	runs := flag.Int("runs", 20, "handovers and crashes to measure, each")
	rollouts := flag.Int("rollouts", 5, "webhook rollouts to measure")
	readers := flag.Int("readers", 8, "concurrent readers during a webhook rollout")
	modes := flag.String("modes", "handover,kill,expiry,webhook-kill", "which failovers to measure: handover, kill (process and whole pod), expiry, webhook-kill")
	flag.Parse()
	if *runs < 1 || *rollouts < 0 || *readers < 1 {
		fmt.Fprintln(os.Stderr, "failover-bench: -runs and -readers must be at least 1, -rollouts at least 0")
		os.Exit(2)
	}
	c, err := cluster.Connect()
	if err == nil {
		err = run(context.Background(), c, *runs, *rollouts, *readers, strings.Split(*modes, ","))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover-bench:", err)
		os.Exit(1)
	}
}

const lease = leaderelection.LeaseMaterialize

func run(ctx context.Context, c *cluster.Clients, runs, rollouts, readers int, modes []string) error {
	if err := standbyReady(ctx, c); err != nil {
		return err
	}
	l, err := c.HeldByRunningPod(ctx, lease)
	if err != nil {
		return err
	}
	if l.Spec.LeaseDurationSeconds != nil {
		fmt.Printf("lease %s: duration %ds\n\n", lease, *l.Spec.LeaseDurationSeconds)
	}

	var toRelease, toAcquire, handovers, crash, sinceRenew []time.Duration
	for i := range count(runs, modes, "handover") {
		r, a, err := handover(ctx, c)
		if err != nil {
			return fmt.Errorf("graceful handover %d: %w", i+1, err)
		}
		toRelease, toAcquire, handovers = append(toRelease, r), append(toAcquire, a), append(handovers, r+a)
		fmt.Fprintf(os.Stderr, "graceful handover %d/%d: released %v after the delete, acquired %v later\n", i+1, runs, r, a)
	}
	killed := map[bool][]time.Duration{}
	for _, wholePod := range []bool{false, true} {
		for i := range count(runs, modes, "kill") {
			d, how, err := killOver(ctx, c, wholePod)
			if err != nil {
				return fmt.Errorf("crash failover %d (whole pod %v): %w", i+1, wholePod, err)
			}
			killed[wholePod] = append(killed[wholePod], d)
			fmt.Fprintf(os.Stderr, "crash failover %d/%d (whole pod %v): new term %v after the kill (%s)\n", i+1, runs, wholePod, d, how)
		}
	}
	for i := range count(runs, modes, "expiry") {
		d, r, err := crashOver(ctx, c)
		if err != nil {
			return fmt.Errorf("crash failover %d: %w", i+1, err)
		}
		crash, sinceRenew = append(crash, d), append(sinceRenew, r)
		fmt.Fprintf(os.Stderr, "expiry failover %d/%d: %v after the kill, %v after the last renewal\n", i+1, runs, d, r)
	}
	fmt.Println("| materialize Lease | runs | p50 | p99 | max |")
	fmt.Println("|---|---|---|---|---|")
	row("graceful handover: pod deleted -> new holder", handovers)
	row("  of which pod deleted -> lease released (kubelet's SIGTERM, reconcilers stop)", toRelease)
	row("  of which lease released -> new holder", toAcquire)
	row("crash failover: holder's process SIGKILLed -> new term", killed[false])
	row("crash failover: holder's whole pod SIGKILLed -> new term", killed[true])
	row("expiry failover (pod force-deleted, no kubelet report): SIGKILL -> new holder", crash)
	row("expiry failover: holder's last renewal -> new holder", sinceRenew)

	if n := count(runs, modes, "webhook-kill"); n > 0 {
		if err := webhookKills(ctx, c, n, readers); err != nil {
			return err
		}
	}

	if rollouts > 0 {
		fmt.Println("\n| webhook rollout | readers | reads | failed | rollout took |")
		fmt.Println("|---|---|---|---|---|")
	}
	var failed int64
	for i := range rollouts {
		got, took, err := c.WebhookRolloutUnderReads(ctx, readers, 0, 5*time.Minute)
		if err != nil {
			return fmt.Errorf("webhook rollout %d: %w", i+1, err)
		}
		failed += got.Failed
		fmt.Printf("| %d | %d | %d | %d | %v |\n", i+1, readers, got.Total(), got.Failed, took.Round(100*time.Millisecond))
		for _, f := range got.Failures {
			fmt.Fprintln(os.Stderr, "  failed read:", f)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d reads failed during webhook rollouts", failed)
	}
	return nil
}

// count is runs when mode is one of modes, else 0.
func count(runs int, modes []string, mode string) int {
	if slices.Contains(modes, mode) {
		return runs
	}
	return 0
}

func row(name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	fmt.Printf("| %s | %d | %v | %v | %v |\n", name, len(ds), pct(ds, 0.50), pct(ds, 0.99), ds[len(ds)-1].Round(time.Millisecond))
}

// pct is the nearest-rank percentile of sorted ds.
func pct(ds []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(float64(len(ds))*p)) - 1
	return ds[max(0, i)].Round(time.Millisecond)
}

// standbyReady waits until the controllers are fully rolled out, so that a
// standby is ready to take over, and the placement moves no Lease, so that
// the holder read is the one faulted.
func standbyReady(ctx context.Context, c *cluster.Clients) error {
	if err := c.WaitRolledOut(ctx, cluster.ControllersDeployment, 5*time.Minute); err != nil {
		return err
	}
	return c.WaitLeasesSpread(ctx, 3*time.Minute)
}

// handover deletes the holder's pod and returns the times from the delete to
// the release (the kubelet delivering SIGTERM, the reconcilers stopping) and
// from the release to the new holder's acquireTime.
func handover(ctx context.Context, c *cluster.Clients) (toRelease, toAcquire time.Duration, err error) {
	if err := standbyReady(ctx, c); err != nil {
		return 0, 0, err
	}
	h, err := c.DeleteHolder(ctx, lease, time.Minute)
	if err != nil {
		return 0, 0, err
	}
	return h.Released.Sub(h.Deleted), h.Acquired.Sub(h.Released), nil
}

// killOver kills the holder (its process, or its whole pod) and returns the
// time from the kill to the new term, and who began it.
func killOver(ctx context.Context, c *cluster.Clients, wholePod bool) (time.Duration, string, error) {
	if err := standbyReady(ctx, c); err != nil {
		return 0, "", err
	}
	time.Sleep(rand.N(5 * time.Second)) // not always just after a renewal
	crash, err := c.KillHolder(ctx, lease, wholePod)
	if err != nil {
		return 0, "", err
	}
	l, err := c.WaitNewTerm(ctx, lease, crash, time.Minute)
	if err != nil {
		return 0, "", err
	}
	how := "restarted process reclaimed"
	if cluster.Holder(l) != crash.Holder {
		how = "standby claimed"
	}
	if err := c.Kube.CoreV1().Pods(cluster.OperatorNamespace).Delete(ctx, crash.Holder, metav1.DeleteOptions{}); err != nil {
		return 0, "", err
	}
	return l.Spec.AcquireTime.Sub(crash.Killed), how, nil
}

func crashOver(ctx context.Context, c *cluster.Clients) (afterKill, afterRenewal time.Duration, err error) {
	if err := standbyReady(ctx, c); err != nil {
		return 0, 0, err
	}
	// The holder renews every retry period; without this pause every kill
	// would land just after the renewal that made it the holder.
	time.Sleep(rand.N(5 * time.Second))
	crash, err := c.CrashHolder(ctx, lease)
	if err != nil {
		return 0, 0, err
	}
	l, err := c.WaitClaimed(ctx, lease, &crash, time.Minute)
	if err != nil {
		return 0, 0, err
	}
	return l.Spec.AcquireTime.Sub(crash.Killed), l.Spec.AcquireTime.Sub(crash.LastRenewal), nil
}

// webhookKillWindow is how long after a webhook SIGKILL reads are counted:
// the e2e test requires that none fail after it.
const webhookKillWindow = 15 * time.Second

// webhookKills SIGKILLs the webhook pods in turn, runs times, under readers,
// and prints the failed reads per kill and their causes.
func webhookKills(ctx context.Context, c *cluster.Clients, runs, readers int) error {
	r := c.StartReaders(readers)
	defer r.Stop()
	time.Sleep(2 * time.Second)
	var failed []int64
	var last []time.Duration
	causes := map[string]int64{}
	var betweenKills int64
	for i := range runs {
		pods, err := c.WebhookPods(ctx)
		if err != nil || len(pods) < 2 {
			return fmt.Errorf("webhook kill %d: want at least 2 webhook pods: %v (%d)", i+1, err, len(pods))
		}
		victim := pods[i%len(pods)]
		k, err := c.KillWebhookUnderReads(ctx, r, &victim, webhookKillWindow)
		if err != nil {
			return fmt.Errorf("webhook kill %d: %w", i+1, err)
		}
		fmt.Fprintf(os.Stderr, "webhook kill %d/%d: %s\n", i+1, runs, k)
		failed, last = append(failed, k.Failed), append(last, k.LastFailure)
		for cause, n := range k.ByCause {
			causes[cause] += n
		}
		betweenKills += k.FailedAfter
		// Replace the killed pod so the next kill of it is a first crash
		// (the kubelet backs off restarting a crash-looping container).
		before := r.Failed()
		if err := c.Kube.CoreV1().Pods(cluster.OperatorNamespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.Kube.CoreV1().Pods(cluster.OperatorNamespace).Get(ctx, victim.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			return fmt.Errorf("%s not gone: %w", victim.Name, err)
		}
		if err := c.WaitRolledOut(ctx, cluster.WebhookDeployment, 5*time.Minute); err != nil {
			return err
		}
		betweenKills += r.Failed() - before
	}
	res := r.Stop()
	slices.Sort(failed)
	sum := int64(0)
	for _, f := range failed {
		sum += f
	}
	nth := func(p float64) int64 { return failed[max(0, int(math.Ceil(float64(len(failed))*p))-1)] }
	fmt.Printf("\n| webhook pod SIGKILLed, %d readers | kills | reads | failed per kill p50 | p99 | max | total | by cause | last failure after the kill, max |\n", readers)
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	slices.Sort(last)
	fmt.Printf("| failed reads in the %v after the kill | %d | %d | %d | %d | %d | %d | %v | %v |\n", webhookKillWindow, len(failed), res.Total(),
		nth(0.50), nth(0.99), failed[len(failed)-1], sum, causes, last[len(last)-1].Round(time.Millisecond))
	for cause, example := range r.Examples() {
		fmt.Fprintf(os.Stderr, "  first %s failure: %s\n", cause, example)
	}
	if betweenKills > 0 {
		return fmt.Errorf("%d reads failed while killed pods were replaced gracefully", betweenKills)
	}
	return nil
}
