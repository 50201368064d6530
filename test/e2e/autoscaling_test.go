//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The webhook under its HorizontalPodAutoscaler (webhook.autoscaling), on
// the local cluster's metrics-server: turning it on by helm upgrade keeps
// the webhook's replica count (never below the floor) and leaves the
// controllers alone; the autoscaler reads the webhook's CPU; then
// `kubectl scale` of the controllers and `kubectl rollout restart` of the
// webhook each leave the other component's pods as they were.
func TestWebhookAutoscalesAndComponentsScaleApart(t *testing.T) {
	ctx := context.Background()
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("HELM (the helm binary) is not set; make e2e sets it")
	}
	kubectl := kubectlPath(t)
	upgrade := func(autoscaling bool) {
		t.Helper()
		// --reset-then-reuse-values: the release's values, over this
		// chart's defaults (webhook.autoscaling.* are newer than the
		// release's install).
		out, err := exec.Command(helm, "upgrade", "orchestratord", os.Getenv("CHART"), "-n", operatorNS, "--reset-then-reuse-values",
			"--set", fmt.Sprintf("webhook.autoscaling.enabled=%t", autoscaling), "--wait", "--timeout", "5m").CombinedOutput()
		if err != nil {
			t.Fatalf("helm upgrade (autoscaling %t): %v\n%s", autoscaling, err, out)
		}
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(kubectl, append([]string{"-n", operatorNS}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	replicas := func(name string) int32 {
		t.Helper()
		d, err := c.Kube.AppsV1().Deployments(operatorNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *d.Spec.Replicas
	}
	// One above the autoscaler's floor (2 here): turning it on must keep
	// the count, not reset it to the floor.
	replicasBefore := replicas(webhook) + 1
	// Back to the release as it was: its values (which must not keep
	// webhook.autoscaling: an earlier chart's schema refuses the key) and
	// webhook.replicas.
	revision := releaseRevision(t, helm)
	t.Cleanup(func() {
		if out, err := exec.Command(helm, "rollback", "orchestratord", strconv.Itoa(revision), "-n", operatorNS,
			"--wait", "--timeout", "5m").CombinedOutput(); err != nil {
			t.Errorf("helm rollback: %v\n%s", err, out)
		}
		// The next test starts from settled Deployments.
		waitRolledOut(t, webhook)
		waitRolledOut(t, controllers)
	})
	run("scale", "deployment/"+webhook, fmt.Sprintf("--replicas=%d", replicasBefore))
	waitRolledOut(t, webhook)
	controllersBefore := pods(t, controllers)

	// The webhook's replica count, as low as it went while the upgrade ran.
	lowest, stop := watchLowestReplicas(t, webhook)
	upgrade(true)
	stop()
	if got := lowest(); got < replicasBefore {
		t.Errorf("turning the autoscaler on took the webhook from %d replicas down to %d", replicasBefore, got)
	}
	if got := replicas(webhook); got != replicasBefore {
		t.Errorf("turning the autoscaler on changed the webhook's replicas from %d to %d", replicasBefore, got)
	}
	if after := pods(t, controllers); after != controllersBefore {
		t.Errorf("turning the webhook's autoscaler on touched the controllers: before %v, after %v", controllersBefore, after)
	}

	// The autoscaler reads the webhook's CPU from metrics-server.
	waitExists(t, "a CPU reading of the webhook's autoscaler", func() error {
		hpa, err := c.Kube.AutoscalingV2().HorizontalPodAutoscalers(operatorNS).Get(ctx, webhook, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if scalingActive(hpa) && len(hpa.Status.CurrentMetrics) == 1 && hpa.Status.CurrentMetrics[0].Resource != nil &&
			hpa.Status.CurrentMetrics[0].Resource.Current.AverageUtilization != nil {
			t.Logf("autoscaler: CPU at %d%% of the request", *hpa.Status.CurrentMetrics[0].Resource.Current.AverageUtilization)
			return nil
		}
		return fmt.Errorf("conditions %+v, current metrics %+v", hpa.Status.Conditions, hpa.Status.CurrentMetrics)
	})

	// kubectl scale of the controllers leaves the webhook's pods.
	webhookBefore := pods(t, webhook)
	controllerReplicas := replicas(controllers)
	run("scale", "deployment/"+controllers, fmt.Sprintf("--replicas=%d", controllerReplicas+1))
	t.Cleanup(func() { run("scale", "deployment/"+controllers, fmt.Sprintf("--replicas=%d", controllerReplicas)) })
	waitRolledOut(t, controllers)
	if after := pods(t, webhook); after != webhookBefore {
		t.Errorf("scaling the controllers touched the webhook: before %v, after %v", webhookBefore, after)
	}
	// kubectl rollout restart of the webhook leaves the controllers' pods.
	controllersBefore = pods(t, controllers)
	run("rollout", "restart", "deployment/"+webhook)
	run("rollout", "status", "deployment/"+webhook, "--timeout=5m")
	if after := pods(t, controllers); after != controllersBefore {
		t.Errorf("restarting the webhook touched the controllers: before %v, after %v", controllersBefore, after)
	}
}

func scalingActive(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	for _, cond := range hpa.Status.Conditions {
		if cond.Type == autoscalingv2.ScalingActive {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// watchLowestReplicas polls a Deployment's spec.replicas until stop and
// reports the lowest it saw.
func watchLowestReplicas(t *testing.T, deployment string) (lowest func() int32, stop func()) {
	t.Helper()
	var mu sync.Mutex
	low := int32(1 << 30)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if d, err := c.Kube.AppsV1().Deployments(operatorNS).Get(ctx, deployment, metav1.GetOptions{}); err == nil && d.Spec.Replicas != nil {
				mu.Lock()
				low = min(low, *d.Spec.Replicas)
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() int32 { mu.Lock(); defer mu.Unlock(); return low }, func() { cancel(); <-done }
}
