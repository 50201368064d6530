package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/supervisor"
)

// WebhookKill is what readers saw around one SIGKILL of a webhook pod.
type WebhookKill struct {
	Pod string
	// Reads and Failed count the reads in the window after the kill.
	Reads, Failed int64
	// ByCause splits Failed by FailureCause.
	ByCause map[string]int64
	// LastFailure is how long after the kill the last failed read of the
	// window was (zero if none failed).
	LastFailure time.Duration
	// FailedAfter counts the reads that failed after the window, until the
	// replacement was ready and the webhook rolled out.
	FailedAfter int64
}

// KillWebhookUnderReads SIGKILLs the webhook process of victim while r
// reads, counts the reads of the window that follows, then waits until the
// kubelet has restarted the container and the webhook is rolled out again.
// Runs as root on the node.
func (c *Clients) KillWebhookUnderReads(ctx context.Context, r *Readers, victim *corev1.Pod, window time.Duration) (WebhookKill, error) {
	out := WebhookKill{Pod: victim.Name, ByCause: map[string]int64{}}
	// A server younger than the supervisor's minimum uptime would not be
	// restarted (its crash taken for a start-up failure): kill only an
	// older one, as a crash in service would.
	if err := WaitProcessOlder(ctx, string(victim.UID), "webhook", supervisor.DefaultMinUptime+2*time.Second); err != nil {
		return out, err
	}
	failed, total := r.Failed(), r.Total()
	causes, _ := r.Causes()
	killed := time.Now()
	killedProc, err := KillContainer(string(victim.UID), "webhook")
	if err != nil {
		return out, err
	}
	time.Sleep(window)
	out.Reads, out.Failed = r.Total()-total, r.Failed()-failed
	after, last := r.Causes()
	for cause, n := range after {
		if d := n - causes[cause]; d > 0 {
			out.ByCause[cause] = d
		}
	}
	if out.Failed > 0 {
		out.LastFailure = last.Sub(killed)
	}
	afterWindow := r.Failed()
	if err := c.WaitWebhookReplaced(ctx, victim, killedProc); err != nil {
		return out, err
	}
	err = c.WaitRolledOut(ctx, WebhookDeployment, 5*time.Minute)
	out.FailedAfter = r.Failed() - afterWindow
	return out, err
}

// WaitWebhookReplaced waits until the webhook process k, SIGKILLed in
// victim, has been replaced (by the supervisor in the same container, or by
// the kubelet restarting the container) and the pod is ready again.
func (c *Clients) WaitWebhookReplaced(ctx context.Context, victim *corev1.Pod, k Process) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Kube.CoreV1().Pods(OperatorNamespace).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return StartedSince(string(victim.UID), "webhook", k) && podReady(p), nil
	})
	if err != nil {
		return fmt.Errorf("the webhook process %d SIGKILLed in %s was not replaced: %w", k.PID, victim.Name, err)
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WebhookPods lists the webhook's running pods.
func (c *Clients) WebhookPods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := c.Kube.CoreV1().Pods(OperatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=webhook"})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out, nil
}

// String is one line for a report.
func (k WebhookKill) String() string {
	return fmt.Sprintf("%s: %d of %d reads failed %v, the last %v after the kill; %d after the window", k.Pod, k.Failed, k.Reads, k.ByCause,
		k.LastFailure.Round(time.Millisecond), k.FailedAfter)
}
