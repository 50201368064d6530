package environmentd

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/materializeinc/orchestratord/test/standin/clap"
)

// clusterdPodSpec is the pod template of the StatefulSet environmentd
// applies for replica u1 of cluster u1 (size "small", or "two" of two
// processes) at generation 2, with the extra arguments given.
func clusterdPodSpec(t *testing.T, size string, args map[string][]string) (corev1.PodTemplateSpec, error) {
	t.Helper()
	values := map[string][]string{
		"cluster-replica-sizes": {`{"small":{"scale":1,"workers":1,"credits_per_hour":"1","disk_limit":"0","memory_limit":"64MiB"},` +
			`"two":{"scale":2,"workers":1,"credits_per_hour":"1","disk_limit":"0","memory_limit":"64MiB"}}`},
		"clusterd-image": {"materialize/clusterd:v26.35.0"},
	}
	for k, v := range args {
		values[k] = v
	}
	kube := fake.NewClientset()
	o := &Orchestrator{Kube: kube, Namespace: "ns", Prefix: "mzx-", Args: &clap.Matches{Values: values}}
	r := Replica{ClusterID: "u1", ClusterName: "quickstart", ReplicaID: "u1", ReplicaName: "r1", Size: size, Role: "user"}
	if err := o.EnsureReplica(context.Background(), r, 2); err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	sts, err := kube.AppsV1().StatefulSets("ns").Get(context.Background(), "mzx-cluster-u1-replica-u1-gen-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sts.Spec.Template, nil
}

// clusterd's scheduling as upstream's orchestrator sets it: two replicas
// of a cluster never on one node, a replica's processes in one zone,
// single-process replicas spread across zones (a hard constraint unless
// the operator turns it off, which it does outside the clouds), each
// following environmentd's system parameters, and the operator's
// --orchestrator-kubernetes-service-affinity merged over them.
func TestClusterdSchedulingIsEnvironmentds(t *testing.T) {
	sel := func(exprs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: exprs}
	}
	in := func(k, v string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: "cluster.environmentd.materialize.cloud/" + k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}}
	}
	otherReplicas := corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: sel(in("cluster-id", "u1"),
		metav1.LabelSelectorRequirement{Key: "cluster.environmentd.materialize.cloud/replica-id", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"u1"}},
		in("generation", "2"))}

	pod, err := clusterdPodSpec(t, "small", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := pod.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil || !reflect.DeepEqual(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, []corev1.PodAffinityTerm{otherReplicas}) {
		t.Errorf("anti-affinity %+v, want other replicas of the cluster and generation off this node", a)
	}
	if a == nil || a.PodAffinity == nil || len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight != 100 ||
		a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != "topology.kubernetes.io/zone" ||
		a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector.MatchLabels["environmentd.materialize.cloud/service-id"] != "u1-replica-u1-gen-2" {
		t.Errorf("pod affinity %+v, want the replica's processes in one zone (weight 100)", a)
	}
	wantSpread := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: sel(in("cluster-id", "u1"), in("generation", "2"), in("scale", "1"))}}
	if !reflect.DeepEqual(pod.Spec.TopologySpreadConstraints, wantSpread) {
		t.Errorf("topology spread %+v, want %+v", pod.Spec.TopologySpreadConstraints, wantSpread)
	}
	if _, ok := pod.Annotations["prometheus.io/scrape"]; ok {
		t.Error("scrape annotations without the flag")
	}

	// A replica of two processes is not spread (cluster_topology_spread_ignore_non_singular_scale).
	if pod, err := clusterdPodSpec(t, "two", nil); err != nil || pod.Spec.TopologySpreadConstraints != nil {
		t.Errorf("two processes: spread %+v (%v)", pod.Spec.TopologySpreadConstraints, err)
	}

	// The system parameters; the operator sets the first outside the clouds.
	pod, err = clusterdPodSpec(t, "small", map[string][]string{
		"system-parameter-default": {"cluster_enable_topology_spread=false", "cluster_soften_replication_anti_affinity=true",
			"cluster_soften_replication_anti_affinity_weight=7", "cluster_multi_process_replica_az_affinity_weight="},
		"orchestrator-kubernetes-enable-prometheus-scrape-annotations": {"true"}})
	if err != nil {
		t.Fatal(err)
	}
	a = pod.Spec.Affinity
	if pod.Spec.TopologySpreadConstraints != nil || a.PodAffinity != nil || a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil ||
		!reflect.DeepEqual(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, []corev1.WeightedPodAffinityTerm{{Weight: 7, PodAffinityTerm: otherReplicas}}) {
		t.Errorf("with the parameters: affinity %+v, spread %+v", a, pod.Spec.TopologySpreadConstraints)
	}
	if got := pod.Annotations["prometheus.io/port"]; pod.Annotations["prometheus.io/scrape"] != "true" || got != "6878" {
		t.Errorf("scrape annotations %v", pod.Annotations)
	}

	// The operator's affinity: its fields replace environmentd's lists
	// and leave the others.
	pod, err = clusterdPodSpec(t, "small", map[string][]string{"orchestrator-kubernetes-service-affinity": {
		`{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["mz"]}]}]}},` +
			`"podAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[]}}`}})
	if err != nil {
		t.Fatal(err)
	}
	a = pod.Spec.Affinity
	if a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key != "pool" ||
		len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 0 ||
		!reflect.DeepEqual(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, []corev1.PodAffinityTerm{otherReplicas}) {
		t.Errorf("merged affinity %+v", a)
	}

	// What environmentd cannot parse creates no replica.
	for _, args := range []map[string][]string{
		{"orchestrator-kubernetes-service-affinity": {`{"nodeAffinity":[]}`}},
		{"system-parameter-default": {"cluster_topology_spread_max_skew=one"}},
	} {
		if _, err := clusterdPodSpec(t, "small", args); err == nil || !strings.Contains(err.Error(), "affinity") && !strings.Contains(err.Error(), "max_skew") {
			t.Errorf("%v: %v", args, err)
		}
	}
}
