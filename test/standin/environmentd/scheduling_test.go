package environmentd

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/standin/clap"
)

// clusterdPodSpec is the pod template of the StatefulSet environmentd
// applies for replica u1 of cluster u1 at generation 2, with the extra
// arguments given. Sizes: "small", "two" (two processes), "disk" (2 GiB of
// disk), "unsized" (no disk_limit).
func clusterdPodSpec(t *testing.T, size string, args map[string][]string) (corev1.PodTemplateSpec, error) {
	t.Helper()
	return clusterdPodSpecAt(t, "26.35.0", size, args)
}

func clusterdPodSpecAt(t *testing.T, version, size string, args map[string][]string) (corev1.PodTemplateSpec, error) {
	t.Helper()
	values := map[string][]string{
		"cluster-replica-sizes": {`{"small":{"scale":1,"workers":1,"credits_per_hour":"1","disk_limit":"0","memory_limit":"64MiB"},` +
			`"two":{"scale":2,"workers":1,"credits_per_hour":"1","disk_limit":"0","memory_limit":"64MiB"},` +
			`"disk":{"scale":1,"workers":1,"credits_per_hour":"1","disk_limit":"2GiB","memory_limit":"64MiB"},` +
			`"unsized":{"scale":1,"workers":1,"credits_per_hour":"1","memory_limit":"64MiB"}}`},
		"clusterd-image": {"materialize/clusterd:v26.35.0"},
	}
	for k, v := range args {
		values[k] = v
	}
	kube := fake.NewClientset()
	o := &Orchestrator{Kube: kube, Namespace: "ns", Prefix: "mzx-", Args: &clap.Matches{Values: values}, Version: imageref.MustParseVersion(version)}
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
	// Unless told to spread those too; a hard spread takes
	// cluster_topology_spread_min_domains, a soft one cannot.
	pod, err = clusterdPodSpec(t, "two", map[string][]string{"system-parameter-default": {
		"cluster_topology_spread_ignore_non_singular_scale=off", "cluster_topology_spread_min_domains=3", "cluster_topology_spread_max_skew=2"}})
	if err != nil {
		t.Fatal(err)
	}
	wantWide := []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
		MinDomains: ptrTo[int32](3), LabelSelector: sel(in("cluster-id", "u1"), in("generation", "2"))}}
	if !reflect.DeepEqual(pod.Spec.TopologySpreadConstraints, wantWide) {
		t.Errorf("every replica spread: %+v, want %+v", pod.Spec.TopologySpreadConstraints, wantWide)
	}
	pod, err = clusterdPodSpec(t, "small", map[string][]string{"system-parameter-default": {"cluster_topology_spread_soft=t", "cluster_topology_spread_min_domains=3"}})
	if got := pod.Spec.TopologySpreadConstraints; err != nil || len(got) != 1 || got[0].WhenUnsatisfiable != corev1.ScheduleAnyway || got[0].MinDomains != nil {
		t.Errorf("a soft spread: %+v (%v)", got, err)
	}
	// Before 26.23 a soft spread kept minDomains (which a real API server
	// refuses, and the replica is not created).
	pod, err = clusterdPodSpecAt(t, "26.22.0", "small", map[string][]string{"system-parameter-default": {"cluster_topology_spread_soft=t", "cluster_topology_spread_min_domains=3"}})
	if got := pod.Spec.TopologySpreadConstraints; err != nil || len(got) != 1 || got[0].MinDomains == nil || *got[0].MinDomains != 3 {
		t.Errorf("26.22, a soft spread: %+v (%v), want minDomains kept", got, err)
	}
	// Before 26.27 the selectors count every generation's replicas, and
	// the pods carry no generation label.
	pod, err = clusterdPodSpecAt(t, "26.26.0", "small", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchExpressions; len(got) != 2 {
		t.Errorf("26.26 anti-affinity selects %+v, want the cluster's other replicas of every generation", got)
	}
	if got := pod.Spec.TopologySpreadConstraints[0].LabelSelector.MatchExpressions; !reflect.DeepEqual(got, []metav1.LabelSelectorRequirement{in("cluster-id", "u1"), in("scale", "1")}) {
		t.Errorf("26.26 spread selects %+v", got)
	}
	if _, ok := pod.Labels["cluster.environmentd.materialize.cloud/generation"]; ok {
		t.Errorf("26.26 pod labels %v carry the generation", pod.Labels)
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

	// Keys are case-sensitive, as k8s-openapi reads them: one that differs
	// in case is an unknown field, ignored.
	pod, err = clusterdPodSpec(t, "small", map[string][]string{"orchestrator-kubernetes-service-affinity": {
		`{"NodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["mz"]}]}]}}}`}})
	if err != nil || pod.Spec.Affinity.NodeAffinity != nil {
		t.Errorf("a miscased key: node affinity %+v (%v), want none", pod.Spec.Affinity.NodeAffinity, err)
	}

	// An affinity environmentd cannot parse creates no replica. (A
	// scheduling parameter it cannot parse fails its boot:
	// TestSystemParametersAreEnvironmentds.)
	if _, err := clusterdPodSpec(t, "small", map[string][]string{"orchestrator-kubernetes-service-affinity": {`{"nodeAffinity":[]}`}}); err == nil ||
		!strings.Contains(err.Error(), "--orchestrator-kubernetes-service-affinity") {
		t.Errorf("an affinity that does not parse: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// A size with disk gets upstream's scratch disk: a generic ephemeral
// volume of the operator's class and the size's disk_limit (1 GiB without
// one), mounted where --scratch-directory points; without a class no
// replica is created.
func TestClusterdScratchDiskIsAnEphemeralVolume(t *testing.T) {
	class := map[string][]string{"orchestrator-kubernetes-ephemeral-volume-class": {"local-ssd"}}
	// Upstream writes the bytes, as a plain number.
	for size, want := range map[string]string{"disk": "2147483648", "unsized": "1073741824"} {
		pod, err := clusterdPodSpec(t, size, class)
		if err != nil {
			t.Fatal(err)
		}
		spec := pod.Spec
		if len(spec.Volumes) != 1 || spec.Volumes[0].Name != "scratch" || spec.Volumes[0].Ephemeral == nil {
			t.Fatalf("%s: volumes %+v, want the scratch ephemeral volume", size, spec.Volumes)
		}
		claim := spec.Volumes[0].Ephemeral.VolumeClaimTemplate.Spec
		if got := claim.Resources.Requests[corev1.ResourceStorage]; claim.StorageClassName == nil || *claim.StorageClassName != "local-ssd" ||
			got.String() != want || len(claim.AccessModes) != 1 || claim.AccessModes[0] != corev1.ReadWriteOnce {
			t.Errorf("%s: claim %+v, want %s of local-ssd, ReadWriteOnce", size, claim, want)
		}
		c := spec.Containers[0]
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/scratch" || !slices.Contains(c.Args, "--scratch-directory=/scratch") {
			t.Errorf("%s: mounts %+v, args %q", size, c.VolumeMounts, c.Args)
		}
		if spec.NodeSelector["materialize.cloud/disk"] != "true" {
			t.Errorf("%s: node selector %v", size, spec.NodeSelector)
		}
	}
	pod, err := clusterdPodSpec(t, "small", class)
	if err != nil || len(pod.Spec.Volumes) != 0 || len(pod.Spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("disk_limit 0: volumes %+v (%v)", pod.Spec.Volumes, err)
	}
	if _, err := clusterdPodSpec(t, "disk", nil); err == nil || !strings.Contains(err.Error(), "no ephemeral volume storage class") {
		t.Errorf("disk without a class: %v", err)
	}
}
