package noderemoval_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade/noderemoval"
	"github.com/materializeinc/orchestratord/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	var err error
	cp, err = controlplane.Start(context.Background(), controlplane.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = cp.Stop()
	os.Exit(code)
}

func TestMarkedForRemoval(t *testing.T) {
	for taint, want := range map[string]bool{
		"karpenter.sh/disrupted":           true,
		"ToBeDeletedByClusterAutoscaler":   true,
		"node.kubernetes.io/unschedulable": false,
		"karpenter.sh/disruption":          false, // Karpenter's pre-v1 taint value, not its key
	} {
		n := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: taint, Effect: corev1.TaintEffectNoSchedule}}}}
		if _, got := noderemoval.MarkedForRemoval(n); got != want {
			t.Errorf("%s: %v, want %v", taint, got, want)
		}
	}
	if _, got := noderemoval.MarkedForRemoval(&corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}); got {
		t.Error("a cordoned node is not marked for removal")
	}
}

const settled = "0b8f0e6f-6f35-4e8c-9d7e-2a3a3c4c1f10"

// Nodes tainted by Karpenter or the cluster autoscaler trigger one rollout
// of each Materialize with environmentd or clusterd pods on them; a node
// cordoned by hand or tainted otherwise triggers nothing; a node marked
// again after it was unmarked triggers again.
func TestTaintedNodesTriggerOneRolloutEach(t *testing.T) {
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	mz := versioned.NewForConfigOrDie(cp.Config)
	taint := func(key string) []corev1.Taint {
		if key == "" {
			return nil
		}
		return []corev1.Taint{{Key: key, Effect: corev1.TaintEffectNoSchedule}}
	}
	nodes := map[string]corev1.NodeSpec{
		"karpenter":  {Taints: taint(noderemoval.KarpenterDisruptedTaint)},
		"autoscaler": {Taints: taint(noderemoval.ClusterAutoscalerDeleteTaint), Unschedulable: true},
		"cordoned":   {Unschedulable: true},
		"other":      {Taints: taint("dedicated")},
	}
	for name, spec := range nodes {
		if _, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name := range nodes {
		ns := "env-on-" + name
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		m, err := mz.MaterializeV1alpha1().Materializes(ns).Create(ctx, &v1alpha1.Materialize{ObjectMeta: metav1.ObjectMeta{Name: "mz"},
			Spec: v1alpha1.MaterializeSpec{EnvironmentdImageRef: "materialize/environmentd:v26.1.0", BackendSecretName: "backend", RequestRollout: settled}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m.Status.LastCompletedRolloutRequest = settled
		if _, err := mz.MaterializeV1alpha1().Materializes(ns).UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "clusterd-u1", Labels: map[string]string{"app.kubernetes.io/name": "clusterd",
				"materialize.cloud/organization-name": "mz", "materialize.cloud/organization-namespace": ns}},
			Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "clusterd", Image: "clusterd"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	force := func(ns string) string {
		m, err := mz.MaterializeV1alpha1().Materializes(ns).Get(ctx, "mz", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return m.Annotations[nodeupgrade.ForceRolloutAnnotation]
	}
	completeRollout := func(ns string) {
		m, err := mz.MaterializeV1alpha1().Materializes(ns).Get(ctx, "mz", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m.Status.LastCompletedRolloutRequest = m.Spec.RequestRollout
		if _, err := mz.MaterializeV1alpha1().Materializes(ns).UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	tr := &nodeupgrade.Trigger{Kube: kube, MZ: mz, Log: zap.NewNop(), Cooldown: 200 * time.Millisecond}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { noderemoval.Run(runCtx, 100*time.Millisecond, tr, zap.NewNop()); close(done) }()
	defer func() { cancel(); <-done }()

	eventually := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eventually("the Materializes on marked nodes triggered", func() bool {
		return force("env-on-karpenter") != "" && force("env-on-autoscaler") != ""
	})
	first := map[string]string{"env-on-karpenter": force("env-on-karpenter"), "env-on-autoscaler": force("env-on-autoscaler")}
	completeRollout("env-on-karpenter")
	completeRollout("env-on-autoscaler")
	time.Sleep(time.Second) // scans, past the cooldown
	for ns, v := range first {
		if got := force(ns); got != v {
			t.Errorf("%s triggered again while its pods stay on the marked node", ns)
		}
	}
	for _, ns := range []string{"env-on-cordoned", "env-on-other"} {
		if v := force(ns); v != "" {
			t.Errorf("%s triggered: %q", ns, v)
		}
	}

	// Karpenter gives the node up (the taint is removed), then marks it
	// again: a new stretch, a new rollout.
	setTaints := func(taints []corev1.Taint) {
		n, err := kube.CoreV1().Nodes().Get(ctx, "karpenter", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Spec.Taints = taints
		if _, err := kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setTaints(nil)
	time.Sleep(500 * time.Millisecond)
	if got := force("env-on-karpenter"); got != first["env-on-karpenter"] {
		t.Fatal("triggered with the node unmarked")
	}
	setTaints(taint(noderemoval.KarpenterDisruptedTaint))
	eventually("marked again, triggered again", func() bool {
		return force("env-on-karpenter") != first["env-on-karpenter"]
	})
}
