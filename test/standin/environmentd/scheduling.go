package environmentd

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/standin/clap"
)

// schedulingConfig is environmentd's cluster scheduling system parameters
// (upstream src/sql/src/session/vars/definitions.rs, cluster_scheduling,
// with the defaults of src/orchestrator/src/lib.rs).
type schedulingConfig struct {
	softenAntiAffinity       bool  // cluster_soften_replication_anti_affinity
	softenAntiAffinityWeight int32 // cluster_soften_replication_anti_affinity_weight
	azAffinityWeight         *int32
	topologySpread           bool // cluster_enable_topology_spread
	spreadIgnoreNonSingular  bool // cluster_topology_spread_ignore_non_singular_scale
	spreadMaxSkew            int32
	spreadSoft               bool // cluster_topology_spread_soft
	spreadMinDomains         *int32
	// generationSelectors: the selectors name the replica's generation
	// (from 26.27; before, replicas of every generation count).
	generationSelectors bool
	// softSpreadDropsMinDomains: from 26.23 (upstream #36310).
	softSpreadDropsMinDomains bool
}

// softSpreadMinDomainsVersion is the first environmentd that leaves
// minDomains out of a soft spread.
var softSpreadMinDomainsVersion = imageref.MustParseVersion("26.23.0-dev.0")

// generationSelectorVersion is the first environmentd whose scheduling
// selectors name the generation (upstream #36730).
var generationSelectorVersion = imageref.MustParseVersion("26.27.0-dev.0")

// schedulingConfigOf reads them from the --system-parameter-default
// values of environmentd at version.
func schedulingConfigOf(m *clap.Matches, version imageref.Version) (schedulingConfig, error) {
	azWeight := int32(100)
	c := schedulingConfig{softenAntiAffinityWeight: 100, azAffinityWeight: &azWeight,
		topologySpread: true, spreadIgnoreNonSingular: true, spreadMaxSkew: 1,
		generationSelectors:       version.AtLeast(generationSelectorVersion),
		softSpreadDropsMinDomains: version.AtLeast(softSpreadMinDomainsVersion)}
	return c, readParams(m,
		boolParam("cluster_soften_replication_anti_affinity", &c.softenAntiAffinity),
		int32Param("cluster_soften_replication_anti_affinity_weight", &c.softenAntiAffinityWeight),
		optionalInt32Param("cluster_multi_process_replica_az_affinity_weight", &c.azAffinityWeight),
		boolParam("cluster_enable_topology_spread", &c.topologySpread),
		boolParam("cluster_topology_spread_ignore_non_singular_scale", &c.spreadIgnoreNonSingular),
		int32Param("cluster_topology_spread_max_skew", &c.spreadMaxSkew),
		optionalInt32Param("cluster_topology_spread_min_domains", &c.spreadMinDomains),
		boolParam("cluster_topology_spread_soft", &c.spreadSoft))
}

// scheduling is a clusterd pod's affinity and topology spread as
// upstream's orchestrator sets them (ensure_service): never two replicas
// of one cluster and generation on one node (a node's loss would take
// both), a replica's processes in one zone, single-process replicas of a
// cluster spread across zones (a hard constraint: a node without a zone
// label takes none, which is why the operator turns it off outside the
// clouds), and --orchestrator-kubernetes-service-affinity merged over
// them. selector is the replica's own pod selector.
func (o *Orchestrator) scheduling(r Replica, gen uint64, scale uint16, selector map[string]string) (*corev1.Affinity, []corev1.TopologySpreadConstraint, error) {
	cfg, err := schedulingConfigOf(o.Args, o.Version)
	if err != nil {
		return nil, nil, err
	}
	generation := strconv.FormatUint(gen, 10)
	in := func(key string, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: replicaLabelPrefix + key, Operator: metav1.LabelSelectorOpIn, Values: values}
	}
	others := []metav1.LabelSelectorRequirement{in("cluster-id", r.ClusterID),
		{Key: replicaLabelPrefix + "replica-id", Operator: metav1.LabelSelectorOpNotIn, Values: []string{r.ReplicaID}}}
	replicas := []metav1.LabelSelectorRequirement{in("cluster-id", r.ClusterID)}
	if cfg.generationSelectors {
		others = append(others, in("generation", generation))
		replicas = append(replicas, in("generation", generation))
	}
	otherReplicas := corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
		LabelSelector: &metav1.LabelSelector{MatchExpressions: others}}
	affinity := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
	if cfg.softenAntiAffinity {
		affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{
			{Weight: cfg.softenAntiAffinityWeight, PodAffinityTerm: otherReplicas}}
	} else {
		affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = []corev1.PodAffinityTerm{otherReplicas}
	}
	if cfg.azAffinityWeight != nil {
		affinity.PodAffinity = &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: *cfg.azAffinityWeight,
			PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "topology.kubernetes.io/zone",
				LabelSelector: &metav1.LabelSelector{MatchLabels: selector}}}}}
	}
	var spread []corev1.TopologySpreadConstraint
	if cfg.topologySpread && (!cfg.spreadIgnoreNonSingular || scale == 1) {
		if cfg.spreadIgnoreNonSingular {
			replicas = append(replicas, in("scale", "1"))
		}
		when := corev1.DoNotSchedule
		if cfg.spreadSoft {
			when = corev1.ScheduleAnyway
		}
		spread = []corev1.TopologySpreadConstraint{{MaxSkew: cfg.spreadMaxSkew, TopologyKey: "topology.kubernetes.io/zone",
			WhenUnsatisfiable: when, LabelSelector: &metav1.LabelSelector{MatchExpressions: replicas}}}
		// Kubernetes refuses minDomains with ScheduleAnyway, which
		// environmentd leaves it out of from 26.23 (before, the API server
		// refused the replica). Upstream leaves it out for a replica pinned
		// to availability zones too; the stand-in's replicas name none.
		if !cfg.spreadSoft || !cfg.softSpreadDropsMinDomains {
			spread[0].MinDomains = cfg.spreadMinDomains
		}
	}
	if raw, ok := o.Args.Get("orchestrator-kubernetes-service-affinity"); ok {
		// Keys as k8s-openapi reads them: case-sensitive (Go's own decoder
		// would take "NodeAffinity", which environmentd ignores).
		var extra corev1.Affinity
		if err := utiljson.Unmarshal([]byte(raw), &extra); err != nil {
			return nil, nil, fmt.Errorf("--orchestrator-kubernetes-service-affinity: %w", err)
		}
		mergeAffinity(affinity, extra)
	}
	return affinity, spread, nil
}

// mergeAffinity is k8s-openapi's DeepMerge of an Affinity, which upstream
// uses: a field over sets it, and its lists replace the base's whole.
func mergeAffinity(base *corev1.Affinity, over corev1.Affinity) {
	if n := over.NodeAffinity; n != nil {
		if base.NodeAffinity == nil {
			base.NodeAffinity = &corev1.NodeAffinity{}
		}
		if n.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			base.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = n.RequiredDuringSchedulingIgnoredDuringExecution
		}
		replaceList(&base.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, n.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if p := over.PodAffinity; p != nil {
		if base.PodAffinity == nil {
			base.PodAffinity = &corev1.PodAffinity{}
		}
		replaceList(&base.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, p.RequiredDuringSchedulingIgnoredDuringExecution)
		replaceList(&base.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, p.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if p := over.PodAntiAffinity; p != nil {
		if base.PodAntiAffinity == nil {
			base.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		replaceList(&base.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, p.RequiredDuringSchedulingIgnoredDuringExecution)
		replaceList(&base.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, p.PreferredDuringSchedulingIgnoredDuringExecution)
	}
}

// replaceList is k8s-openapi's atomic list merge: a list given (even
// empty) replaces the base's.
func replaceList[T any](base *[]T, over []T) {
	if over != nil {
		*base = over
	}
}
