//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/pkg/supervisor"
	"github.com/materializeinc/orchestratord/test/audit"
	"github.com/materializeinc/orchestratord/test/cluster"
)

// The chaos suite: each test disrupts the cluster or the operator with
// readers GETting the sample at v1 (every read converts) and a rollout of
// the sample in progress, then checks what every fault must leave behind:
// the rollout completes (state converged, the requested change not lost),
// the operator's pods were not restarted unless the fault was theirs, and
// the audit log holds no write by a controllers pod while it was fenced.

// underLoad is one chaos test's steady load: readers and a rollout requested
// just before the fault.
type underLoad struct {
	readers           *cluster.Readers
	webhookPods, ctrl string
	// activeBefore is the sample's active generation before the rollout.
	activeBefore uint64
	// apiServerStarted is when a kube-apiserver the fault restarted was
	// back and ready (zero if the fault did not restart it). Until then
	// it serves reads before its Service informer has synced and fails
	// their conversions itself, `service "..." not found`, calling no
	// webhook: those failures are the fault's.
	apiServerStarted time.Time
}

func startLoad(t *testing.T) *underLoad {
	t.Helper()
	waitRolledOut(t, webhook)
	waitRolledOut(t, controllers)
	leasesSettled(t)
	before, err := c.Materialize.MaterializeV1alpha1().Materializes(cluster.SampleNamespace).Get(context.Background(), cluster.Sample, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := &underLoad{webhookPods: pods(t, webhook), ctrl: pods(t, controllers), readers: c.StartReaders(4), activeBefore: before.Status.ActiveGeneration}
	t.Cleanup(func() { l.readers.Stop() })
	if err := c.RequestRollout(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the new generation is being created
	return l
}

// finish waits for the rollout, reports the figures, and runs the checks
// every chaos test shares. restarted names the Deployments whose pods the
// fault itself restarted or replaced. It returns the fenced windows the
// audit check covered, per controllers pod.
func (l *underLoad) finish(t *testing.T, faultEnded time.Time, restarted ...string) map[string][]audit.Window {
	t.Helper()
	ctx := context.Background()
	if err := c.WaitRolloutComplete(ctx, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	converged := time.Since(faultEnded)
	// One request, one new generation: none lost, none made twice; the
	// one it replaced is torn down.
	want := l.activeBefore + 1
	var gens []uint64
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		gens = environmentdGenerations(t)
		return len(gens) == 1 && gens[0] == want, nil
	}); err != nil {
		t.Errorf("environmentd generations %v after the rollout, want only %d", gens, want)
	}
	// Reads succeed again: none fails over a few seconds.
	failedBefore := l.readers.Failed()
	time.Sleep(3 * time.Second)
	res := l.readers.Stop()
	t.Logf("%d reads at v1, %d failed (%d by the conversion webhook); the rollout completed %v after the fault ended",
		res.Total(), res.Failed, res.ConversionFailed, converged.Round(time.Millisecond))
	webhookFailed := res.ConversionFailed
	if res.Unresolved > 0 && !l.apiServerStarted.IsZero() && !res.LastUnresolved.After(l.apiServerStarted) {
		t.Logf("%d conversions failed in the restarted API server before it was ready, which could not resolve the webhook's Service yet", res.Unresolved)
		webhookFailed -= res.Unresolved
	}
	if webhookFailed > 0 && !strings.Contains(strings.Join(restarted, ","), webhook) {
		t.Errorf("%d reads failed in the conversion webhook, which the fault did not touch; the first: %v", webhookFailed, res.ConversionFailures)
	}
	if res.Failed > failedBefore {
		t.Errorf("reads still failing after the rollout completed: %v", res.Failures)
	} else if res.Failed > 0 {
		t.Logf("first failed reads: %v", res.Failures)
	}
	for _, d := range []struct{ name, before string }{{webhook, l.webhookPods}, {controllers, l.ctrl}} {
		if strings.Contains(strings.Join(restarted, ","), d.name) {
			continue
		}
		if after := pods(t, d.name); after != d.before {
			t.Errorf("%s pods restarted or replaced: before %v, after %v", d.name, d.before, after)
		}
	}
	return noWriteWhileFenced(t)
}

// noWriteWhileFenced checks the audit log against the controllers' own
// account of their terms: no pod wrote between the expiry of the Lease
// whose loss left it leading nothing and its next acquisition. It returns
// the windows it checked, per pod; a window older than the audit log kept
// (it rotates) is not checked, and not returned.
func noWriteWhileFenced(t *testing.T) map[string][]audit.Window {
	t.Helper()
	ctx := context.Background()
	windows, err := c.FencedWindows(ctx, leaseDuration)
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string][]audit.Window{}
	if len(windows) == 0 {
		return checked
	}
	events, since, err := cluster.AuditLog("orchestratord-controllers/")
	if err != nil {
		t.Fatal(err)
	}
	n, skipped := 0, 0
	for pod, ws := range windows {
		for _, w := range ws {
			if w.From.Before(since) {
				skipped++
				continue
			}
			checked[pod] = append(checked[pod], w)
			n++
		}
		if late := audit.LateWrites(events, cluster.UserAgent(pod), checked[pod]); len(late) > 0 {
			t.Errorf("%s wrote while fenced (%v): %v", pod, checked[pod], late)
		}
	}
	t.Logf("audit log: no write by a fenced controllers pod in %d fenced windows (%d older than the log, not checked)", n, skipped)
	return checked
}

// windowsSince counts the windows that opened after t: those a test's own
// fault caused.
func windowsSince(windows []audit.Window, t time.Time) int {
	n := 0
	for _, w := range windows {
		if w.From.After(t) {
			n++
		}
	}
	return n
}

func TestChaosAPIServerRestartedMidRollout(t *testing.T) {
	restartedMidRollout(t, "kube-apiserver", cluster.RestartComponents)
}

func TestChaosEtcdRestartedMidRollout(t *testing.T) {
	restartedMidRollout(t, "etcd", cluster.RestartComponents)
}

// etcd crashes (SIGKILL: no shutdown, no flush) and comes back: what it
// acknowledged survives, so the rollout completes with no generation lost
// or duplicated and no write of a fenced leader.
func TestChaosEtcdSIGKILLedMidRollout(t *testing.T) {
	restartedMidRollout(t, "etcd", cluster.KillComponents)
}

// restartedMidRollout stops a control-plane component of the node (stop
// is RestartComponents, SIGTERM, or KillComponents, SIGKILL), starts it
// again and waits for the node Ready, under the load.
func restartedMidRollout(t *testing.T, component string, stop func(context.Context, ...string) error) {
	l := startLoad(t)
	began := time.Now()
	if err := stop(context.Background(), component); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s stopped, started, node Ready in %v", component, time.Since(began).Round(time.Millisecond))
	if component == "kube-apiserver" {
		l.apiServerStarted = time.Now()
	}
	l.finish(t, time.Now())
}

// The materialize leader loses its network path to the API server (its
// pod's packets to it are dropped; the rest of the cluster is fine). It
// fences itself at its renew deadline, before its Lease expires; a standby
// takes the Lease at expiry and completes the rollout; when the network is
// back, the cut pod rejoins the election without a restart.
func TestChaosMaterializeLeaderCutFromAPIServer(t *testing.T) {
	ctx := context.Background()
	l := startLoad(t)
	held, err := c.HeldByRunningPod(ctx, leaderelection.LeaseMaterialize)
	if err != nil {
		t.Fatal(err)
	}
	cut := cluster.Holder(held)
	restore, err := cluster.CutFromAPIServer(cut)
	if err != nil {
		t.Fatal(err)
	}
	cutAt := time.Now()
	restored := false
	defer func() {
		if !restored {
			restore()
		}
	}()
	var takeover *time.Time
	lastRenewal := held.Spec.RenewTime.Time // the cut pod may renew once more before its packets drop
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 4*leaseDuration, true, func(ctx context.Context) (bool, error) {
		l, err := c.Lease(ctx, leaderelection.LeaseMaterialize)
		if err != nil {
			return false, nil
		}
		if cluster.Holder(l) == cut && l.Spec.RenewTime != nil && l.Spec.RenewTime.Time.After(lastRenewal) {
			lastRenewal = l.Spec.RenewTime.Time
		}
		if cluster.Holder(l) == cut || cluster.Holder(l) == "" || l.Spec.AcquireTime == nil {
			return false, nil
		}
		takeover = &l.Spec.AcquireTime.Time
		return true, nil
	}); err != nil {
		t.Fatalf("no standby took over from %s: %v", cut, err)
	}
	t.Logf("cut %s from the API server; a standby acquired the Lease %v after the cut (%v after its last renewal seen; lease %v)",
		cut, takeover.Sub(cutAt).Round(time.Millisecond), takeover.Sub(lastRenewal).Round(time.Millisecond), leaseDuration)
	if takeover.Sub(lastRenewal) < leaseDuration {
		t.Errorf("the standby acquired %v after a renewal, before the Lease expired", takeover.Sub(lastRenewal))
	}
	time.Sleep(2 * retryPeriod) // the cut pod is fenced, the new leader writes
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	restored = true
	ended := time.Now()
	// It fenced itself at its renew deadline, before the Lease expired,
	// and rejoins once its attempt to release (which cannot reach the API
	// server) gives up.
	var fences []cluster.Fence
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		raw, err := c.Kube.CoreV1().Pods(operatorNS).GetLogs(cut, &corev1.PodLogOptions{SinceTime: &metav1.Time{Time: cutAt}}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(raw), "rejoining the election") {
			return false, nil
		}
		if !strings.Contains(string(raw), "API connections aborted") {
			return false, fmt.Errorf("%s fenced without resetting its API connections", cut)
		}
		fences, err = c.Fences(ctx, cut, cutAt)
		return err == nil && len(fences) > 0, nil
	}); err != nil {
		t.Fatalf("%s did not log fencing itself and rejoining the election after the cut: %v", cut, err)
	}
	for _, f := range fences {
		t.Logf("%s fenced itself from %s %v after its last renewal (lease %v)", cut, f.Lease, f.At.Sub(f.RenewedAt).Round(time.Millisecond), leaseDuration)
		if f.At.Sub(f.RenewedAt) >= leaseDuration {
			t.Errorf("%s fenced itself from %s only at %v, after its Lease could have expired", cut, f.Lease, f.At)
		}
	}
	if windowsSince(l.finish(t, ended)[cut], cutAt) == 0 {
		t.Errorf("no fenced window of %s since the cut found in its log: the audit check proved nothing", cut)
	}
}

// The materialize leader's process is stopped past its Lease (SIGSTOP, as a
// stalled node or VM would) and continued after a standby took over: on
// waking it must not write (its writes are fenced at the renew deadline,
// whatever its goroutines were doing), and it rejoins the election.
func TestChaosMaterializeLeaderPausedAcrossItsLease(t *testing.T) {
	ctx := context.Background()
	l := startLoad(t)
	held, err := c.HeldByRunningPod(ctx, leaderelection.LeaseMaterialize)
	if err != nil {
		t.Fatal(err)
	}
	paused := cluster.Holder(held)
	pausedAt := time.Now()
	// Past the Lease, within the liveness probe's three 10 s periods.
	if err := cluster.PauseControllers(ctx, paused, leaseDuration+3*time.Second); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	// A standby's claim at the expiry lands within a moment of it, which
	// a loaded machine may stretch past the pause's end: the Lease is
	// given that moment, a retry period, not a second lease duration.
	var holder string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, retryPeriod, true, func(ctx context.Context) (bool, error) {
		after, err := c.Lease(ctx, leaderelection.LeaseMaterialize)
		if err != nil {
			return false, nil
		}
		holder = cluster.Holder(after)
		return holder != paused, nil
	}); err != nil {
		t.Errorf("%s still holds the Lease after a pause past it (held by %q)", paused, holder)
	}
	if windowsSince(l.finish(t, ended)[paused], pausedAt) == 0 {
		t.Errorf("no fenced window of %s since the pause found in its log: the audit check proved nothing", paused)
	}
}

// All webhook pods but one SIGKILLed at once (three replicas for the test):
// the API server does not retry a conversion whose connection dies, so
// reads in flight to the killed pods fail; the figure is reported, and
// failures must stop within 10 s (the survivor serves; each killed pod's
// supervisor starts a new server).
func TestChaosAllWebhookPodsButOneSIGKILLed(t *testing.T) {
	ctx := context.Background()
	scaleFor(t, webhook, 3)
	l := startLoad(t)
	list, err := c.Kube.CoreV1().Pods(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=webhook"})
	if err != nil {
		t.Fatal(err)
	}
	// Servers in service: older than the supervisor's minimum uptime.
	for _, victim := range list.Items[1:] {
		if err := cluster.WaitProcessOlder(ctx, string(victim.UID), "webhook", supervisor.DefaultMinUptime+2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	before := l.readers.Failed()
	for _, victim := range list.Items[1:] {
		if _, err := cluster.KillContainer(string(victim.UID), "webhook"); err != nil {
			t.Fatal(err)
		}
	}
	killed := time.Now()
	time.Sleep(10 * time.Second)
	settled := l.readers.Failed()
	t.Logf("%d of %d webhook pods SIGKILLed: %d reads failed in the 10 s after", len(list.Items)-1, len(list.Items), settled-before)
	waitRolledOut(t, webhook)
	time.Sleep(5 * time.Second)
	if late := l.readers.Failed() - settled; late > 0 {
		t.Errorf("%d reads failed more than 10 s after the SIGKILLs", late)
	}
	l.finish(t, killed, webhook)
}

// A node drain: cordon, then evict every pod on the node through the
// Eviction API, retrying refused evictions (harsher than `kubectl drain`,
// which skips DaemonSet and mirror pods: this also evicts the NetworkPolicy
// agent's, which its DaemonSet puts back at once). The cluster has one
// node, so an evicted pod's replacement stays Pending until the node is
// uncordoned: the drain cannot finish, which is what shows the PDBs
// holding. Throughout, a webhook pod stays ready and serving (no read
// fails); after the uncordon everything comes back and the rollout
// completes.
func TestChaosNodeDrain(t *testing.T) {
	ctx := context.Background()
	l := startLoad(t)
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("want the single-node local cluster: %v", err)
	}
	node := nodes.Items[0].Name
	cordon := func(on bool) {
		patch := []byte(fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on))
		if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cordon(true)
	uncordoned := false
	defer func() {
		if !uncordoned {
			cordon(false)
		}
	}()

	// Watch the webhook's ready, not-terminating pods while draining.
	var minServing atomic.Int32
	minServing.Store(1 << 20)
	watchCtx, stopWatching := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_ = wait.PollUntilContextCancel(watchCtx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			list, err := c.Kube.CoreV1().Pods(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=webhook"})
			if err != nil {
				return false, nil
			}
			n := int32(0)
			for _, p := range list.Items {
				if p.DeletionTimestamp == nil && podReady(&p) {
					n++
				}
			}
			if n < minServing.Load() {
				minServing.Store(n)
			}
			return false, nil
		})
	}()

	evicted, refused := map[string]bool{}, map[string]int{}
	drainUntil := time.Now().Add(30 * time.Second)
	for time.Now().Before(drainUntil) {
		all, err := c.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range all.Items {
			if p.DeletionTimestamp != nil || evicted[p.Namespace+"/"+p.Name] {
				continue
			}
			err := c.Kube.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
			switch {
			case err == nil:
				evicted[p.Namespace+"/"+p.Name] = true
			case apierrors.IsTooManyRequests(err):
				owner := p.GenerateName // a Deployment's pods share it
				if owner == "" {
					owner = p.Name
				}
				refused[p.Namespace+"/"+owner]++
			case apierrors.IsNotFound(err):
			default:
				t.Errorf("evicting %s/%s: %v", p.Namespace, p.Name, err)
			}
		}
		time.Sleep(time.Second)
	}
	stopWatching()
	<-watched
	failedDuringDrain := l.readers.Failed()
	t.Logf("drain for 30 s: %d pods evicted, evictions refused by a PDB: %v; fewest ready webhook pods: %d; %d reads failed",
		len(evicted), refused, minServing.Load(), failedDuringDrain)
	if minServing.Load() < 1 {
		t.Error("no webhook pod was ready at some point of the drain: its PDB did not hold")
	}
	if failedDuringDrain > 0 {
		t.Errorf("%d reads failed during the drain", failedDuringDrain)
	}
	for _, component := range []string{"orchestratord/orchestratord-webhook-", "orchestratord/orchestratord-controllers-"} {
		n := 0
		for name, times := range refused {
			if strings.HasPrefix(name, component) {
				n += times
			}
		}
		if n == 0 {
			t.Errorf("no eviction of %s* was refused: its PDB did not hold", component)
		}
	}
	cordon(false)
	uncordoned = true
	ended := time.Now()
	waitRolledOut(t, webhook)
	waitRolledOut(t, controllers)
	l.finish(t, ended, webhook, controllers)
}
