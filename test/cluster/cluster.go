// Package cluster drives the operator as installed on a real cluster by
// hack/cluster/run.sh (release "orchestratord", a sample Materialize): the
// end-to-end tests (test/e2e) and the failover benchmark (hack/bench/failover)
// share it, so both measure the same operations.
package cluster

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
)

// What hack/cluster/run.sh installs.
const (
	OperatorNamespace     = "orchestratord"
	SampleNamespace       = "materialize-sample"
	Sample                = "sample"
	WebhookDeployment     = "orchestratord-webhook"
	ControllersDeployment = "orchestratord-controllers"
)

// Clients talk to the cluster named by $KUBECONFIG.
type Clients struct {
	Kube        kubernetes.Interface
	Materialize versioned.Interface
	// Config is what the clients were built from, for other clients.
	Config *rest.Config
}

// Connect builds clients from $KUBECONFIG with a client-side rate limit high
// enough that load generators measure the server, not the limiter.
func Connect() (*Clients, error) {
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		return nil, fmt.Errorf("KUBECONFIG is not set: point it at a cluster set up by hack/cluster/run.sh")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mz, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Clients{Kube: kube, Materialize: mz, Config: cfg}, nil
}

// Pods returns the pods of one of the operator's Deployments as
// name -> "uid/restarts", so that two snapshots compare equal only when no
// pod was replaced or restarted in between.
func (c *Clients) Pods(ctx context.Context, deployment string) (map[string]string, error) {
	pods, err := c.Kube.CoreV1().Pods(OperatorNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/component=" + strings.TrimPrefix(deployment, "orchestratord-"),
	})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		restarts := int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		out[p.Name] = fmt.Sprintf("%s/%d", p.UID, restarts)
	}
	return out, nil
}

// Describe prints a Pods snapshot in a stable order, for comparisons and
// messages.
func Describe(pods map[string]string) string {
	var out []string
	for k, v := range pods {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// RolloutRestart does what `kubectl rollout restart` does.
func (c *Clients) RolloutRestart(ctx context.Context, deployment string) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	_, err := c.Kube.AppsV1().Deployments(OperatorNamespace).Patch(ctx, deployment, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// RolledOut reports whether every replica of d runs its current template and
// is available.
func RolledOut(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == *d.Spec.Replicas &&
		d.Status.Replicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas
}

// WaitRolledOut waits until the Deployment is RolledOut and no pod of an old
// ReplicaSet is left (terminating pods still serve, and still hold leases).
func (c *Clients) WaitRolledOut(ctx context.Context, deployment string, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := c.Kube.AppsV1().Deployments(OperatorNamespace).Get(ctx, deployment, metav1.GetOptions{})
		if err != nil || !RolledOut(d) {
			return false, nil
		}
		pods, err := c.Pods(ctx, deployment)
		return err == nil && len(pods) == int(*d.Spec.Replicas), nil
	})
	if err != nil {
		return fmt.Errorf("%s did not roll out within %v: %w", deployment, timeout, err)
	}
	return nil
}

// RequestRolloutAndWait requests a rollout of the sample and waits until it
// completes (RequestRollout, then WaitRolloutComplete).
func (c *Clients) RequestRolloutAndWait(ctx context.Context, timeout time.Duration) error {
	if err := c.RequestRollout(ctx); err != nil {
		return err
	}
	return c.WaitRolloutComplete(ctx, timeout)
}

// RequestRollout changes the sample's environmentdExtraEnv, which requests
// a new generation of environmentd.
// The operator may write the status between the read and the update
// (a new leader's first pass, say): the update is retried on a conflict.
func (c *Clients) RequestRollout(ctx context.Context) error {
	mzs := c.Materialize.MaterializeV1alpha1().Materializes(SampleNamespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := mzs.Get(ctx, Sample, metav1.GetOptions{})
		if err != nil {
			return err
		}
		obj.Spec.EnvironmentdExtraEnv = []corev1.EnvVar{{Name: "E2E", Value: time.Now().Format("150405.000000")}}
		obj.Spec.RequestRollout = ""
		_, err = mzs.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
}

// WaitRolloutComplete waits until the sample's requested rollout has
// completed and it is UpToDate at its current generation.
func (c *Clients) WaitRolloutComplete(ctx context.Context, timeout time.Duration) error {
	last := "the sample was never read"
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, false, func(ctx context.Context) (bool, error) {
		got, err := c.Materialize.MaterializeV1alpha1().Materializes(SampleNamespace).Get(ctx, Sample, metav1.GetOptions{})
		if err != nil {
			last = "reading the sample: " + err.Error()
			return false, nil
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, "UpToDate")
		// What the user would see, for a failure to say where it stopped.
		last = fmt.Sprintf("generation %d, requestRollout %q, lastCompletedRolloutRequest %q, UpToDate %s",
			got.Generation, got.Spec.RequestRollout, got.Status.LastCompletedRolloutRequest, describeCondition(cond))
		return got.Spec.RequestRollout != "" && got.Status.LastCompletedRolloutRequest == got.Spec.RequestRollout &&
			cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == got.Generation, nil
	})
	if err != nil {
		return fmt.Errorf("the rollout did not complete within %v (last seen: %s): %w", timeout, last, err)
	}
	return nil
}

func describeCondition(cond *metav1.Condition) string {
	if cond == nil {
		return "absent"
	}
	return fmt.Sprintf("%s at generation %d, %s: %s", cond.Status, cond.ObservedGeneration, cond.Reason, cond.Message)
}
