package environmentd

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/standin/clap"
)

// fieldManager is environmentd's (src/orchestrator-kubernetes/src/lib.rs).
const fieldManager = "environmentd"

// Labels of environmentd's Kubernetes orchestrator.
const (
	namespaceLabel = "environmentd.materialize.cloud/namespace"
	serviceIDLabel = "environmentd.materialize.cloud/service-id"
	// replicaLabelPrefix is make_label_key for the "cluster" namespace.
	replicaLabelPrefix = "cluster.environmentd.materialize.cloud/"
	// orchestratorNamespace is the controller's orchestrator namespace.
	orchestratorNamespace = "cluster"
)

// Replica is a bootstrap cluster replica environmentd runs as clusterd.
type Replica struct {
	ClusterID, ClusterName, ReplicaID, ReplicaName, Size, Role string
}

// ServiceID is the orchestrator's id of the replica's service in a
// generation: {cluster}-replica-{replica}-gen-{generation}.
func (r Replica) ServiceID(gen uint64) string {
	return fmt.Sprintf("%s-replica-%s-gen-%d", r.ClusterID, r.ReplicaID, gen)
}

// builtinClusters are the builtin clusters in creation order (upstream
// src/catalog/src/builtin.rs), with the flags that size them and their
// replica role.
var builtinClusters = []struct{ name, flag, role string }{
	{"mz_system", "system", "system-critical"},
	{"mz_catalog_server", "catalog-server", "system"},
	{"mz_probe", "probe", "user"},
	{"mz_support", "support", "user"},
	{"mz_analytics", "analytics", "user"},
}

// BootstrapReplicas are the replicas a fresh catalog gets from the
// bootstrap flags: builtin clusters s1..s5 whose replicas r1..rN take system
// replica ids in cluster order, and the default cluster quickstart (u1)
// whose replicas take user ids.
func BootstrapReplicas(m *clap.Matches) ([]Replica, error) {
	var out []Replica
	next := 1
	for i, c := range builtinClusters {
		factor, err := replicationFactor(m, "bootstrap-builtin-"+c.flag+"-cluster-replication-factor")
		if err != nil {
			return nil, err
		}
		size, _ := m.Get("bootstrap-builtin-" + c.flag + "-cluster-replica-size")
		for r := range factor {
			out = append(out, Replica{ClusterID: fmt.Sprintf("s%d", i+1), ClusterName: c.name,
				ReplicaID: fmt.Sprintf("s%d", next), ReplicaName: fmt.Sprintf("r%d", r+1), Size: size, Role: c.role})
			next++
		}
	}
	factor, err := replicationFactor(m, "bootstrap-default-cluster-replication-factor")
	if err != nil {
		return nil, err
	}
	size, _ := m.Get("bootstrap-default-cluster-replica-size")
	for r := range factor {
		out = append(out, Replica{ClusterID: "u1", ClusterName: "quickstart",
			ReplicaID: fmt.Sprintf("u%d", r+1), ReplicaName: fmt.Sprintf("r%d", r+1), Size: size, Role: "user"})
	}
	return out, nil
}

func replicationFactor(m *clap.Matches, flag string) (int, error) {
	v, _ := m.Get(flag)
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n > 2 {
		return 0, fmt.Errorf("--%s: %q is not in 0..=2", flag, v)
	}
	return int(n), nil
}

// replicaSize is the part of a --cluster-replica-sizes entry the
// orchestrator reads.
type replicaSize struct {
	Scale       uint16            `json:"scale"`
	Workers     uint64            `json:"workers"`
	CPULimit    *float64          `json:"cpu_limit"`
	MemoryLimit *string           `json:"memory_limit"`
	DiskLimit   *string           `json:"disk_limit"`
	Selectors   map[string]string `json:"selectors"`
	Swap        bool              `json:"swap_enabled"`
	IsCC        bool              `json:"is_cc"`
}

var byteSizePattern = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$`)

// parseByteSize reads a size as the bytesize crate does ("3881MiB", "4GB").
func parseByteSize(s string) (uint64, error) {
	g := byteSizePattern.FindStringSubmatch(s)
	if g == nil {
		return 0, fmt.Errorf("invalid byte size %q", s)
	}
	n, err := strconv.ParseFloat(g[1], 64)
	if err != nil {
		return 0, err
	}
	units := map[string]float64{"": 1, "b": 1, "k": 1e3, "kb": 1e3, "ki": 1 << 10, "kib": 1 << 10,
		"m": 1e6, "mb": 1e6, "mi": 1 << 20, "mib": 1 << 20, "g": 1e9, "gb": 1e9, "gi": 1 << 30, "gib": 1 << 30,
		"t": 1e12, "tb": 1e12, "ti": 1 << 40, "tib": 1 << 40}
	u, ok := units[strings.ToLower(g[2])]
	if !ok {
		return 0, fmt.Errorf("invalid byte size unit %q in %q", g[2], s)
	}
	return uint64(n * u), nil
}

// Orchestrator plays the calls environmentd's Kubernetes orchestrator and
// cloud-resource controller make at boot, as the pod's ServiceAccount, in
// its own namespace.
type Orchestrator struct {
	Kube      kubernetes.Interface
	MZ        versioned.Interface
	Namespace string
	// Prefix is --orchestrator-kubernetes-name-prefix.
	Prefix string
	// Args are environmentd's parsed arguments.
	Args *clap.Matches
	// Version is environmentd's.
	Version imageref.Version
	// Pod is environmentd's own pod (HOSTNAME). Owners are its
	// ownerReferences, which environmentd puts on what it creates (so a
	// generation's StatefulSet owns them); read before the first replica.
	Pod          string
	Owners       []metav1.OwnerReference
	ownersLoaded bool
	// HTTP reads clusterd's usage (tests replace it); nil is the default
	// client.
	HTTP *http.Client

	sizesOnce sync.Once
	sizes     map[string]replicaSize
	sizesErr  error
}

// ListVpcEndpoints is the cloud-resource controller's list at bootstrap:
// every VpcEndpoint of the namespace.
func (o *Orchestrator) ListVpcEndpoints(ctx context.Context) (int, error) {
	list, err := o.MZ.MaterializeV1().VpcEndpoints(o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list vpc endpoints: %w", err)
	}
	return len(list.Items), nil
}

// name is the object name of a service: {prefix}cluster-{id}.
func (o *Orchestrator) name(serviceID string) string {
	return o.Prefix + orchestratorNamespace + "-" + serviceID
}

// keyValues are the KEY=VALUE pairs of a repeated flag.
func (o *Orchestrator) keyValues(flag string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range o.Args.All(flag) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("--%s: %q is not KEY=VALUE", flag, kv)
		}
		out[k] = v
	}
	return out, nil
}

// sizeOf is r's entry of --cluster-replica-sizes, parsed once: the
// orchestrator and the cluster controller read it at every replica and
// every check.
func (o *Orchestrator) sizeOf(r Replica) (replicaSize, error) {
	o.sizesOnce.Do(func() {
		raw, _ := o.Args.Get("cluster-replica-sizes")
		o.sizes = map[string]replicaSize{}
		if err := json.Unmarshal([]byte(raw), &o.sizes); err != nil {
			o.sizesErr = fmt.Errorf("cluster replica sizes: %w", err)
		}
	})
	if o.sizesErr != nil {
		return replicaSize{}, o.sizesErr
	}
	size, ok := o.sizes[r.Size]
	if !ok {
		return replicaSize{}, fmt.Errorf("unknown cluster replica size %q", r.Size)
	}
	return size, nil
}

// EnsureReplica applies the headless Service and the StatefulSet of one
// replica of generation gen, server-side, as environmentd does.
func (o *Orchestrator) EnsureReplica(ctx context.Context, r Replica, gen uint64) error {
	size, err := o.sizeOf(r)
	if err != nil {
		return err
	}
	serviceLabels, err := o.keyValues("orchestrator-kubernetes-service-label")
	if err != nil {
		return err
	}
	nodeSelector, err := o.keyValues("orchestrator-kubernetes-service-node-selector")
	if err != nil {
		return err
	}
	annotations, err := o.keyValues("orchestrator-kubernetes-service-annotation")
	if err != nil {
		return err
	}
	// Swap sizes have no disk; any other size wants an ephemeral volume,
	// of 1 GiB without a disk_limit (upstream's DiskLimit::ARBITRARY).
	diskLimit := uint64(1 << 30)
	if size.DiskLimit != nil {
		if diskLimit, err = parseByteSize(*size.DiskLimit); err != nil {
			return err
		}
	}
	if size.Swap {
		diskLimit = 0
	}
	if class, _ := o.Args.Get("orchestrator-kubernetes-ephemeral-volume-class"); diskLimit != 0 && class == "" {
		return fmt.Errorf("service requested disk but no ephemeral volume storage class was configured")
	}

	id := r.ServiceID(gen)
	name := o.name(id)
	standard := map[string]string{
		"app.kubernetes.io/managed-by": "materialize-operator",
		"app.kubernetes.io/part-of":    "materialize",
		"app.kubernetes.io/name":       "clusterd",
		"app":                          "clusterd",
	}
	selector := map[string]string{namespaceLabel: orchestratorNamespace, serviceIDLabel: id}
	for k, v := range serviceLabels {
		selector[k] = v
	}
	ports := []struct {
		name string
		port int32
	}{{"storagectl", storageCtlPort}, {"storage", storagePort}, {"computectl", computeCtlPort}, {"compute", computePort}, {"internal-http", internalHTTPPort}}
	podLabels := map[string]string{}
	for _, m := range []map[string]string{selector, standard} {
		for k, v := range m {
			podLabels[k] = v
		}
	}
	labels := map[string]string{"replica-id": r.ReplicaID, "cluster-id": r.ClusterID,
		"generation": strconv.FormatUint(gen, 10), "type": "cluster", "replica-role": r.Role,
		"workers": strconv.FormatUint(size.Workers, 10),
		"size":    strings.NewReplacer("=", "-", ",", "_").Replace(r.Size),
		"scale":   strconv.FormatUint(uint64(size.Scale), 10)}
	// The generation label came with the generation selectors (26.27);
	// before, only the pods' names carry it.
	if !o.Version.AtLeast(generationSelectorVersion) {
		delete(labels, "generation")
	}
	for k, v := range labels {
		podLabels[replicaLabelPrefix+k] = v
	}
	svcPorts := make([]*corev1ac.ServicePortApplyConfiguration, 0, len(ports))
	ctrPorts := make([]*corev1ac.ContainerPortApplyConfiguration, 0, len(ports))
	for _, p := range ports {
		podLabels["environmentd.materialize.cloud/port-"+p.name] = "true"
		svcPorts = append(svcPorts, corev1ac.ServicePort().WithName(p.name).WithPort(p.port))
		ctrPorts = append(ctrPorts, corev1ac.ContainerPort().WithName(p.name).WithContainerPort(p.port))
	}
	podAnnotations := map[string]string{
		"cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
		"karpenter.sh/do-not-evict":                      "true",
		"karpenter.sh/do-not-disrupt":                    "true",
		replicaLabelPrefix + "replica-name":              r.ClusterName + "." + r.ReplicaName,
		replicaLabelPrefix + "cluster-name":              r.ClusterName,
	}
	if v, _ := o.Args.Get("orchestrator-kubernetes-enable-prometheus-scrape-annotations"); v == "true" {
		podAnnotations["prometheus.io/scrape"] = "true"
		podAnnotations["prometheus.io/port"] = strconv.Itoa(internalHTTPPort)
		podAnnotations["prometheus.io/path"] = "/metrics"
		podAnnotations["prometheus.io/scheme"] = "http"
	}
	for k, v := range annotations { // --orchestrator-kubernetes-service-annotation: as given
		podAnnotations[k] = v
	}
	nodeSel := map[string]string{}
	if diskLimit != 0 {
		nodeSel["materialize.cloud/disk"] = "true"
	}
	for _, m := range []map[string]string{nodeSelector, size.Selectors} {
		for k, v := range m {
			nodeSel[k] = v
		}
	}
	limits, requests := corev1.ResourceList{}, corev1.ResourceList{}
	if size.MemoryLimit != nil {
		b, err := parseByteSize(*size.MemoryLimit)
		if err != nil || b > math.MaxInt64 {
			return fmt.Errorf("size %q: memory_limit %q: %v", r.Size, *size.MemoryLimit, err)
		}
		limits[corev1.ResourceMemory] = *resource.NewQuantity(int64(b), resource.BinarySI)
		requests[corev1.ResourceMemory] = limits[corev1.ResourceMemory]
		if size.Swap {
			// Kubernetes enables swap only when request and limit differ.
			requests[corev1.ResourceMemory] = *resource.NewQuantity(int64(b)-1, resource.BinarySI)
		}
	}
	if size.CPULimit != nil {
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(*size.CPULimit*1000), resource.DecimalSI)
		requests[corev1.ResourceCPU] = limits[corev1.ResourceCPU]
	}
	image, _ := o.Args.Get("clusterd-image")
	container := image[strings.LastIndex(image, "/")+1:]
	if i := strings.LastIndex(container, ":"); i > 0 {
		container = container[:i]
	}
	pullPolicy, _ := o.Args.Get("orchestrator-kubernetes-image-pull-policy")
	args, err := o.clusterdArgs(r, name, size, diskLimit)
	if err != nil {
		return err
	}
	ctr := corev1ac.Container().WithName(container).WithImage(image).
		WithImagePullPolicy(pullPolicyOf(pullPolicy)).
		WithArgs(args...).
		WithPorts(ctrPorts...).
		WithResources(corev1ac.ResourceRequirements().WithLimits(limits).WithRequests(requests)).
		WithSecurityContext(corev1ac.SecurityContext().WithPrivileged(false).WithRunAsNonRoot(true).
			WithAllowPrivilegeEscalation(false).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))
	pod := corev1ac.PodSpec()
	if diskLimit != 0 {
		// The scratch disk clusterd's --scratch-directory names: a generic
		// ephemeral volume of the size's disk, of the operator's class.
		class, _ := o.Args.Get("orchestrator-kubernetes-ephemeral-volume-class")
		ctr.WithVolumeMounts(corev1ac.VolumeMount().WithName("scratch").WithMountPath("/scratch"))
		pod.WithVolumes(corev1ac.Volume().WithName("scratch").WithEphemeral(corev1ac.EphemeralVolumeSource().
			WithVolumeClaimTemplate(corev1ac.PersistentVolumeClaimTemplate().WithSpec(corev1ac.PersistentVolumeClaimSpec().
				WithAccessModes(corev1.ReadWriteOnce).WithStorageClassName(class).
				WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{
					corev1.ResourceStorage: resource.MustParse(strconv.FormatUint(diskLimit, 10))}))))))
	}
	pod.WithContainers(ctr).
		WithNodeSelector(nodeSel).
		WithTolerations(
			corev1ac.Toleration().WithKey("node.kubernetes.io/not-ready").WithOperator(corev1.TolerationOpExists).
				WithEffect(corev1.TaintEffectNoExecute).WithTolerationSeconds(30),
			corev1ac.Toleration().WithKey("node.kubernetes.io/unreachable").WithOperator(corev1.TolerationOpExists).
				WithEffect(corev1.TaintEffectNoExecute).WithTolerationSeconds(30)).
		WithTerminationGracePeriodSeconds(0)
	if raw, ok := o.Args.Get("orchestrator-kubernetes-service-tolerations"); ok {
		// Case-sensitive keys, as k8s-openapi reads them.
		var extra []corev1.Toleration
		if err := utiljson.Unmarshal([]byte(raw), &extra); err != nil {
			return fmt.Errorf("--orchestrator-kubernetes-service-tolerations: %w", err)
		}
		var tolerations []*corev1ac.TolerationApplyConfiguration
		if err := convertInto(extra, &tolerations); err != nil {
			return err
		}
		pod.WithTolerations(tolerations...)
	}
	affinity, spread, err := o.scheduling(r, gen, size.Scale, selector)
	if err != nil {
		return err
	}
	if err := convertInto(affinity, &pod.Affinity); err != nil {
		return err
	}
	if err := convertInto(spread, &pod.TopologySpreadConstraints); err != nil {
		return err
	}
	if s, ok := o.Args.Get("orchestrator-kubernetes-scheduler-name"); ok {
		pod.WithSchedulerName(s)
	}
	if sa, ok := o.Args.Get("orchestrator-kubernetes-service-account"); ok {
		pod.WithDeprecatedServiceAccount(sa)
	}
	sec := corev1ac.PodSecurityContext().WithSysctls(
		corev1ac.Sysctl().WithName("net.ipv4.tcp_keepalive_time").WithValue("300"),
		corev1ac.Sysctl().WithName("net.ipv4.tcp_keepalive_intvl").WithValue("30"),
		corev1ac.Sysctl().WithName("net.ipv4.tcp_keepalive_probes").WithValue("3"))
	if g, ok := o.Args.Get("orchestrator-kubernetes-service-fs-group"); ok {
		id, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return fmt.Errorf("--orchestrator-kubernetes-service-fs-group: %w", err)
		}
		sec.WithFSGroup(id).WithRunAsUser(id).WithRunAsGroup(id)
	}
	pod.WithSecurityContext(sec)

	owners := make([]*metav1ac.OwnerReferenceApplyConfiguration, 0, len(o.Owners))
	for _, ref := range o.Owners {
		oc := metav1ac.OwnerReference().WithAPIVersion(ref.APIVersion).WithKind(ref.Kind).WithName(ref.Name).WithUID(ref.UID)
		if ref.Controller != nil {
			oc.WithController(*ref.Controller)
		}
		if ref.BlockOwnerDeletion != nil {
			oc.WithBlockOwnerDeletion(*ref.BlockOwnerDeletion)
		}
		owners = append(owners, oc)
	}
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	svc := corev1ac.Service(name, o.Namespace).WithLabels(standard).WithOwnerReferences(owners...).
		WithSpec(corev1ac.ServiceSpec().WithClusterIP("None").WithSelector(selector).WithPorts(svcPorts...))
	if _, err := o.Kube.CoreV1().Services(o.Namespace).Apply(ctx, svc, opts); err != nil {
		return fmt.Errorf("applying Service %s: %w", name, err)
	}
	template := corev1ac.PodTemplateSpec().WithLabels(podLabels).WithAnnotations(podAnnotations).WithSpec(pod)
	// The hash of the template without it, as upstream's (a sha256 of its
	// JSON): what tells a pod of an older template.
	encoded, err := json.Marshal(template)
	if err != nil {
		return err
	}
	podAnnotations[podTemplateHashAnnotation] = fmt.Sprintf("%x", sha256.Sum256(encoded))
	template.WithAnnotations(podAnnotations)
	sts := appsv1ac.StatefulSet(name, o.Namespace).WithLabels(standard).WithOwnerReferences(owners...).
		WithSpec(appsv1ac.StatefulSetSpec().WithReplicas(int32(size.Scale)).WithServiceName(name).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector)).
			WithUpdateStrategy(appsv1ac.StatefulSetUpdateStrategy().WithType("OnDelete")).
			WithPodManagementPolicy("Parallel").
			WithTemplate(template))
	if _, err := o.Kube.AppsV1().StatefulSets(o.Namespace).Apply(ctx, sts, opts); err != nil {
		return fmt.Errorf("applying StatefulSet %s: %w", name, err)
	}
	return o.syncPods(ctx, name, size.Scale, podAnnotations, opts)
}

// podTemplateHashAnnotation is upstream's POD_TEMPLATE_HASH_ANNOTATION.
const podTemplateHashAnnotation = "environmentd.materialize.cloud/pod-template-hash"

// syncPods is upstream's pod recreation under the OnDelete strategy, with
// environmentd's own ServiceAccount: each pod of the StatefulSet is read;
// one of another template hash is deleted (its controller makes it anew),
// and the others get the template's annotations, applied. A pod already
// gone is skipped.
func (o *Orchestrator) syncPods(ctx context.Context, name string, scale uint16, annotations map[string]string, opts metav1.ApplyOptions) error {
	pods := o.Kube.CoreV1().Pods(o.Namespace)
	for i := range int(scale) {
		podName := fmt.Sprintf("%s-%d", name, i)
		live, err := pods.Get(ctx, podName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("reading pod %s: %w", podName, err)
		}
		if live.Annotations[podTemplateHashAnnotation] != annotations[podTemplateHashAnnotation] {
			err = pods.Delete(ctx, podName, metav1.DeleteOptions{})
		} else {
			_, err = pods.Apply(ctx, corev1ac.Pod(podName, o.Namespace).WithAnnotations(annotations), opts)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("syncing pod %s: %w", podName, err)
		}
	}
	return nil
}

var serviceIDPattern = regexp.MustCompile(`^([us]\d+)-replica-([us]\d+)(?:-gen-(\d+))?$`)

// Services lists the clusterd services of this environment by name, as
// environmentd does (every StatefulSet of the namespace, no selector), with
// each one's generation.
func (o *Orchestrator) Services(ctx context.Context) (map[string]uint64, error) {
	list, err := o.Kube.AppsV1().StatefulSets(o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing StatefulSets: %w", err)
	}
	out := map[string]uint64{}
	prefix := o.Prefix + orchestratorNamespace + "-"
	for _, s := range list.Items {
		id, ok := strings.CutPrefix(s.Name, prefix)
		if !ok {
			continue
		}
		g := serviceIDPattern.FindStringSubmatch(id)
		if g == nil {
			return nil, fmt.Errorf("invalid service name: %s", id)
		}
		gen := uint64(0)
		if g[3] != "" {
			gen, _ = strconv.ParseUint(g[3], 10, 64)
		}
		out[id] = gen
	}
	return out, nil
}

// DropPastGenerations deletes the services of generations below gen: what
// a generation that boots as the leader does.
func (o *Orchestrator) DropPastGenerations(ctx context.Context, gen uint64) ([]string, error) {
	services, err := o.Services(ctx)
	if err != nil {
		return nil, err
	}
	var dropped []string
	for id, g := range services {
		if g >= gen {
			continue
		}
		name := o.name(id)
		if err := o.Kube.AppsV1().StatefulSets(o.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return dropped, err
		}
		if err := o.Kube.CoreV1().Services(o.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return dropped, err
		}
		dropped = append(dropped, name)
	}
	sort.Strings(dropped)
	return dropped, nil
}

// loadOwners reads environmentd's own pod, once, and keeps its owner
// references (upstream's orchestrator worker does it before its first
// command, in the background: the listeners serve meanwhile).
func (o *Orchestrator) loadOwners(ctx context.Context) error {
	if o.ownersLoaded || o.Pod == "" {
		return nil
	}
	p, err := o.Kube.CoreV1().Pods(o.Namespace).Get(ctx, o.Pod, metav1.GetOptions{})
	if err != nil {
		return err
	}
	o.Owners, o.ownersLoaded = p.OwnerReferences, true
	return nil
}

// pullPolicyOf is KubernetesImagePullPolicy's value: always, if-not-present
// or never (clap checked it).
func pullPolicyOf(flag string) corev1.PullPolicy {
	switch flag {
	case "if-not-present":
		return corev1.PullIfNotPresent
	case "never":
		return corev1.PullNever
	default:
		return corev1.PullAlways
	}
}

// convertInto converts a typed object to its apply configuration (they
// share one JSON form).
func convertInto(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}
