package noderemoval_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/materializeinc/orchestratord/pkg/kubeclient"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade/noderemoval"
	"github.com/materializeinc/orchestratord/test/controlplane"
	"github.com/materializeinc/orchestratord/test/nodeupgradetest"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	controlplane.Main(m, controlplane.Options{}, func(started *controlplane.ControlPlane) { cp = started })
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
	w := nodeupgradetest.New(t, cp.Config)
	kube := w.Kube
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
		w.Node(name, nil, spec)
	}
	for name := range nodes {
		w.Pod(w.Environment("env-on-"+name), "clusterd-u1", "clusterd", name)
	}
	force := w.ForceRollout
	completeRollout := func(ns string) { w.CompleteRollout(w.Get(ns)) }

	// The trigger's own client counts the node lists its scans make, so
	// the test can wait for scans rather than for time, which a loaded
	// machine stretches.
	var nodeLists atomic.Int64
	counted := rest.CopyConfig(cp.Config)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			// Only a list answered counts: a scan whose list fails skips
			// the rest.
			if r.URL.Path == "/api/v1/nodes" && err == nil && resp.StatusCode == http.StatusOK {
				nodeLists.Add(1)
			}
			return resp, err
		})
	})
	scanKube, err := kubeclient.NewForConfig(counted)
	if err != nil {
		t.Fatal(err)
	}
	tr := &nodeupgrade.Trigger{Kube: scanKube, MZ: w.MZ, Log: zap.NewNop(), Cooldown: 200 * time.Millisecond}
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
	// Two lists answered after the update returned: scans run one at a
	// time, so the second was sent after it, and its scan saw the node
	// unmarked.
	seen := nodeLists.Load()
	eventually("a scan of the unmarked node", func() bool { return nodeLists.Load() >= seen+2 })
	if got := force("env-on-karpenter"); got != first["env-on-karpenter"] {
		t.Fatal("triggered with the node unmarked")
	}
	setTaints(taint(noderemoval.KarpenterDisruptedTaint))
	eventually("marked again, triggered again", func() bool {
		return force("env-on-karpenter") != first["env-on-karpenter"]
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
