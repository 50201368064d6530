package chart

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/controllers/app"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade/gke"
)

const nodeUpgradeValues = "cloudProvider.providers.gcp.nodeUpgradeRolloutTrigger."

// gcpNodeUpgradeFlags are the flags upstream's deployment.yaml renders for
// testdata/upstream-gcp-node-upgrade.yaml, in its order.
var gcpNodeUpgradeFlags = []string{
	"--enable-gcp-node-upgrade-rollout-trigger",
	"--gcp-node-upgrade-notification-subscription=projects/my-project/subscriptions/gke-cluster-notifications",
	"--gcp-cluster-name=my-cluster",
	"--gcp-cluster-location=us-central1",
	"--gcp-node-upgrade-watched-node-pool=materialize",
	"--gcp-node-upgrade-watched-node-pool=system",
}

func nodeUpgradeFlagsIn(args []string) []string {
	var out []string
	for _, a := range args {
		if strings.HasPrefix(a, "--enable-gcp-node-upgrade") || strings.HasPrefix(a, "--gcp-") {
			out = append(out, a)
		}
	}
	return out
}

// The values of upstream's node upgrade rollout trigger carry over (their
// file, operator.cloudProvider moved to the top level) and render upstream's
// flags, which the controllers accept; nodes and pods are listed cluster
// wide only then.
func TestGCPNodeUpgradeValuesCarryOver(t *testing.T) {
	objs := renderValues(t, "-f", "testdata/upstream-gcp-node-upgrade.yaml")
	args := containerArgs(t, component(t, objs, "controllers"))
	if got := nodeUpgradeFlagsIn(args); !reflect.DeepEqual(got, gcpNodeUpgradeFlags) {
		t.Errorf("flags:\n got %q\nwant %q", got, gcpNodeUpgradeFlags)
	}
	if err := app.NewCommand().ParseFlags(args); err != nil {
		t.Errorf("the controllers refuse the flags: %v", err)
	}
	if oneFlag(t, args, "cloud-provider") != "gcp" {
		t.Error("not the gcp cloud provider")
	}
	grants := grantsTo(t, objs, "ops", "orchestratord-controllers")
	for _, g := range []string{"|nodes|list", "|pods|list"} {
		if !grants[g] {
			t.Errorf("enabled, the controllers are not granted %s cluster wide", g)
		}
	}
	if cr := find(objs, "ClusterRole", "orchestratord-controllers-node-upgrades"); cr == nil {
		t.Error("no node-upgrades ClusterRole")
	}

	// Off by default: no flag, no grant on nodes; pods only listed (a
	// rollout that waits reads its own pods) or where the crash failover's
	// Role allows them.
	objs = renderValues(t)
	if got := nodeUpgradeFlagsIn(containerArgs(t, component(t, objs, "controllers"))); len(got) != 0 {
		t.Errorf("default values render %q", got)
	}
	if find(objs, "ClusterRole", "orchestratord-controllers-node-upgrades") != nil {
		t.Error("default values grant the node upgrade trigger's reads")
	}
	for _, o := range ofKind(objs, "ClusterRole") {
		if strings.Contains(o.GetName(), "environmentd") {
			continue // environmentd's, which the controllers bind and do not hold
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			res, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
			verbs, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "verbs")
			waitingRead := o.GetName() == "orchestratord-controllers" && slices.Equal(res, []string{"pods"}) && slices.Equal(verbs, []string{"list"})
			if slices.Contains(res, "nodes") || (slices.Contains(res, "pods") && !waitingRead) {
				t.Errorf("ClusterRole %s grants nodes or pods by default: %v", o.GetName(), r)
			}
		}
	}

	// As upstream's template: only with the gcp provider.
	objs = renderValues(t, "-f", "testdata/upstream-gcp-node-upgrade.yaml", "--set-string", "cloudProvider.type=aws,cloudProvider.providers.aws.accountID=123456789012")
	if got := nodeUpgradeFlagsIn(containerArgs(t, component(t, objs, "controllers"))); len(got) != 0 {
		t.Errorf("type aws renders %q", got)
	}
	if find(objs, "ClusterRole", "orchestratord-controllers-node-upgrades") != nil {
		t.Error("type aws grants the node upgrade trigger's reads")
	}

	// No watched pools: every pool, no flag.
	args = controllersArgs(t, "-f", "testdata/upstream-gcp-node-upgrade.yaml", "--set", nodeUpgradeValues+"watchedNodePools=null")
	if got := nodeUpgradeFlagsIn(args); !reflect.DeepEqual(got, gcpNodeUpgradeFlags[:4]) {
		t.Errorf("no watched pools: %q", got)
	}
}

// Enabled, each required value is required with upstream's message; the
// schema refuses a subscription not in upstream's form, a pool name that is
// no label value, and keys upstream does not have.
func TestGCPNodeUpgradeValuesRequired(t *testing.T) {
	for _, key := range []string{"notificationSubscription", "clusterName", "clusterLocation"} {
		out := renderFails(t, "-f", "testdata/upstream-gcp-node-upgrade.yaml", "--set", nodeUpgradeValues+key+"=")
		if want := "nodeUpgradeRolloutTrigger." + key + " is required when nodeUpgradeRolloutTrigger is enabled"; !strings.Contains(out, want) {
			t.Errorf("%s empty: %q not in\n%s", key, want, out)
		}
	}
	for bad, field := range map[string]string{
		nodeUpgradeValues + "notificationSubscription=my-sub": "notificationSubscription",
		nodeUpgradeValues + "watchedNodePools[0]=a b":         "watchedNodePools",
		nodeUpgradeValues + "enable=true":                     "enable",
		nodeUpgradeValues + "enabled=yes":                     "enabled",
	} {
		out := renderFails(t, "-f", "testdata/upstream-gcp-node-upgrade.yaml", "--set-string", bad)
		if !strings.Contains(out, field) {
			t.Errorf("--set %s: the error does not name %s:\n%s", bad, field, out)
		}
	}
}

// The chart's RBAC for the trigger, applied to a real API server, is
// enough for what it does as the controllers' ServiceAccount: list a pool's
// nodes and the data-plane pods cluster wide, read a Materialize and patch
// it.
func TestGCPNodeUpgradeRBACIsEnough(t *testing.T) {
	const release, tenant = "nodeupg", "nodeupg-tenant"
	ctx := context.Background()
	restrictedNamespace(t, release)
	objs := renderRelease(t, release, release, "-f", "testdata/upstream-gcp-node-upgrade.yaml")
	var rbac []*unstructured.Unstructured
	for _, o := range objs {
		if slices.Contains(rbacKinds, o.GetKind()) || o.GetKind() == "ServiceAccount" {
			rbac = append(rbac, o)
		}
	}
	applyAll(t, rbac)
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	adminMZ := versioned.NewForConfigOrDie(cp.Config)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts(tenant).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nodeupg-blue-1", Labels: map[string]string{gke.NodePoolLabel: "nodeupg-pool"}},
		Spec: corev1.NodeSpec{Unschedulable: true}}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}) })
	const request = "0b8f0e6f-6f35-4e8c-9d7e-2a3a3c4c1f10"
	m, err := adminMZ.MaterializeV1alpha1().Materializes(tenant).Create(ctx, &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "mz"},
		Spec:       v1alpha1.MaterializeSpec{EnvironmentdImageRef: "materialize/environmentd:v26.1.0", BackendSecretName: "backend", RequestRollout: request},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Status.LastCompletedRolloutRequest = request
	if _, err := adminMZ.MaterializeV1alpha1().Materializes(tenant).UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Pods(tenant).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "environmentd-1-0", Labels: map[string]string{"app.kubernetes.io/name": "environmentd",
			"materialize.cloud/organization-name": "mz", "materialize.cloud/organization-namespace": tenant}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "environmentd", Image: "environmentd"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", serviceAccountKubeconfig(t, release, podServiceAccount(component(t, objs, "controllers"))))
	if err != nil {
		t.Fatal(err)
	}
	tr := &nodeupgrade.Trigger{Kube: kubernetes.NewForConfigOrDie(cfg), MZ: versioned.NewForConfigOrDie(cfg)}
	nodes, err := tr.Nodes(ctx, gke.NodePoolLabel+"=nodeupg-pool", func(n *corev1.Node) bool { return n.Spec.Unschedulable })
	if err != nil {
		t.Fatalf("listing nodes with the chart's RBAC: %v", err)
	}
	affected, err := tr.Affected(ctx, nodes)
	if err != nil {
		t.Fatalf("listing pods with the chart's RBAC: %v", err)
	}
	inst := nodeupgrade.Instance{Namespace: tenant, Name: "mz"}
	if got := tr.RollOut(ctx, "test", "test", affected)[inst]; got != nodeupgrade.Triggered {
		t.Fatalf("rollout with the chart's RBAC: %q (affected %v)", got, affected)
	}
	live, err := adminMZ.MaterializeV1alpha1().Materializes(tenant).Get(ctx, "mz", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if live.Annotations[nodeupgrade.ForceRolloutAnnotation] == "" || live.Spec.RequestRollout == request {
		t.Errorf("not rolled out: %v %s", live.Annotations, live.Spec.RequestRollout)
	}
}

// controllers.nodeRemovalRolloutTrigger renders its flag and the same
// cluster-wide reads, on any cloud provider.
func TestNodeRemovalRolloutTriggerValue(t *testing.T) {
	objs := renderValues(t, "--set", "controllers.nodeRemovalRolloutTrigger=true")
	args := containerArgs(t, component(t, objs, "controllers"))
	if !hasFlag(args, "node-removal-rollout-trigger") || len(nodeUpgradeFlagsIn(args)) != 0 {
		t.Errorf("flags %q", args)
	}
	if err := app.NewCommand().ParseFlags(args); err != nil {
		t.Errorf("the controllers refuse the flags: %v", err)
	}
	if find(objs, "ClusterRole", "orchestratord-controllers-node-upgrades") == nil {
		t.Error("no node-upgrades ClusterRole")
	}
	if hasFlag(controllersArgs(t), "node-removal-rollout-trigger") {
		t.Error("on by default")
	}
	if out := renderFails(t, "--set-string", "controllers.nodeRemovalRolloutTrigger=yes"); !strings.Contains(out, "nodeRemovalRolloutTrigger") {
		t.Errorf("a string accepted:\n%s", out)
	}
}
