// Command failover-bench measures, on the local cluster that
// hack/cluster/run.sh sets up (`make bench-cluster` runs both), how long the
// materialize controller is without a leader and whether conversions fail
// while the operator's pods come and go:
//
//   - graceful handover: delete the pod holding the materialize Lease (its
//     SIGTERM releases the Lease); time from the delete to the new holder's
//     acquireTime;
//   - crash failover: SIGKILL the holder's process and remove its pod at
//     once (cluster.CrashHolder); nobody releases the Lease, a standby claims
//     it once it expires; time from the kill to the new holder's
//     acquireTime, and from the holder's last renewal, which is what the
//     lease duration bounds;
//   - webhook rollout: `rollout restart` of the webhook while readers GET the
//     sample at v1 (every read converts); failed reads per rollout.
//
// Lease times come from the Lease itself (acquireTime is written by the new
// holder's clock, which on a single-node cluster is this machine's clock).
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
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/test/cluster"
)

func main() {
	runs := flag.Int("runs", 20, "handovers and crashes to measure, each")
	rollouts := flag.Int("rollouts", 5, "webhook rollouts to measure")
	readers := flag.Int("readers", 8, "concurrent readers during a webhook rollout")
	flag.Parse()
	if *runs < 1 || *rollouts < 0 || *readers < 1 {
		fmt.Fprintln(os.Stderr, "failover-bench: -runs and -readers must be at least 1, -rollouts at least 0")
		os.Exit(2)
	}
	c, err := cluster.Connect()
	if err == nil {
		err = run(context.Background(), c, *runs, *rollouts, *readers)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover-bench:", err)
		os.Exit(1)
	}
}

const lease = leaderelection.LeaseMaterialize

func run(ctx context.Context, c *cluster.Clients, runs, rollouts, readers int) error {
	if err := c.WaitRolledOut(ctx, cluster.ControllersDeployment, 5*time.Minute); err != nil {
		return err
	}
	l, err := c.Lease(ctx, lease)
	if err != nil {
		return err
	}
	fmt.Printf("lease %s: duration %ds\n\n", lease, *l.Spec.LeaseDurationSeconds)

	var toRelease, toAcquire, handovers, crash, sinceRenew []time.Duration
	for i := range runs {
		r, a, err := handover(ctx, c)
		if err != nil {
			return fmt.Errorf("graceful handover %d: %w", i+1, err)
		}
		toRelease, toAcquire, handovers = append(toRelease, r), append(toAcquire, a), append(handovers, r+a)
		fmt.Fprintf(os.Stderr, "graceful handover %d/%d: released %v after the delete, acquired %v later\n", i+1, runs, r, a)
	}
	for i := range runs {
		d, r, err := crashOver(ctx, c)
		if err != nil {
			return fmt.Errorf("crash failover %d: %w", i+1, err)
		}
		crash, sinceRenew = append(crash, d), append(sinceRenew, r)
		fmt.Fprintf(os.Stderr, "crash failover %d/%d: %v after the kill, %v after the last renewal\n", i+1, runs, d, r)
	}
	fmt.Println("| materialize Lease | runs | p50 | p99 | max |")
	fmt.Println("|---|---|---|---|---|")
	row("graceful handover: pod deleted -> new holder", handovers)
	row("  of which pod deleted -> lease released (kubelet's SIGTERM, reconcilers stop)", toRelease)
	row("  of which lease released -> new holder", toAcquire)
	row("crash failover: SIGKILL -> new holder", crash)
	row("crash failover: holder's last renewal -> new holder", sinceRenew)

	fmt.Println("\n| webhook rollout | readers | reads | failed | rollout took |")
	fmt.Println("|---|---|---|---|---|")
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

func row(name string, ds []time.Duration) {
	slices.Sort(ds)
	fmt.Printf("| %s | %d | %v | %v | %v |\n", name, len(ds), pct(ds, 0.50), pct(ds, 0.99), ds[len(ds)-1].Round(time.Millisecond))
}

// pct is the nearest-rank percentile of sorted ds.
func pct(ds []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(float64(len(ds))*p)) - 1
	return ds[max(0, i)].Round(time.Millisecond)
}

// holderReady waits until the controllers are fully rolled out (so a standby
// is ready to take over) and returns the lease, held by one of them.
func holderReady(ctx context.Context, c *cluster.Clients) (*coordinationv1.Lease, error) {
	if err := c.WaitRolledOut(ctx, cluster.ControllersDeployment, 5*time.Minute); err != nil {
		return nil, err
	}
	l, err := c.Lease(ctx, lease)
	if err != nil {
		return nil, err
	}
	running, err := c.Pods(ctx, cluster.ControllersDeployment)
	if err != nil {
		return nil, err
	}
	if running[cluster.Holder(l)] == "" {
		return nil, fmt.Errorf("lease held by %q, not a running controllers pod", cluster.Holder(l))
	}
	return l, nil
}

// handover deletes the holder's pod and returns the times from the delete to
// the release (stamped by the releasing holder as the released lease's
// renewTime: this part is the kubelet delivering SIGTERM and the reconcilers
// stopping) and from the release to the new holder's acquireTime.
func handover(ctx context.Context, c *cluster.Clients) (toRelease, toAcquire time.Duration, err error) {
	held, err := holderReady(ctx, c)
	if err != nil {
		return 0, 0, err
	}
	holder := cluster.Holder(held)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// Watch from the state just read: every later version of the lease is
	// seen, the short-lived released one included.
	w, err := c.Kube.CoordinationV1().Leases(cluster.OperatorNamespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + lease, ResourceVersion: held.ResourceVersion,
	})
	if err != nil {
		return 0, 0, err
	}
	defer w.Stop()
	start := time.Now()
	if err := c.Kube.CoreV1().Pods(cluster.OperatorNamespace).Delete(ctx, holder, metav1.DeleteOptions{}); err != nil {
		return 0, 0, err
	}
	var released time.Time
	for ev := range w.ResultChan() {
		l, ok := ev.Object.(*coordinationv1.Lease)
		if !ok {
			return 0, 0, fmt.Errorf("watching lease: %v", ev.Object)
		}
		switch h := cluster.Holder(l); {
		case h == "" && released.IsZero() && l.Spec.RenewTime != nil:
			released = l.Spec.RenewTime.Time
		case h != "" && h != holder && l.Spec.AcquireTime != nil:
			if released.IsZero() {
				return 0, 0, fmt.Errorf("lease moved from %s to %s without a release", holder, h)
			}
			return released.Sub(start), l.Spec.AcquireTime.Sub(released), nil
		}
	}
	return 0, 0, fmt.Errorf("no new holder of %s within a minute of deleting %s", lease, holder)
}

func crashOver(ctx context.Context, c *cluster.Clients) (afterKill, afterRenewal time.Duration, err error) {
	if _, err := holderReady(ctx, c); err != nil {
		return 0, 0, err
	}
	// The holder renews every retry period; without this pause every kill
	// would land just after the renewal that made it the holder.
	time.Sleep(rand.N(5 * time.Second))
	crash, err := c.CrashHolder(ctx, lease)
	if err != nil {
		return 0, 0, err
	}
	l, err := c.WaitNewHolder(ctx, lease, crash.Holder, time.Minute)
	if err != nil {
		return 0, 0, err
	}
	return l.Spec.AcquireTime.Sub(crash.Killed), l.Spec.AcquireTime.Sub(crash.LastRenewal), nil
}
