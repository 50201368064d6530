package nodeupgrade_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/materializeinc/orchestratord/pkg/conversion"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade"
	"github.com/materializeinc/orchestratord/test/controlplane"
	"github.com/materializeinc/orchestratord/test/nodeupgradetest"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	controlplane.Main(m, controlplane.Options{}, func(started *controlplane.ControlPlane) { cp = started })
}

// RollOut against a real API server: one forced rollout per scope, none
// within the cooldown whatever the scope, none while a rollout is in
// progress, and the stored object as the conversion would leave it.
func TestRollOut(t *testing.T) {
	ctx := context.Background()
	w := nodeupgradetest.New(t, cp.Config)
	kube, mz := w.Kube, w.MZ
	ns := w.Namespace("", "nodeupgrade-")
	w.Materialize(ns, "a")
	w.Materialize(ns, "b")
	a, b := nodeupgrade.Instance{Namespace: ns, Name: "a"}, nodeupgrade.Instance{Namespace: ns, Name: "b"}
	gone := nodeupgrade.Instance{Namespace: ns, Name: "gone"}

	now := time.Date(2026, 7, 22, 0, 0, 0, 0, time.UTC)
	values := 0
	reg := prometheus.NewRegistry()
	tr := &nodeupgrade.Trigger{Kube: kube, MZ: mz, Cooldown: time.Minute, Now: func() time.Time { return now },
		NewValue: func() string { values++; return fmt.Sprintf("value-%d", values) }, Metrics: nodeupgrade.NewMetrics(reg)}
	affected := map[nodeupgrade.Instance][]string{a: {"n1"}, gone: {"n1"}}
	expect := func(got map[nodeupgrade.Instance]nodeupgrade.Outcome, want map[nodeupgrade.Instance]nodeupgrade.Outcome) {
		t.Helper()
		for inst, w := range want {
			if got[inst] != w {
				t.Errorf("%s: %q, want %q", inst, got[inst], w)
			}
		}
	}
	expect(tr.RollOut(ctx, "upgrade/pool-1", "test", affected), map[nodeupgrade.Instance]nodeupgrade.Outcome{a: nodeupgrade.Triggered, gone: nodeupgrade.Gone})
	stored, err := mz.MaterializeV1alpha1().Materializes(ns).Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.Annotations[nodeupgrade.ForceRolloutAnnotation]; got != "value-1" {
		t.Fatalf("force-rollout annotation %q", got)
	}
	raw, err := mz.MaterializeV1alpha1().RESTClient().Get().Namespace(ns).Resource("materializes").Name("a").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hash, err := conversion.V1RolloutHash(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Spec.RequestRollout != conversion.RolloutRequest(hash) || stored.Spec.RequestRollout == nodeupgradetest.Settled {
		t.Errorf("requestRollout %q is not the one the conversion derives from the new hash", stored.Spec.RequestRollout)
	}

	// Same scope: never again, even once the rollout completed and past
	// the cooldown.
	w.CompleteRollout(stored)
	now = now.Add(time.Hour)
	expect(tr.RollOut(ctx, "upgrade/pool-1", "test", affected), map[nodeupgrade.Instance]nodeupgrade.Outcome{a: nodeupgrade.AlreadyDone})
	// Another scope within the cooldown: no.
	now = now.Add(time.Hour)
	expect(tr.RollOut(ctx, "upgrade/pool-2", "test", map[nodeupgrade.Instance][]string{b: {"n2"}}), map[nodeupgrade.Instance]nodeupgrade.Outcome{b: nodeupgrade.Triggered})
	now = now.Add(30 * time.Second)
	expect(tr.RollOut(ctx, "upgrade/pool-3", "test", map[nodeupgrade.Instance][]string{b: {"n3"}}), map[nodeupgrade.Instance]nodeupgrade.Outcome{b: nodeupgrade.CoolingDown})
	// Past the cooldown, but b's rollout is still in progress.
	now = now.Add(time.Minute)
	expect(tr.RollOut(ctx, "upgrade/pool-3", "test", map[nodeupgrade.Instance][]string{b: {"n3"}}), map[nodeupgrade.Instance]nodeupgrade.Outcome{b: nodeupgrade.InProgress})
	// A forgotten scope triggers again.
	tr.Forget("upgrade/pool-1")
	expect(tr.RollOut(ctx, "upgrade/pool-1", "test", affected), map[nodeupgrade.Instance]nodeupgrade.Outcome{a: nodeupgrade.Triggered})
	if values != 3 {
		t.Errorf("%d force-rollout values drawn, want 3", values)
	}
	// Each decision counted under the scope's trigger ("upgrade").
	want := `
# HELP orchestratord_node_trigger_rollouts_total Decisions of the node triggers for a Materialize with pods on nodes going away, by trigger (gke-node-pool, node-removal) and outcome (triggered, already_triggered, cooling_down, in_progress, gone, deleting, failed).
# TYPE orchestratord_node_trigger_rollouts_total counter
orchestratord_node_trigger_rollouts_total{outcome="already_triggered",trigger="upgrade"} 1
orchestratord_node_trigger_rollouts_total{outcome="cooling_down",trigger="upgrade"} 1
orchestratord_node_trigger_rollouts_total{outcome="gone",trigger="upgrade"} 3
orchestratord_node_trigger_rollouts_total{outcome="in_progress",trigger="upgrade"} 1
orchestratord_node_trigger_rollouts_total{outcome="triggered",trigger="upgrade"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "orchestratord_node_trigger_rollouts_total"); err != nil {
		t.Error(err)
	}
}

// Nodes and Affected page through real lists.
func TestNodesAndAffectedPage(t *testing.T) {
	ctx := context.Background()
	w := nodeupgradetest.New(t, cp.Config)
	kube := w.Kube
	ns := w.Namespace("", "nodeupgrade-")
	const n = 1100 // more than two pages of 500
	for i := range n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("paging-%04d", i), Labels: map[string]string{"paging": "yes"}},
			Spec: corev1.NodeSpec{Unschedulable: i%2 == 0}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "paging=yes"})
	})
	tr := &nodeupgrade.Trigger{Kube: kube}
	nodes, err := tr.Nodes(ctx, "paging=yes", func(n *corev1.Node) bool { return n.Spec.Unschedulable })
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != n/2 || !nodes["paging-1098"] || nodes["paging-1099"] {
		t.Fatalf("%d cordoned nodes", len(nodes))
	}
	// The last pod of the last page is the affected one.
	for i := range 1001 {
		labels := map[string]string{"app.kubernetes.io/name": "clusterd", "materialize.cloud/organization-name": "x",
			"materialize.cloud/organization-namespace": ns}
		node := "paging-0001" // schedulable
		if i == 1000 {
			labels["materialize.cloud/organization-name"] = "last"
			node = "paging-1098"
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%04d", i), Labels: labels},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "c"}}}}
		if _, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	affected, err := tr.Affected(ctx, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(affected) != 1 || affected[nodeupgrade.Instance{Namespace: ns, Name: "last"}] == nil {
		t.Errorf("affected %v", affected)
	}
}

// With few nodes going away, only their pods are read, node by node: a
// tenant's pods labelled as environmentd's elsewhere (each up to 1.5 MiB)
// cost the scan nothing.
func TestAffectedReadsOnlyThePodsOfFewNodes(t *testing.T) {
	ctx := context.Background()
	w := nodeupgradetest.New(t, cp.Config)
	ns := w.Namespace("", "nodeupgrade-")
	labels := func(name string) map[string]string {
		return map[string]string{"app.kubernetes.io/name": "environmentd", "materialize.cloud/organization-name": name,
			"materialize.cloud/organization-namespace": ns}
	}
	pod := func(name, node string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels(name)},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "c"}}}}
		if _, err := w.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 120 {
		pod(fmt.Sprintf("elsewhere-%03d", i), "staying")
	}
	pod("moving-a", "going-a")
	pod("moving-b", "going-b")
	var mu sync.Mutex
	var lists []string
	cfg := rest.CopyConfig(cp.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, "/pods") {
				mu.Lock()
				lists = append(lists, r.URL.Query().Get("fieldSelector"))
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	}
	tr := &nodeupgrade.Trigger{Kube: kubernetes.NewForConfigOrDie(cfg)}
	affected, err := tr.Affected(ctx, map[string]bool{"going-a": true, "going-b": true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[nodeupgrade.Instance][]string{{Namespace: ns, Name: "moving-a"}: {"going-a"}, {Namespace: ns, Name: "moving-b"}: {"going-b"}}
	if fmt.Sprint(affected) != fmt.Sprint(want) {
		t.Errorf("affected %v, want %v", affected, want)
	}
	if fmt.Sprint(lists) != "[spec.nodeName=going-a spec.nodeName=going-b]" {
		t.Errorf("pod lists %q, want one for each node going away", lists)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A new leader of the materialize Lease (a new Trigger, its memory empty)
// reads what the previous one triggered from the Materialize: no second
// rollout in that scope, none within the cooldown, and one in a new scope
// after it. So does a leader that leads again after another did.
func TestTriggersSurviveAFailover(t *testing.T) {
	ctx := context.Background()
	w := nodeupgradetest.New(t, cp.Config)
	ns := w.Namespace("", "nodeupgrade-failover-")
	w.Materialize(ns, "a")
	a := nodeupgrade.Instance{Namespace: ns, Name: "a"}
	affected := map[nodeupgrade.Instance][]string{a: {"n1"}}
	now := time.Date(2026, 7, 22, 0, 0, 0, 0, time.UTC)
	values := 0
	newTrigger := func() *nodeupgrade.Trigger {
		return &nodeupgrade.Trigger{Kube: w.Kube, MZ: w.MZ, Cooldown: time.Minute, Now: func() time.Time { return now },
			NewValue: func() string { values++; return fmt.Sprintf("value-%d", values) }}
	}
	first := newTrigger()
	if got := first.RollOut(ctx, "upgrade/pool-1", "test", affected)[a]; got != nodeupgrade.Triggered {
		t.Fatalf("first leader: %q", got)
	}
	stored, err := w.MZ.MaterializeV1alpha1().Materializes(ns).Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.CompleteRollout(stored)

	now = now.Add(10 * time.Second)
	next := newTrigger()
	if got := next.RollOut(ctx, "upgrade/pool-1", "test", affected)[a]; got != nodeupgrade.AlreadyDone {
		t.Errorf("the next leader, same scope: %q, want %q", got, nodeupgrade.AlreadyDone)
	}
	if got := next.RollOut(ctx, "upgrade/pool-2", "test", affected)[a]; got != nodeupgrade.CoolingDown {
		t.Errorf("the next leader, another scope within the cooldown: %q, want %q", got, nodeupgrade.CoolingDown)
	}
	now = now.Add(time.Minute)
	if got := next.RollOut(ctx, "upgrade/pool-2", "test", affected)[a]; got != nodeupgrade.Triggered {
		t.Errorf("the next leader, another scope past the cooldown: %q, want %q", got, nodeupgrade.Triggered)
	}
	stored, err = w.MZ.MaterializeV1alpha1().Materializes(ns).Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.CompleteRollout(stored)
	// The first leader leads again: what the second did is not in its
	// memory, and it holds all the same.
	now = now.Add(10 * time.Second)
	if got := first.RollOut(ctx, "upgrade/pool-2", "test", affected)[a]; got != nodeupgrade.AlreadyDone {
		t.Errorf("the first leader again, the second's scope: %q, want %q", got, nodeupgrade.AlreadyDone)
	}
	if got := first.RollOut(ctx, "upgrade/pool-3", "test", affected)[a]; got != nodeupgrade.CoolingDown {
		t.Errorf("the first leader again, within the second's cooldown: %q, want %q", got, nodeupgrade.CoolingDown)
	}
	if values != 2 {
		t.Errorf("%d rollouts requested, want 2", values)
	}
}
