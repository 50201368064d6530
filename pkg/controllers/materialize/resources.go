package materialize

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
)

// environmentd's ports.
const (
	portSQL          = 6875
	portHTTP         = 6876
	portInternalSQL  = 6877
	portInternalHTTP = 6878

	component = "environmentd"
	// GenerationLabel tells the generation of an environmentd pod.
	GenerationLabel = "materialize.cloud/environmentd-generation"
	// ForceRolloutAnnotation carries spec.forceRollout onto the pods.
	ForceRolloutAnnotation = "materialize.cloud/force-rollout"
	defaultScratch         = "4096Mi"
)

var gvk = v1alpha1.SchemeGroupVersion.WithKind("Materialize")

// env is one Materialize with its resource id, from which every child is
// derived.
type env struct {
	mz *v1alpha1.Materialize
	id string
}

func (e env) ns() string { return e.mz.Namespace }

func (e env) owner() *metav1ac.OwnerReferenceApplyConfiguration {
	return children.OwnerReference(e.mz, gvk)
}

func (e env) labels(name string) map[string]string {
	return children.Labels(e.id, component, name)
}

func (e env) serviceAccountName() string {
	if e.mz.Spec.ServiceAccountName != "" {
		return e.mz.Spec.ServiceAccountName
	}
	return e.mz.Name
}

func (e env) environmentdName() string { return children.Name(e.id, "environmentd") }

func (e env) generationName(gen uint64) string {
	return children.Name(e.id, "environmentd-"+strconv.FormatUint(gen, 10))
}

func (e env) listenersName(gen uint64) string {
	return children.Name(e.id, "listeners-"+strconv.FormatUint(gen, 10))
}

// serviceAccount is created unless spec.serviceAccountName names one.
func (e env) serviceAccount() *corev1ac.ServiceAccountApplyConfiguration {
	labels := e.labels(e.serviceAccountName())
	for k, v := range e.mz.Spec.ServiceAccountLabels {
		labels[k] = v
	}
	return corev1ac.ServiceAccount(e.serviceAccountName(), e.ns()).
		WithLabels(labels).WithAnnotations(e.mz.Spec.ServiceAccountAnnotations).
		WithOwnerReferences(e.owner())
}

// role lets environmentd orchestrate its clusters in its namespace.
func (e env) role() *rbacv1ac.RoleApplyConfiguration {
	name := e.environmentdName()
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	return rbacv1ac.Role(name, e.ns()).WithLabels(e.labels(name)).WithOwnerReferences(e.owner()).
		WithRules(
			rbacv1ac.PolicyRule().WithAPIGroups("apps").WithResources("statefulsets").WithVerbs(all...),
			rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("pods", "services", "configmaps", "secrets", "persistentvolumeclaims").WithVerbs(all...),
			rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("pods/log").WithVerbs("get"),
			rbacv1ac.PolicyRule().WithAPIGroups("metrics.k8s.io").WithResources("pods").WithVerbs("get", "list"),
		)
}

func (e env) roleBinding() *rbacv1ac.RoleBindingApplyConfiguration {
	name := e.environmentdName()
	return rbacv1ac.RoleBinding(name, e.ns()).WithLabels(e.labels(name)).WithOwnerReferences(e.owner()).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(name)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(e.serviceAccountName()).WithNamespace(e.ns()))
}

// networkPolicy admits traffic to environmentd only from the environment's
// own pods (balancerd, console, other generations) and its SQL/HTTP ports
// from anywhere in the namespace.
func (e env) networkPolicy() *networkingv1ac.NetworkPolicyApplyConfiguration {
	name := e.environmentdName()
	tcp := corev1.ProtocolTCP
	port := func(p int) *networkingv1ac.NetworkPolicyPortApplyConfiguration {
		return networkingv1ac.NetworkPolicyPort().WithProtocol(tcp).WithPort(intstr.FromInt32(int32(p)))
	}
	return networkingv1ac.NetworkPolicy(name, e.ns()).WithLabels(e.labels(name)).WithOwnerReferences(e.owner()).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{
				children.ResourceIDLabel: e.id, children.ComponentLabel: component})).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(
				networkingv1ac.NetworkPolicyIngressRule().
					WithFrom(networkingv1ac.NetworkPolicyPeer().WithPodSelector(
						metav1ac.LabelSelector().WithMatchLabels(map[string]string{children.ResourceIDLabel: e.id}))).
					WithPorts(port(portSQL), port(portHTTP), port(portInternalSQL), port(portInternalHTTP)),
				networkingv1ac.NetworkPolicyIngressRule().
					WithFrom(networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector())).
					WithPorts(port(portSQL), port(portHTTP)),
			))
}

// generation is everything one environmentd generation consists of.
type generation struct {
	statefulSet *appsv1ac.StatefulSetApplyConfiguration
	service     *corev1ac.ServiceApplyConfiguration
	listeners   *corev1ac.ConfigMapApplyConfiguration
}

func (e env) generation(gen uint64) generation {
	name := e.generationName(gen)
	genLabels := e.labels(name)
	genLabels[GenerationLabel] = strconv.FormatUint(gen, 10)
	podLabels := map[string]string{}
	for k, v := range e.mz.Spec.PodLabels {
		podLabels[k] = v
	}
	for k, v := range genLabels {
		podLabels[k] = v
	}
	podAnnotations := map[string]string{}
	for k, v := range e.mz.Spec.PodAnnotations {
		podAnnotations[k] = v
	}
	if e.mz.Spec.ForceRollout != "" {
		podAnnotations[ForceRolloutAnnotation] = e.mz.Spec.ForceRollout
	}

	listeners := corev1ac.ConfigMap(e.listenersName(gen), e.ns()).WithLabels(genLabels).WithOwnerReferences(e.owner()).
		WithData(map[string]string{"listeners.json": e.listenersJSON()})

	scratch := resource.MustParse(defaultScratch)
	if q := e.mz.Spec.EnvironmentdScratchVolumeStorageRequirement; q != nil {
		scratch = *q
	}
	container := corev1ac.Container().
		WithName(component).
		WithImage(e.mz.Spec.EnvironmentdImageRef).
		WithArgs(e.args(gen)...).
		WithEnv(e.environment()...).
		WithPorts(
			corev1ac.ContainerPort().WithName("sql").WithContainerPort(portSQL),
			corev1ac.ContainerPort().WithName("http").WithContainerPort(portHTTP),
			corev1ac.ContainerPort().WithName("internal-sql").WithContainerPort(portInternalSQL),
			corev1ac.ContainerPort().WithName("internal-http").WithContainerPort(portInternalHTTP),
		).
		WithVolumeMounts(
			corev1ac.VolumeMount().WithName("scratch").WithMountPath("/scratch"),
			corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"),
			corev1ac.VolumeMount().WithName("listeners").WithMountPath("/listeners").WithReadOnly(true),
		).
		WithSecurityContext(children.RestrictedContainerSecurity())
	if r := e.mz.Spec.EnvironmentdResourceRequirements; r != nil {
		container.WithResources(corev1ac.ResourceRequirements().WithRequests(r.Requests).WithLimits(r.Limits))
	}

	statefulSet := appsv1ac.StatefulSet(name, e.ns()).WithLabels(genLabels).WithOwnerReferences(e.owner()).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(1).
			WithServiceName(name).
			WithPodManagementPolicy("Parallel").
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{children.NameLabel: name})).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(podLabels).WithAnnotations(podAnnotations).
				WithSpec(corev1ac.PodSpec().
					WithServiceAccountName(e.serviceAccountName()).
					WithSecurityContext(children.RestrictedPodSecurity().WithFSGroup(999).WithRunAsUser(999)).
					WithTerminationGracePeriodSeconds(600).
					WithContainers(container).
					WithVolumes(
						corev1ac.Volume().WithName("scratch").WithEmptyDir(corev1ac.EmptyDirVolumeSource().WithSizeLimit(scratch)),
						corev1ac.Volume().WithName("tmp").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
						corev1ac.Volume().WithName("listeners").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(e.listenersName(gen))),
					))))

	service := corev1ac.Service(name, e.ns()).WithLabels(genLabels).WithOwnerReferences(e.owner()).
		WithSpec(corev1ac.ServiceSpec().
			WithClusterIP(corev1.ClusterIPNone).
			WithSelector(map[string]string{children.NameLabel: name}).
			WithPorts(servicePorts(true)...))
	return generation{statefulSet: statefulSet, service: service, listeners: listeners}
}

func servicePorts(internal bool) []*corev1ac.ServicePortApplyConfiguration {
	port := func(name string, p int32) *corev1ac.ServicePortApplyConfiguration {
		return corev1ac.ServicePort().WithName(name).WithPort(p).WithTargetPort(intstr.FromInt32(p)).WithProtocol(corev1.ProtocolTCP)
	}
	ports := []*corev1ac.ServicePortApplyConfiguration{port("sql", portSQL), port("http", portHTTP)}
	if internal {
		ports = append(ports, port("internal-sql", portInternalSQL), port("internal-http", portInternalHTTP))
	}
	return ports
}

// publicService routes to the active generation.
func (e env) publicService(gen uint64) *corev1ac.ServiceApplyConfiguration {
	name := e.environmentdName()
	return corev1ac.Service(name, e.ns()).WithLabels(e.labels(name)).WithOwnerReferences(e.owner()).
		WithSpec(corev1ac.ServiceSpec().
			WithClusterIP(corev1.ClusterIPNone).
			WithSelector(map[string]string{children.NameLabel: e.generationName(gen)}).
			WithPorts(servicePorts(true)...))
}

func (e env) args(gen uint64) []string {
	s := e.mz.Spec
	args := []string{
		"--environment-id=" + s.EnvironmentID,
		"--deploy-generation=" + strconv.FormatUint(gen, 10),
		"--internal-http-listen-addr=0.0.0.0:" + strconv.Itoa(portInternalHTTP),
		"--internal-sql-listen-addr=0.0.0.0:" + strconv.Itoa(portInternalSQL),
		"--listeners-config-path=/listeners/listeners.json",
		"--scratch-directory=/scratch",
		"--orchestrator=kubernetes",
		"--orchestrator-kubernetes-service-account=" + e.serviceAccountName(),
		"--secrets-controller=kubernetes",
	}
	if s.EnvironmentdConnectionRoleArn != "" {
		args = append(args, "--aws-connection-role-arn="+s.EnvironmentdConnectionRoleArn)
	}
	if s.SystemParameterConfigmapName != "" {
		args = append(args, "--config-sync-file-path=/system-params/system-params.json")
	}
	return append(args, s.EnvironmentdExtraArgs...)
}

func (e env) environment() []*corev1ac.EnvVarApplyConfiguration {
	secretEnv := func(name, key string) *corev1ac.EnvVarApplyConfiguration {
		return corev1ac.EnvVar().WithName(name).WithValueFrom(corev1ac.EnvVarSource().WithSecretKeyRef(
			corev1ac.SecretKeySelector().WithName(e.mz.Spec.BackendSecretName).WithKey(key)))
	}
	vars := []*corev1ac.EnvVarApplyConfiguration{
		secretEnv("MZ_METADATA_BACKEND_URL", "metadata_backend_url"),
		secretEnv("MZ_PERSIST_BLOB_URL", "persist_backend_url"),
	}
	for _, v := range e.mz.Spec.EnvironmentdExtraEnv {
		ac := corev1ac.EnvVar().WithName(v.Name)
		if v.ValueFrom != nil {
			// Round-trip through JSON: the apply configuration mirrors the type.
			src := &corev1ac.EnvVarSourceApplyConfiguration{}
			raw, _ := json.Marshal(v.ValueFrom)
			_ = json.Unmarshal(raw, src)
			ac.WithValueFrom(src)
		} else {
			ac.WithValue(v.Value)
		}
		vars = append(vars, ac)
	}
	return vars
}

func (e env) listenersJSON() string {
	auth := string(e.mz.Spec.AuthenticatorKind)
	if auth == "" {
		auth = string(v1alpha1.AuthenticatorNone)
	}
	listener := func(port int, authenticator string) map[string]any {
		return map[string]any{"addr": fmt.Sprintf("0.0.0.0:%d", port), "authenticator_kind": authenticator, "allowed_roles": "Normal"}
	}
	cfg := map[string]any{
		"sql":  map[string]any{"external": listener(portSQL, auth), "internal": listener(portInternalSQL, "None")},
		"http": map[string]any{"external": listener(portHTTP, auth), "internal": listener(portInternalHTTP, "None")},
	}
	raw, _ := json.Marshal(cfg)
	return string(raw)
}

// resourcesHash identifies what a generation would run, independent of its
// number: equal hashes mean a new generation would change nothing.
func (e env) resourcesHash() string {
	g := e.generation(0)
	raw, _ := json.Marshal([]any{g.statefulSet.Spec, g.service.Spec, g.listeners.Data})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}
