//go:build e2e

// Package e2e checks the operator's promises on a real cluster: `make e2e`
// starts the local cluster with the chart and a sample Materialize
// (hack/cluster/run.sh) and runs these tests against it with KUBECONFIG.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/pkg/leaderelection/spread"
	"github.com/materializeinc/orchestratord/test/cluster"
)

const (
	operatorNS  = cluster.OperatorNamespace
	webhook     = cluster.WebhookDeployment
	controllers = cluster.ControllersDeployment
)

var (
	c *cluster.Clients
	// What the installed controllers run with.
	leaseDuration, retryPeriod time.Duration
)

func TestMain(m *testing.M) {
	var err error
	if c, err = cluster.Connect(); err == nil {
		leaseDuration, retryPeriod, err = c.LeaderElectionTimings(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func pods(t *testing.T, deployment string) string {
	t.Helper()
	p, err := c.Pods(context.Background(), deployment)
	if err != nil {
		t.Fatal(err)
	}
	return cluster.Describe(p)
}

func waitRolledOut(t *testing.T, deployment string) {
	t.Helper()
	if err := c.WaitRolledOut(context.Background(), deployment, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// scaleFor scales one of the operator's Deployments to n replicas for the
// rest of the test, then back to what it had.
func scaleFor(t *testing.T, deployment string, n int32) {
	t.Helper()
	ctx := context.Background()
	d, err := c.Kube.AppsV1().Deployments(operatorNS).Get(ctx, deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	was := *d.Spec.Replicas
	scale := func(n int32) {
		patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
		if _, err := c.Kube.AppsV1().Deployments(operatorNS).Patch(ctx, deployment, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRolledOut(t, deployment)
	}
	scale(n)
	t.Cleanup(func() { scale(was) })
}

func requestRolloutAndWait(t *testing.T) {
	t.Helper()
	if err := c.RequestRolloutAndWait(context.Background(), 3*time.Minute); err != nil {
		t.Fatal(err)
	}
}

func TestLeasesHeldByRunningControllerPods(t *testing.T) {
	leasesHeldByRunningPods(t)
	presenceLeasesOwnedByLivePods(t)
}

// presenceLeasesOwnedByLivePods waits until each running controllers pod's
// presence Lease names that pod as owner, every presence Lease with an
// owner is owned by a Pod that exists with that UID (the garbage collector,
// or the replica itself, removes the Lease of a pod that is gone), and any
// without an owner (written by an older version) is younger than the sweep's
// hour: none pile up.
func presenceLeasesOwnedByLivePods(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var bad []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Kube.CoordinationV1().Leases(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: spread.ReplicaLabel + "=true"})
		if err != nil {
			return false, nil
		}
		running, err := c.Kube.CoreV1().Pods(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controllers"})
		if err != nil {
			return false, nil
		}
		var found []string
		owned := map[string]bool{}
		for _, l := range list.Items {
			refs := l.OwnerReferences
			if len(refs) == 0 {
				if time.Since(l.CreationTimestamp.Time) > time.Hour+10*time.Minute {
					found = append(found, l.Name+": no owner, and not swept an hour on")
				}
				continue
			}
			if len(refs) != 1 || refs[0].Kind != "Pod" {
				found = append(found, fmt.Sprintf("%s: owners %v", l.Name, refs))
				continue
			}
			p, err := c.Kube.CoreV1().Pods(operatorNS).Get(ctx, refs[0].Name, metav1.GetOptions{})
			if err != nil || p.UID != refs[0].UID {
				found = append(found, fmt.Sprintf("%s: owner %s/%s not a live pod (%v)", l.Name, refs[0].Name, refs[0].UID, err))
				continue
			}
			owned[p.Name] = l.Name == spread.ReplicaLeaseName(p.Name)
		}
		for _, p := range running.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && !owned[p.Name] {
				found = append(found, p.Name+": no presence Lease owned by it")
			}
		}
		bad = found
		return len(bad) == 0, nil
	})
	if err != nil {
		t.Errorf("presence Leases: %v", bad)
	}
}

// leasesHeldByRunningPods checks that each reconciler's Lease is held by a
// running controllers pod. A Lease released by a pod that just stopped is
// taken by a standby at once, but not in the same instant: each is given
// up to a lease duration (when even an expired one is taken).
func leasesHeldByRunningPods(t *testing.T) {
	t.Helper()
	for _, name := range []string{leaderelection.LeaseMaterialize, leaderelection.LeaseBalancer, leaderelection.LeaseConsole} {
		var last error
		_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, leaseDuration, true, func(ctx context.Context) (bool, error) {
			_, last = c.HeldByRunningPod(ctx, name)
			return last == nil, nil
		})
		if last != nil {
			t.Error(last)
		}
	}
}

// leasesSettled waits until the Leases are held by running pods and the
// placement moves none of them (cluster.WaitLeasesSpread), so a test that
// picks a holder to fault picks the one that keeps the Lease until then.
func leasesSettled(t *testing.T) {
	t.Helper()
	// Held by running pods, and a split of 3 and 0 is evened out once a Lease has been held for two
	// lease durations.
	if err := c.WaitLeasesSpread(context.Background(), 4*leaseDuration+time.Minute); err != nil {
		t.Fatal(err)
	}
}

// The mission: the conversion webhook never goes down during an operator
// rollout. Eight readers GET the sample at v1 (every read converts) for the
// whole rollout restart.
func TestWebhookRolloutRestartFailsNoRead(t *testing.T) {
	controllersBefore := pods(t, controllers)
	got, took, err := c.WebhookRolloutUnderReads(context.Background(), 8, 10000, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d reads at v1 across the webhook rollout (%v), %d failed", got.Total(), took.Round(time.Millisecond), got.Failed)
	if got.Failed != 0 {
		t.Errorf("%d of %d reads failed during the webhook rollout: %v", got.Failed, got.Total(), got.Failures)
	}
	if got.Total() < 10000 {
		t.Errorf("only %d reads ran", got.Total())
	}
	if after := pods(t, controllers); after != controllersBefore {
		t.Errorf("the webhook rollout touched the controllers: before %v, after %v", controllersBefore, after)
	}
}

// A controllers rollout moves the leases, keeps reconciling, and touches
// nothing of the webhook.
func TestControllersRolloutRestart(t *testing.T) {
	webhookBefore := pods(t, webhook)
	if err := c.RolloutRestart(context.Background(), controllers); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, controllers)
	leasesHeldByRunningPods(t)

	requestRolloutAndWait(t) // by the new controllers
	if after := pods(t, webhook); after != webhookBefore {
		t.Errorf("the controllers rollout touched the webhook: before %v, after %v", webhookBefore, after)
	}
}

// Deleting the pod that holds the materialize Lease: its SIGTERM releases the
// lease, a standby acquires it within two retry periods of the release (it
// watches the Lease; polling alone could take about that long; how soon
// is hack/bench/failover's to measure), and a fresh rollout completes.
func TestDeleteMaterializeLeaseHolder(t *testing.T) {
	waitRolledOut(t, controllers) // a standby is ready
	leasesSettled(t)
	h, err := c.DeleteHolder(context.Background(), leaderelection.LeaseMaterialize, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pod %s deleted: lease released %v later, acquired by %s %v after the release",
		h.Holder, h.Released.Sub(h.Deleted), h.NewHolder, h.Acquired.Sub(h.Released))
	if took := h.Acquired.Sub(h.Released); took > 2*retryPeriod {
		t.Errorf("acquired %v after the release, more than two retry periods: not on the release", took)
	}
	requestRolloutAndWait(t)
}

// Killing the materialize Lease holder outright (SIGKILL, its pod gone, so
// nothing releases the Lease): a standby claims it once it expires, never
// before, and at that first expiry, not a lease duration later (how soon
// after it is hack/bench/failover's to measure); a fresh rollout completes.
func TestCrashedMaterializeLeaseHolder(t *testing.T) {
	ctx := context.Background()
	waitRolledOut(t, controllers) // a standby is ready
	leasesSettled(t)
	crash, err := c.CrashHolder(ctx, leaderelection.LeaseMaterialize)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.WaitClaimed(ctx, leaderelection.LeaseMaterialize, &crash, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sinceRenewal := l.Spec.AcquireTime.Sub(crash.LastRenewal)
	t.Logf("new materialize lease holder %v after the kill, %v after the last renewal", l.Spec.AcquireTime.Sub(crash.Killed), sinceRenewal)
	if sinceRenewal < leaseDuration {
		t.Errorf("claimed %v after the last renewal, before the lease expired", sinceRenewal)
	}
	if sinceRenewal >= 2*leaseDuration {
		t.Errorf("claimed %v after the last renewal: not at the expiry", sinceRenewal)
	}
	requestRolloutAndWait(t)
}

// Evicting every webhook pod through the Eviction API: the PDB refuses the
// evictions that would leave none ready.
func TestEvictionKeepsAWebhookReady(t *testing.T) {
	ctx := context.Background()
	list, err := c.Kube.CoreV1().Pods(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=webhook"})
	if err != nil {
		t.Fatal(err)
	}
	evicted, refused := 0, 0
	for _, p := range list.Items {
		err := c.Kube.PolicyV1().Evictions(operatorNS).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: operatorNS}})
		switch {
		case err == nil:
			evicted++
		case apierrors.IsTooManyRequests(err):
			refused++
		default:
			t.Fatalf("evicting %s: %v", p.Name, err)
		}
	}
	t.Logf("%d webhook pods: %d evicted, %d refused by the PDB", len(list.Items), evicted, refused)
	if refused == 0 {
		t.Errorf("the PDB let every webhook pod be evicted")
	}
	if evicted == 0 && len(list.Items) > 1 {
		t.Errorf("the PDB refused every eviction of %d webhook pods", len(list.Items))
	}
	// The pods themselves, not the Deployment's status, which lags.
	if list, err = c.Kube.CoreV1().Pods(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=webhook"}); err != nil {
		t.Fatal(err)
	}
	serving := 0
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			serving++
		}
	}
	if serving < 1 {
		t.Errorf("no webhook pod ready and not terminating after the evictions")
	}
	waitRolledOut(t, webhook)
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// helm upgrade changing only the webhook's replica count scales it and
// touches nothing of the controllers.
func TestHelmUpgradeScalesOnlyTheWebhook(t *testing.T) {
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("HELM (the helm binary) is not set; make e2e sets it")
	}
	controllersBefore := pods(t, controllers)
	d, err := c.Kube.AppsV1().Deployments(operatorNS).Get(context.Background(), webhook, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := *d.Spec.Replicas
	scale := func(replicas int32) {
		out, err := exec.Command(helm, "upgrade", "orchestratord", os.Getenv("CHART"), "-n", operatorNS, "--reuse-values",
			"--set", fmt.Sprintf("webhook.replicas=%d", replicas), "--wait", "--timeout", "5m").CombinedOutput()
		if err != nil {
			t.Fatalf("helm upgrade: %v\n%s", err, out)
		}
	}
	scale(before + 1)
	t.Cleanup(func() { scale(before) })
	waitRolledOut(t, webhook)
	if d, err = c.Kube.AppsV1().Deployments(operatorNS).Get(context.Background(), webhook, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != before+1 {
		t.Errorf("webhook replicas %d, want %d", *d.Spec.Replicas, before+1)
	}
	if after := pods(t, controllers); after != controllersBefore {
		t.Errorf("scaling the webhook touched the controllers: before %v, after %v", controllersBefore, after)
	}
}

// The local cluster's network rule holds only for pods on its bridge: a pod
// in the host's network namespace is refused (hack/cluster/cluster.sh).
func TestClusterRefusesHostNetworkPods(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "host-network", Namespace: cluster.SampleNamespace},
		Spec: corev1.PodSpec{
			HostNetwork: true,
			Containers:  []corev1.Container{{Name: "c", Image: "localhost/orchestratord/webhook:dev"}},
		},
	}
	// The policy takes a moment to load after the API server starts.
	var refusal error
	_ = wait.PollUntilContextTimeout(context.Background(), time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		_, refusal = c.Kube.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(refusal), nil
	})
	if !apierrors.IsInvalid(refusal) || !strings.Contains(refusal.Error(), "hostNetwork") {
		t.Fatalf("want the policy's refusal naming hostNetwork, got %v", refusal)
	}
	pod.Spec.HostNetwork = false
	if _, err := c.Kube.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("the same pod without hostNetwork: %v", err)
	}
}
