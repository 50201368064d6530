//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
)

// clusterdPods are the clusterd pods of generation gen, by name, with when
// each last became Ready (zero when it is not).
func clusterdPods(t *testing.T, ns string, gen int) map[string]time.Time {
	t.Helper()
	pods, err := c.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: fmt.Sprintf("environmentd.materialize.cloud/namespace=cluster,cluster.environmentd.materialize.cloud/generation=%d", gen)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, p := range pods.Items {
		out[p.Name] = time.Time{}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				out[p.Name] = cond.LastTransitionTime.Time
			}
		}
	}
	return out
}

// A 0dt rollout (WaitUntilReady) on the real cluster, the operator's
// NetworkPolicies enforced: environmentd creates its clusterd replicas,
// they run (the clusterd stand-in, with clusterd's command line), the new
// generation's environmentd reaches each of them over the network and
// waits for their dataflows to hydrate (STANDIN_HYDRATION, 30 s here) and
// for its clusters to stay caught up (the stability period, 10 s here)
// before it is ReadyToPromote: the operator's promotion comes no sooner
// than both after the last replica pod became Ready, and meanwhile the
// Materialize's condition says what the rollout waits for. Once the new
// generation leads, the old generation's clusterd replicas are gone.
func TestRolloutPromotesOnlyAHydratedGeneration(t *testing.T) {
	ctx := context.Background()
	ns := contractNamespace(t, nil)
	const hydration, stability = 30 * time.Second, 10 * time.Second
	mz := &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "mz", Namespace: ns},
		Spec: v1alpha1.MaterializeSpec{EnvironmentdImageRef: standinV26_35, BackendSecretName: "backend",
			EnvironmentdExtraEnv: []corev1.EnvVar{{Name: "STANDIN_HYDRATION", Value: hydration.String()}},
			// environmentd's system parameters: check catch-up every
			// second; a caught-up cluster must stay so for 10 s.
			EnvironmentdExtraArgs: []string{"--system-parameter-default=0dt_deployment_hydration_check_interval=1s",
				"--system-parameter-default=with_0dt_caught_up_check_stability_period=" + stability.String()}},
	}
	if _, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Create(ctx, mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crashLoops := watchCrashLoops(t, ns)
	first := waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
	id := first.Status.ResourceID
	waitExists(t, "generation 1's clusterd replicas running", func() error {
		pods := clusterdPods(t, ns, 1)
		for name, ready := range pods {
			if ready.IsZero() {
				return fmt.Errorf("%s not ready", name)
			}
		}
		if len(pods) != 2 {
			return fmt.Errorf("%d clusterd pods, want 2", len(pods))
		}
		return nil
	})

	// Users' clients, through balancerd and the policies, all along.
	clients := watchClients(t, ns, id)
	rolloutAt := time.Now()

	// Watch the rollout: the messages of its condition, when the operator
	// first asked for the promotion.
	var (
		mu          sync.Mutex
		messages    []string
		promotionAt time.Time
	)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_ = wait.PollUntilContextCancel(watchCtx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Get(ctx, "mz", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			mu.Lock()
			defer mu.Unlock()
			if cond := meta.FindStatusCondition(got.Status.Conditions, "UpToDate"); cond != nil &&
				(len(messages) == 0 || messages[len(messages)-1] != cond.Message) {
				messages = append(messages, cond.Message)
			}
			if r := got.Status.Rollout; r != nil && r.PromotionSentAt != nil && promotionAt.IsZero() {
				promotionAt = r.PromotionSentAt.Time
			}
			return false, nil
		})
	}()
	mzs := c.Materialize.MaterializeV1alpha1().Materializes(ns)
	requestForcedRollout(t, ns)
	var done *v1alpha1.Materialize
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := mzs.Get(ctx, "mz", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, "UpToDate")
		done = got
		return got.Status.ActiveGeneration == 2 && cond != nil && cond.Reason == "Applied", nil
	})
	stopWatch()
	<-watched
	if err != nil {
		t.Fatalf("generation 2 did not become active: %+v", done.Status)
	}

	gen2 := clusterdPods(t, ns, 2)
	var lastReady time.Time
	var names []string
	for name, ready := range gen2 {
		names = append(names, name)
		if ready.IsZero() {
			t.Errorf("generation 2's clusterd pod %s is not Ready after the promotion", name)
		}
		if ready.After(lastReady) {
			lastReady = ready
		}
	}
	sort.Strings(names)
	if want := []string{"mz" + id + "-cluster-s2-replica-s1-gen-2-0", "mz" + id + "-cluster-u1-replica-u1-gen-2-0"}; strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("generation 2's clusterd pods %v, want %v", names, want)
	}
	mu.Lock()
	defer mu.Unlock()
	// Ready times have a second's precision.
	if promotionAt.IsZero() {
		t.Error("the promotion was never seen in status.rollout")
	} else if waited := promotionAt.Sub(lastReady); waited < hydration+stability-time.Second {
		t.Errorf("promoted %v after the last clusterd replica became Ready, before it could hydrate (%v) and stay caught up (%v)", waited, hydration, stability)
	} else {
		t.Logf("promoted %v after the last clusterd replica became Ready (hydration %v, stability period %v)", waited, hydration, stability)
	}
	saidWhy := false
	for _, m := range messages {
		saidWhy = saidWhy || strings.Contains(m, "environmentd is Initializing (catching up: clusterd replica pods 2/2 ready, hydrating)")
	}
	if !saidWhy {
		t.Errorf("the condition never said the rollout waits for hydration; messages: %q", messages)
	}
	if pods := clusterdPods(t, ns, 1); len(pods) != 0 {
		waitExists(t, "generation 1's clusterd replicas gone", func() error {
			if pods := clusterdPods(t, ns, 1); len(pods) != 0 {
				return fmt.Errorf("still there: %v", pods)
			}
			return nil
		})
	}
	if loops := crashLoops(); len(loops) > 0 {
		t.Errorf("pods in CrashLoopBackOff during the rollout: %v", loops)
	}

	// While the new generation catches up, the old one serves every
	// client; the switch (the new environmentd's reboot as leader, the
	// Service's move) is the only window clients can notice, and after it
	// they are served by the new generation.
	if !promotionAt.IsZero() {
		// An attempt may take its whole timeout: one begun later may still
		// be in flight at the cutover.
		if f := failedBetween(clients(), rolloutAt, promotionAt.Add(-clientTimeout)); len(f.ByKind) > 0 {
			t.Errorf("clients failed before the promotion, while generation 2 caught up: %v (first, %v before the promotion, %v after the rollout's request: %s); balancerd said: %q; the console said: %q",
				f.ByKind, promotionAt.Sub(f.First), f.First.Sub(rolloutAt), f.FirstError, podsSaid(t, ns, "balancerd", "slow", "failed"),
				podsSaid(t, ns, "console", "upstream", "invalid URL"))
		}
	}
	appliedAt := time.Now()
	if cond := meta.FindStatusCondition(done.Status.Conditions, "UpToDate"); cond != nil {
		appliedAt = cond.LastTransitionTime.Time
	}
	poll(t, "clients served again after the rollout", 2*time.Minute, func() (bool, error) {
		ok := map[string]bool{}
		for _, a := range clients() {
			ok[a.Kind] = ok[a.Kind] || (a.OK && a.At.After(appliedAt))
		}
		return ok["pgwire"] && ok["http"] && ok["console"], nil
	})
	all := clients()
	if f := failedBetween(all, rolloutAt, time.Now()); len(f.ByKind) > 0 {
		said := podsSaid(t, ns, "balancerd", "slow", "failed")
		if len(said) > 4 {
			said = append(said[:2], said[len(said)-2:]...)
		}
		t.Logf("clients across the rollout (%d attempts, every 200 ms each, %d slower than 1 s): failed %v, from %v to %v after the promotion was sent (first: %s); balancerd said (first and last): %q; generation 2's environmentd: %s",
			len(all), slowAttempts(all), f.ByKind, f.First.Sub(promotionAt), f.Last.Sub(promotionAt), f.FirstError, said, podHistory(t, ns, fmt.Sprintf("mz%s-environmentd-2-0", id)))
	} else {
		t.Logf("clients across the rollout (%d attempts, every 200 ms each, %d slower than 1 s): none failed", len(all), slowAttempts(all))
	}
}

// podHistory says when a pod's container last started and how it ended
// before, and when the pod became Ready: what a cutover window is made of.
func podHistory(t *testing.T, ns, name string) string {
	t.Helper()
	p, err := c.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, st := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, "%s restarts %d", st.Name, st.RestartCount)
		if st.State.Running != nil {
			fmt.Fprintf(&b, ", running since %s", st.State.Running.StartedAt.Format(time.RFC3339))
		}
		if term := st.LastTerminationState.Terminated; term != nil {
			fmt.Fprintf(&b, ", last exit %d (%s) at %s", term.ExitCode, term.Reason, term.FinishedAt.Format(time.RFC3339))
		}
		b.WriteString("; ")
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			fmt.Fprintf(&b, "Ready %s since %s", cond.Status, cond.LastTransitionTime.Format(time.RFC3339))
		}
	}
	return b.String()
}
