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
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/leaderelection"
)

const (
	operatorNS      = "orchestratord"
	sampleNS        = "materialize-sample"
	webhook         = "orchestratord-webhook"
	controllersName = "orchestratord-controllers"
)

var (
	cfg  *rest.Config
	kube kubernetes.Interface
	mz   versioned.Interface
)

func TestMain(m *testing.M) {
	var err error
	cfg, err = clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e needs KUBECONFIG of a cluster set up by hack/cluster/run.sh:", err)
		os.Exit(1)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	kube = kubernetes.NewForConfigOrDie(cfg)
	mz = versioned.NewForConfigOrDie(cfg)
	os.Exit(m.Run())
}

// podsOf returns the pods of a Deployment, by name -> uid/restarts.
func podsOf(t *testing.T, deployment string) map[string]string {
	t.Helper()
	pods, err := kube.CoreV1().Pods(operatorNS).List(context.Background(), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/component=" + strings.TrimPrefix(deployment, "orchestratord-"),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		restarts := int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		out[p.Name] = fmt.Sprintf("%s/%d", p.UID, restarts)
	}
	return out
}

func rolloutRestart(t *testing.T, deployment string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	if _, err := kube.AppsV1().Deployments(operatorNS).Patch(context.Background(), deployment, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func rolledOut(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == *d.Spec.Replicas &&
		d.Status.Replicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas
}

func waitRolledOut(t *testing.T, deployment string, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, false, func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(operatorNS).Get(ctx, deployment, metav1.GetOptions{})
		return err == nil && rolledOut(d), nil
	})
	if err != nil {
		t.Fatalf("%s did not roll out: %v", deployment, err)
	}
}

func TestLeasesHeldByRunningControllerPods(t *testing.T) {
	pods := podsOf(t, controllersName)
	for _, name := range []string{leaderelection.LeaseMaterialize, leaderelection.LeaseBalancer, leaderelection.LeaseConsole} {
		l, err := kube.CoordinationV1().Leases(operatorNS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Spec.HolderIdentity == nil || pods[*l.Spec.HolderIdentity] == "" {
			t.Errorf("lease %s held by %v, not a running controllers pod (%v)", name, l.Spec.HolderIdentity, pods)
		}
	}
}

// The mission: the conversion webhook never goes down during an operator
// rollout. Readers GET the sample at v1 for the whole rollout restart: it is
// stored as v1alpha1 and a GET reads etcd, so every read converts through
// the webhook Service. (A LIST would not do: the API server's watch cache of
// the v1 storage holds objects converted when they were watched.)
func TestWebhookRolloutRestartFailsNoRead(t *testing.T) {
	controllersBefore := podsOf(t, controllersName)
	ctx, stop := context.WithCancel(context.Background())
	var ok, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_, err := mz.MaterializeV1().Materializes(sampleNS).Get(ctx, "sample", metav1.GetOptions{})
				switch {
				case err == nil:
					ok.Add(1)
				case ctx.Err() == nil:
					failed.Add(1)
					mu.Lock()
					if len(failures) < 5 {
						failures = append(failures, err.Error())
					}
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	rolloutRestart(t, webhook)
	waitRolledOut(t, webhook, 5*time.Minute)
	// Keep reading until the old pods are gone and at least 10 000 reads ran.
	deadline := time.Now().Add(3 * time.Minute)
	for (ok.Load()+failed.Load() < 10000 || len(podsOf(t, webhook)) > webhookReplicas(t)) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	wg.Wait()
	total := ok.Load() + failed.Load()
	t.Logf("%d reads at v1 across the webhook rollout, %d failed", total, failed.Load())
	if failed.Load() != 0 {
		t.Errorf("%d of %d reads failed during the webhook rollout: %v", failed.Load(), total, failures)
	}
	if total < 10000 {
		t.Errorf("only %d reads ran", total)
	}
	if after := podsOf(t, controllersName); fmt.Sprint(sorted(after)) != fmt.Sprint(sorted(controllersBefore)) {
		t.Errorf("the webhook rollout touched the controllers: before %v, after %v", controllersBefore, after)
	}
}

// A controllers rollout moves the leases, keeps reconciling, and touches
// nothing of the webhook.
func TestControllersRolloutRestart(t *testing.T) {
	webhookBefore := podsOf(t, webhook)
	rolloutRestart(t, controllersName)
	waitRolledOut(t, controllersName, 5*time.Minute)
	TestLeasesHeldByRunningControllerPods(t)

	requestRolloutAndWait(t) // by the new controllers
	if after := podsOf(t, webhook); fmt.Sprint(sorted(after)) != fmt.Sprint(sorted(webhookBefore)) {
		t.Errorf("the controllers rollout touched the webhook: before %v, after %v", webhookBefore, after)
	}
}

func sorted(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func webhookReplicas(t *testing.T) int {
	t.Helper()
	d, err := kube.AppsV1().Deployments(operatorNS).Get(context.Background(), webhook, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return int(*d.Spec.Replicas)
}

// Deleting the pod that holds the materialize Lease: a new holder within the
// lease duration (the pod's SIGTERM releases it), and a fresh rollout
// completes.
func TestDeleteMaterializeLeaseHolder(t *testing.T) {
	ctx := context.Background()
	l, err := kube.CoordinationV1().Leases(operatorNS).Get(ctx, leaderelection.LeaseMaterialize, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		t.Fatalf("lease: %v", err)
	}
	old := *l.Spec.HolderIdentity
	deleted := time.Now()
	if err := kube.CoreV1().Pods(operatorNS).Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var took time.Duration
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := kube.CoordinationV1().Leases(operatorNS).Get(ctx, leaderelection.LeaseMaterialize, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == old || *l.Spec.HolderIdentity == "" {
			return false, nil
		}
		took = l.Spec.AcquireTime.Sub(deleted)
		return true, nil
	})
	if err != nil {
		t.Fatal("no new holder")
	}
	t.Logf("new materialize lease holder %v after the holder's pod was deleted", took)
	if took > 15*time.Second { // the chart's default lease duration
		t.Errorf("takeover took %v, more than the lease duration", took)
	}
	requestRolloutAndWait(t)
}

func requestRolloutAndWait(t *testing.T) {
	t.Helper()
	obj, err := mz.MaterializeV1alpha1().Materializes(sampleNS).Get(context.Background(), "sample", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.Spec.EnvironmentdExtraEnv = []corev1.EnvVar{{Name: "E2E", Value: time.Now().Format("150405.000000")}}
	obj.Spec.RequestRollout = ""
	if _, err := mz.MaterializeV1alpha1().Materializes(sampleNS).Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 3*time.Minute, false, func(ctx context.Context) (bool, error) {
		got, err := mz.MaterializeV1alpha1().Materializes(sampleNS).Get(ctx, "sample", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(got.Status.Conditions, "UpToDate")
		return got.Spec.RequestRollout != "" && got.Status.LastCompletedRolloutRequest == got.Spec.RequestRollout &&
			c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == got.Generation, nil
	})
	if err != nil {
		t.Fatalf("the rollout did not complete: %v", err)
	}
}

// Evicting every webhook pod through the Eviction API: the PDB refuses the
// evictions that would leave none ready.
func TestEvictionKeepsAWebhookReady(t *testing.T) {
	ctx := context.Background()
	pods, err := kube.CoreV1().Pods(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=webhook"})
	if err != nil {
		t.Fatal(err)
	}
	evicted, refused := 0, 0
	for _, p := range pods.Items {
		err := kube.PolicyV1().Evictions(operatorNS).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: operatorNS}})
		switch {
		case err == nil:
			evicted++
		case apierrors.IsTooManyRequests(err):
			refused++
		default:
			t.Fatalf("evicting %s: %v", p.Name, err)
		}
	}
	t.Logf("%d webhook pods: %d evicted, %d refused by the PDB", len(pods.Items), evicted, refused)
	if refused == 0 {
		t.Errorf("the PDB let every webhook pod be evicted")
	}
	d, err := kube.AppsV1().Deployments(operatorNS).Get(ctx, webhook, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.ReadyReplicas < 1 {
		t.Errorf("no webhook replica ready after the evictions")
	}
	waitRolledOut(t, webhook, 3*time.Minute)
}

// helm upgrade changing only the webhook's replica count scales it and
// touches nothing of the controllers.
func TestHelmUpgradeScalesOnlyTheWebhook(t *testing.T) {
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("HELM (the helm binary) is not set; make e2e sets it")
	}
	controllersBefore := podsOf(t, controllersName)
	d, err := kube.AppsV1().Deployments(operatorNS).Get(context.Background(), webhook, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := *d.Spec.Replicas + 1
	out, err := exec.Command(helm, "upgrade", "orchestratord", os.Getenv("CHART"), "-n", operatorNS, "--reuse-values",
		"--set", fmt.Sprintf("webhook.replicas=%d", want), "--wait", "--timeout", "5m").CombinedOutput()
	if err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	waitRolledOut(t, webhook, 3*time.Minute)
	if d, _ := kube.AppsV1().Deployments(operatorNS).Get(context.Background(), webhook, metav1.GetOptions{}); *d.Spec.Replicas != want {
		t.Errorf("webhook replicas %d, want %d", *d.Spec.Replicas, want)
	}
	if after := podsOf(t, controllersName); fmt.Sprint(sorted(after)) != fmt.Sprint(sorted(controllersBefore)) {
		t.Errorf("scaling the webhook touched the controllers: before %v, after %v", controllersBefore, after)
	}
}
