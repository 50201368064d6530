package materialize

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/certificates"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize/rollout"
	"github.com/materializeinc/orchestratord/pkg/controllers/podspec"
	"github.com/materializeinc/orchestratord/pkg/imageref"
	mzlabels "github.com/materializeinc/orchestratord/pkg/labels"
	"github.com/materializeinc/orchestratord/pkg/mzuuid"
)

// What one environmentd generation consists of, as upstream's
// src/orchestratord/src/controller/materialize/generation.rs builds it for
// environmentd v26.1.0 and later (version gates older than that always pass
// here and are left out).

const (
	// GenerationAnnotation tells the generation of an environmentd object.
	GenerationAnnotation = "materialize.cloud/generation"
	// ForceAnnotation is upstream's force-rollout value on the StatefulSet.
	ForceAnnotation = "materialize.cloud/force"
	// ForceRolloutAnnotation on a Materialize forces a new generation.
	ForceRolloutAnnotation = "materialize.cloud/force-rollout"
	// LicenseKeyEntry is the backend Secret's entry environmentd reads its
	// license key from.
	LicenseKeyEntry = "license_key"
	// MzSystemPasswordEntry is the backend Secret's entry holding mz_system's
	// password for Password and Sasl authentication.
	MzSystemPasswordEntry = "external_login_password_mz_system"
	// SystemParamsFile is the ConfigMap entry environmentd syncs system
	// parameters from.
	SystemParamsFile = "system-params.json"
)

// MinimumEnvironmentdVersion is the oldest environmentd this operator runs.
// Its pre-release is upstream's 26.1.0 gate, so release candidates of
// 26.1.0 qualify.
var MinimumEnvironmentdVersion = imageref.MustParseVersion("26.1.0-dev.0")

// OidcVersion is the first environmentd with Oidc listeners (upstream
// c61ef02a01): older ones refuse a listeners file that names it. Builds of
// 26.12.0-dev.0 from just before that commit lack it too; no release does.
var OidcVersion = imageref.MustParseVersion("26.12.0-dev.0")

func (e env) generationName(gen uint64) string {
	return e.name("environmentd-" + strconv.FormatUint(gen, 10))
}
func (e env) listenersName(gen uint64) string {
	return e.name("listeners-" + strconv.FormatUint(gen, 10))
}
func (e env) persistPubSubName(gen uint64) string {
	return e.name("persist-pubsub-" + strconv.FormatUint(gen, 10))
}
func (e env) certificateSecretName() string { return e.name("environmentd-tls") }

// certificateName is environmentd's cert-manager Certificate.
func (e env) certificateName() string { return e.name("environmentd-external") }

// meetsVersion is upstream's meets_minimum_version: an image whose tag is
// not a version is taken to be current.
func (e env) meetsVersion(min imageref.Version) bool {
	v, _, ok := imageref.EnvironmentdVersion(e.mz.Spec.EnvironmentdImageRef)
	return !ok || v.AtLeast(min)
}

// environmentID is upstream's Materialize::environment_id: the format
// environmentd's catalog requires, {cloud provider}-{region}-{uuid}-0.
func (e env) environmentID() string {
	return fmt.Sprintf("%s-%s-%s-0", e.cfg.CloudProvider, e.cfg.Region, e.organizationID())
}

// organizationID is spec.environmentId as upstream writes its Uuid: lower
// case, hyphenated, whatever spelling the API server admitted (it admits
// upper case and no hyphens; environmentd refuses both). One that does not
// parse is kept as is: the pre-flight check refuses it before any use.
func (e env) organizationID() string {
	return canonicalUUID(e.mz.Spec.EnvironmentID)
}

// canonicalUUID is s as upstream writes it once parsed, or s unchanged.
func canonicalUUID(s string) string {
	if c, err := mzuuid.Canonical(s); err == nil {
		return c
	}
	return s
}

// forceRolloutValue is upstream's force_rollout_value: spec.forceRollout,
// then the force-rollout annotation.
func (e env) forceRolloutValue() string {
	force := canonicalUUID(e.mz.Spec.ForceRollout)
	if force == "" {
		force = mzuuid.Nil
	}
	if a, ok := e.mz.Annotations[ForceRolloutAnnotation]; ok {
		return force + "/" + a
	}
	return force
}

// internalTLS is upstream's issuer_ref_defined for the internal certificate:
// the Materialize's or --default-certificate-specs' internal issuer.
func (e env) internalTLS() bool {
	return certificates.IssuerRefDefined(e.cfg.Certificates().Internal, e.mz.Spec.InternalCertificateSpec)
}

// certificate is environmentd's (upstream's create_environmentd_certificate):
// mz{id}-environmentd-external into the Secret the generations mount, valid
// for environmentd's Service names too, Ed25519 unless asked; nil without an
// issuer.
func (e env) certificate() (*unstructured.Unstructured, error) {
	svc := e.environmentdName()
	cert, err := certificates.Certificate(e.cfg.Certificates().Internal, e.mz.Spec.InternalCertificateSpec, certificates.Request{
		Name: e.certificateName(), Namespace: e.ns(), SecretName: e.certificateSecretName(),
		Labels: e.labels(), SecretLabels: e.defaultLabels(),
		OwnerReferences:    children.UnstructuredOwner(e.mz, gvk),
		AdditionalDNSNames: []string{svc, fmt.Sprintf("%s.%s.svc.cluster.local", svc, e.ns())},
		AlgorithmHint:      v1alpha1.PrivateKeyEd25519,
	})
	if err != nil {
		return nil, fmt.Errorf("environmentd certificate: %w", err)
	}
	return cert, nil
}

// generation is everything one environmentd generation consists of.
type generation struct {
	statefulSet   *appsv1ac.StatefulSetApplyConfiguration
	service       *corev1ac.ServiceApplyConfiguration
	persistPubSub *corev1ac.ServiceApplyConfiguration
	listeners     *corev1ac.ConfigMapApplyConfiguration
}

func (e env) generation(gen uint64) generation {
	genAnnotation := map[string]string{GenerationAnnotation: strconv.FormatUint(gen, 10)}
	return generation{
		statefulSet: e.statefulSet(gen),
		service:     e.service(e.generationName(gen), gen, false),
		persistPubSub: corev1ac.Service(e.persistPubSubName(gen), e.ns()).WithLabels(e.labels()).WithOwnerReferences(e.owner()).
			WithSpec(corev1ac.ServiceSpec().
				WithType(corev1.ServiceTypeClusterIP).WithClusterIP(corev1.ClusterIPNone).
				WithSelector(map[string]string{children.NameLabel: e.generationName(gen)}).
				WithPorts(corev1ac.ServicePort().WithName("grpc").WithProtocol(corev1.ProtocolTCP).WithPort(e.cfg.PersistPubSubPort))),
		listeners: corev1ac.ConfigMap(e.listenersName(gen), e.ns()).WithLabels(e.labels()).WithOwnerReferences(e.owner()).
			WithAnnotations(genAnnotation).
			WithData(map[string]string{"listeners.json": e.listenersJSON()}),
	}
}

// service is upstream's create_base_service_object: the generation's own
// Service, or (headless) the public one pointing at the active generation.
func (e env) service(name string, gen uint64, headless bool) *corev1ac.ServiceApplyConfiguration {
	port := func(name string, p int32) *corev1ac.ServicePortApplyConfiguration {
		return corev1ac.ServicePort().WithName(name).WithProtocol(corev1.ProtocolTCP).WithPort(p)
	}
	spec := corev1ac.ServiceSpec().WithType(corev1.ServiceTypeClusterIP).
		WithSelector(map[string]string{children.NameLabel: e.generationName(gen)}).
		WithPorts(port("sql", e.cfg.SQLPort), port("https", e.cfg.HTTPPort),
			port("internal-sql", e.cfg.InternalSQLPort), port("internal-http", e.cfg.InternalHTTPPort))
	if headless {
		spec.WithClusterIP(corev1.ClusterIPNone)
	}
	return corev1ac.Service(name, e.ns()).WithLabels(e.labels()).WithOwnerReferences(e.owner()).WithSpec(spec)
}

// publicService routes to the active generation.
func (e env) publicService(gen uint64) *corev1ac.ServiceApplyConfiguration {
	return e.service(e.environmentdName(), gen, true)
}

func secretEnv(name, secret, key string) *corev1ac.EnvVarApplyConfiguration {
	return corev1ac.EnvVar().WithName(name).WithValueFrom(corev1ac.EnvVarSource().WithSecretKeyRef(
		corev1ac.SecretKeySelector().WithName(secret).WithKey(key).WithOptional(false)))
}

// generationArgs are environmentd's command line, in upstream's order.
func (e env) generationArgs(gen uint64) []string {
	c, s := e.cfg, e.mz.Spec
	var args []string
	add := func(a ...string) { args = append(args, a...) }
	if c.HelmChartVersion != "" {
		add("--helm-chart-version=" + c.HelmChartVersion)
	}
	add("--environment-id="+e.environmentID(),
		"--clusterd-image="+imageref.Sibling(s.EnvironmentdImageRef, "clusterd", ""))
	if c.ClusterReplicaSizes != "" {
		add("--cluster-replica-sizes=" + c.ClusterReplicaSizes)
	}
	for _, f := range []struct{ flag, value string }{
		{"bootstrap-default-cluster-replica-size", c.BootstrapDefaultClusterReplicaSize},
		{"bootstrap-builtin-system-cluster-replica-size", c.BootstrapBuiltinSystemClusterReplicaSize},
		{"bootstrap-builtin-probe-cluster-replica-size", c.BootstrapBuiltinProbeClusterReplicaSize},
		{"bootstrap-builtin-support-cluster-replica-size", c.BootstrapBuiltinSupportClusterReplicaSize},
		{"bootstrap-builtin-catalog-server-cluster-replica-size", c.BootstrapBuiltinCatalogServerClusterReplicaSize},
		{"bootstrap-builtin-analytics-cluster-replica-size", c.BootstrapBuiltinAnalyticsClusterReplicaSize},
		{"bootstrap-builtin-system-cluster-replication-factor", c.BootstrapBuiltinSystemClusterReplicationFactor},
		{"bootstrap-builtin-probe-cluster-replication-factor", c.BootstrapBuiltinProbeClusterReplicationFactor},
		{"bootstrap-builtin-support-cluster-replication-factor", c.BootstrapBuiltinSupportClusterReplicationFactor},
		{"bootstrap-builtin-analytics-cluster-replication-factor", c.BootstrapBuiltinAnalyticsClusterReplicationFactor},
	} {
		if f.value != "" {
			add("--" + f.flag + "=" + f.value)
		}
	}
	for _, origin := range c.AllowedOrigins {
		add("--cors-allowed-origin=" + origin)
	}
	add("--secrets-controller=" + c.SecretsController)
	if names := sizeNames(c.ClusterReplicaSizes); names != nil {
		add("--system-parameter-default=allowed_cluster_replica_sizes='" + strings.Join(names, "', '") + "'")
	}
	if !c.isCloud() {
		add("--system-parameter-default=cluster_enable_topology_spread=false")
	}
	if c.EnableInternalStatementLogging {
		add("--system-parameter-default=enable_internal_statement_logging=true")
	}
	if c.DisableStatementLogging {
		add("--system-parameter-default=statement_logging_max_sample_rate=0")
	}
	if !s.EnableRBAC {
		add("--system-parameter-default=enable_rbac_checks=false")
	}
	// One thread fewer than the CPUs for persist's isolated runtime.
	add("--persist-isolated-runtime-threads=-1")
	if c.CloudProvider == "aws" {
		for _, az := range c.EnvironmentdAvailabilityZones {
			add("--availability-zone=" + az)
		}
		if arn := firstNonEmpty(s.EnvironmentdConnectionRoleArn, c.EnvironmentdConnectionRoleARN); arn != "" {
			add("--aws-connection-role-arn=" + arn)
		}
		if c.AWSAccountID != "" {
			add("--aws-account-id=" + c.AWSAccountID)
		}
		add("--aws-secrets-controller-tags=Environment=" + e.mz.Name)
		add(c.AWSSecretsControllerTags...)
	}
	add("--orchestrator=kubernetes",
		"--orchestrator-kubernetes-service-account="+e.serviceAccountName(),
		"--orchestrator-kubernetes-image-pull-policy="+c.ImagePullPolicy)
	for _, kv := range mustKeyValues(c.ClusterdNodeSelector) {
		add("--orchestrator-kubernetes-service-node-selector=" + kv.key + "=" + kv.value)
	}
	if c.clusterdAffinity != nil {
		add("--orchestrator-kubernetes-service-affinity=" + jsonString(c.clusterdAffinity))
	}
	if c.clusterdTolerations != nil {
		add("--orchestrator-kubernetes-service-tolerations=" + jsonString(c.clusterdTolerations))
	}
	if c.SchedulerName != "" {
		add("--orchestrator-kubernetes-scheduler-name=" + c.SchedulerName)
	}
	for _, k := range sortedKeys(s.PodAnnotations) {
		add("--orchestrator-kubernetes-service-annotation=" + k + "=" + s.PodAnnotations[k])
	}
	// Upstream chains the default labels then the pod labels, each sorted,
	// without merging: a pod label may repeat a default key.
	defaults := e.defaultLabels()
	for _, k := range sortedKeys(defaults) {
		add("--orchestrator-kubernetes-service-label=" + k + "=" + defaults[k])
	}
	for _, k := range sortedKeys(s.PodLabels) {
		add("--orchestrator-kubernetes-service-label=" + k + "=" + s.PodLabels[k])
	}
	add("--orchestrator-kubernetes-name-prefix=mz"+e.id+"-", "--log-format=json")
	if c.OpenTelemetryEndpoint != "" {
		add("--opentelemetry-endpoint=" + c.OpenTelemetryEndpoint)
	}
	add("--opentelemetry-resource=organization_id="+e.organizationID(),
		"--opentelemetry-resource=environment_name="+e.mz.Name)
	if c.SegmentAPIKey != "" {
		add("--segment-api-key=" + c.SegmentAPIKey)
		if c.SegmentClientSide {
			add("--segment-client-side")
		}
	}
	if e.internalTLS() {
		add("--tls-mode=require", "--tls-cert=/etc/materialized/tls.crt", "--tls-key=/etc/materialized/tls.key")
	} else {
		add("--tls-mode=disable")
	}
	if c.EphemeralVolumeClass != "" {
		add("--orchestrator-kubernetes-ephemeral-volume-class=" + c.EphemeralVolumeClass)
	}
	// clusterd's `materialize` user always has gid 999.
	add("--orchestrator-kubernetes-service-fs-group=999")
	if s.SystemParameterConfigmapName != "" {
		add("--config-sync-file-path=/system-params/"+SystemParamsFile, "--config-sync-loop-interval=1s")
	}
	if c.SentryDSN != "" {
		add("--sentry-dsn=" + c.SentryDSN)
		if c.SentryEnvironment != "" {
			add("--sentry-environment=" + c.SentryEnvironment)
		}
		add("--sentry-tag=region=" + c.Region)
	}
	add(fmt.Sprintf("--persist-pubsub-url=http://%s:%d", e.persistPubSubName(gen), c.PersistPubSubPort),
		fmt.Sprintf("--internal-persist-pubsub-listen-addr=0.0.0.0:%d", c.PersistPubSubPort),
		"--deploy-generation="+strconv.FormatUint(gen, 10),
		"--internal-console-redirect-url="+c.InternalConsoleProxyURL)
	if !c.CollectPodMetrics {
		add("--orchestrator-kubernetes-disable-pod-metrics-collection")
	}
	if c.EnablePrometheusScrapeAnnotations {
		add("--orchestrator-kubernetes-enable-prometheus-scrape-annotations")
	}
	add(s.EnvironmentdExtraArgs...)
	add("--listeners-config-path=/listeners/listeners.json")
	if passwordLike(authenticatorKind(e.mz)) {
		add("--system-parameter-default=enable_password_auth=true")
	}
	return args
}

// sizeNames are the size names of a --environmentd-cluster-replica-sizes
// map, sorted; nil unless it is a JSON object.
func sizeNames(sizes string) []string {
	var m map[string]json.RawMessage
	if sizes == "" || json.Unmarshal([]byte(sizes), &m) != nil || m == nil {
		return nil
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// environment is environmentd's environment. Only secrets go here, by
// reference; everything else is a flag, so a typo makes environmentd
// refuse to start instead of being ignored.
func (e env) environment() []*corev1ac.EnvVarApplyConfiguration {
	secret := e.mz.Spec.BackendSecretName
	vars := []*corev1ac.EnvVarApplyConfiguration{
		secretEnv("MZ_METADATA_BACKEND_URL", secret, "metadata_backend_url"),
		secretEnv("MZ_PERSIST_BLOB_URL", secret, "persist_backend_url"),
		corev1ac.EnvVar().WithName("AWS_REGION").WithValue(e.cfg.Region),
	}
	for _, v := range e.mz.Spec.EnvironmentdExtraEnv {
		ac := corev1ac.EnvVar().WithName(v.Name)
		if v.ValueFrom != nil {
			src := &corev1ac.EnvVarSourceApplyConfiguration{}
			// The apply configuration mirrors the type field for field.
			if err := json.Unmarshal([]byte(jsonString(v.ValueFrom)), src); err != nil {
				panic(err)
			}
			ac.WithValueFrom(src)
		} else {
			ac.WithValue(v.Value)
		}
		vars = append(vars, ac)
	}
	vars = append(vars, corev1ac.EnvVar().WithName("MZ_LICENSE_KEY").WithValue("/license_key/license_key"))
	if passwordLike(authenticatorKind(e.mz)) {
		vars = append(vars, secretEnv("MZ_EXTERNAL_LOGIN_PASSWORD_MZ_SYSTEM", secret, MzSystemPasswordEntry))
	}
	return vars
}

func (e env) volumes(gen uint64) ([]*corev1ac.VolumeApplyConfiguration, []*corev1ac.VolumeMountApplyConfiguration) {
	var volumes []*corev1ac.VolumeApplyConfiguration
	var mounts []*corev1ac.VolumeMountApplyConfiguration
	if e.internalTLS() {
		volumes = append(volumes, corev1ac.Volume().WithName("certificate").WithSecret(corev1ac.SecretVolumeSource().
			WithDefaultMode(0o400).WithSecretName(e.certificateSecretName()).WithOptional(false)))
		mounts = append(mounts, corev1ac.VolumeMount().WithName("certificate").WithMountPath("/etc/materialized").WithReadOnly(true))
	}
	if name := e.mz.Spec.SystemParameterConfigmapName; name != "" {
		volumes = append(volumes, corev1ac.Volume().WithName("system-params").WithConfigMap(corev1ac.ConfigMapVolumeSource().
			WithDefaultMode(0o400).WithName(name).WithOptional(true)))
		mounts = append(mounts, corev1ac.VolumeMount().WithName("system-params").WithMountPath("/system-params").WithReadOnly(true))
	}
	volumes = append(volumes,
		corev1ac.Volume().WithName("license-key").WithSecret(corev1ac.SecretVolumeSource().
			WithDefaultMode(0o400).WithOptional(false).WithSecretName(e.mz.Spec.BackendSecretName).
			WithItems(corev1ac.KeyToPath().WithKey(LicenseKeyEntry).WithPath("license_key"))),
		corev1ac.Volume().WithName("listeners-configmap").WithConfigMap(corev1ac.ConfigMapVolumeSource().
			WithName(e.listenersName(gen)).WithDefaultMode(0o400).WithOptional(false).
			WithItems(corev1ac.KeyToPath().WithKey("listeners.json").WithPath("listeners.json"))))
	mounts = append(mounts,
		corev1ac.VolumeMount().WithName("license-key").WithMountPath("/license_key"),
		corev1ac.VolumeMount().WithName("listeners-configmap").WithMountPath("/listeners"))
	return volumes, mounts
}

func (e env) statefulSet(gen uint64) *appsv1ac.StatefulSetApplyConfiguration {
	c, s := e.cfg, e.mz.Spec
	name := e.generationName(gen)
	volumes, mounts := e.volumes(gen)
	probe := corev1ac.Probe().WithInitialDelaySeconds(1).WithFailureThreshold(12).
		WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromInt32(c.SQLPort)))
	port := func(name string, p int32) *corev1ac.ContainerPortApplyConfiguration {
		return corev1ac.ContainerPort().WithName(name).WithContainerPort(p)
	}
	container := corev1ac.Container().
		WithName("environmentd").
		WithImage(s.EnvironmentdImageRef).
		WithImagePullPolicy(pullPolicies[c.ImagePullPolicy]).
		WithPorts(port("sql", c.SQLPort), port("internal-sql", c.InternalSQLPort), port("http", c.HTTPPort),
			port("internal-http", c.InternalHTTPPort), port("persist-pubsub", c.PersistPubSubPort)).
		WithArgs(e.generationArgs(gen)...).
		WithEnv(e.environment()...).
		WithVolumeMounts(mounts...).
		WithLivenessProbe(probe).
		WithReadinessProbe(probe)
	if r := firstResources(s.EnvironmentdResourceRequirements, c.environmentdResources); r != nil {
		// A side not set stays null here, as the resources hash of every
		// running environment was computed with it; applyGeneration leaves
		// it out of what it applies (withoutNullResources). Claims are
		// not applied: nothing sets the pod's resourceClaims they name.
		container.WithResources(corev1ac.ResourceRequirements().WithRequests(r.Requests).WithLimits(r.Limits))
	}
	if c.EnableSecurityContext {
		container.WithSecurityContext(podspec.ContainerSecurityContext())
	}

	podLabels := e.defaultLabels()
	podLabels[children.NameLabel] = name
	podLabels[mzlabels.App] = environmentdApp
	for k, v := range podspec.Recommended(environmentdApp) {
		podLabels[k] = v
	}
	for k, v := range s.PodLabels {
		podLabels[k] = v
	}
	annotations := map[string]string{
		// Not evictable until environmentd is highly available.
		"cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
		"karpenter.sh/do-not-evict":                      "true",
		"karpenter.sh/do-not-disrupt":                    "true",
		GenerationAnnotation:                             strconv.FormatUint(gen, 10),
	}
	if c.EnablePrometheusScrapeAnnotations {
		annotations["prometheus.io/scrape"] = "true"
		annotations["prometheus.io/port"] = strconv.Itoa(int(c.InternalHTTPPort))
		annotations["prometheus.io/path"] = "/metrics"
		annotations["prometheus.io/scheme"] = "http"
		for _, m := range []string{"usage", "frontier", "compute", "storage"} {
			annotations["materialize.prometheus.io/mz_"+m+"_path"] = "/metrics/mz_" + m
		}
	}
	for k, v := range s.PodAnnotations {
		annotations[k] = v
	}
	// Leave a NotReady or unreachable node after 30 s instead of 5 min.
	tolerations := []*corev1ac.TolerationApplyConfiguration{
		corev1ac.Toleration().WithEffect(corev1.TaintEffectNoExecute).WithKey("node.kubernetes.io/not-ready").
			WithOperator(corev1.TolerationOpExists).WithTolerationSeconds(30),
		corev1ac.Toleration().WithEffect(corev1.TaintEffectNoExecute).WithKey("node.kubernetes.io/unreachable").
			WithOperator(corev1.TolerationOpExists).WithTolerationSeconds(30),
	}
	for _, t := range c.environmentdTolerations {
		tolerations = append(tolerations, convert[corev1ac.TolerationApplyConfiguration](t))
	}
	nodeSelector := map[string]string{}
	for _, kv := range mustKeyValues(c.EnvironmentdNodeSelector) {
		nodeSelector[kv.key] = kv.value
	}
	podSpec := corev1ac.PodSpec().
		WithContainers(container).
		WithNodeSelector(nodeSelector).
		WithServiceAccountName(e.serviceAccountName()).
		WithVolumes(volumes...).
		WithSecurityContext(corev1ac.PodSecurityContext().WithFSGroup(999).WithRunAsUser(999).WithRunAsGroup(999)).
		WithTolerations(tolerations...).
		// A replacement pod may start while the old one terminates:
		// environmentd fences older processes itself, through the catalog.
		WithTerminationGracePeriodSeconds(0)
	if c.environmentdAffinity != nil {
		podSpec.WithAffinity(convert[corev1ac.AffinityApplyConfiguration](c.environmentdAffinity))
	}
	if c.SchedulerName != "" {
		podSpec.WithSchedulerName(c.SchedulerName)
	}
	podSpec.WithImagePullSecrets(podspec.PullSecrets(c.ImagePullSecrets)...)
	return appsv1ac.StatefulSet(name, e.ns()).WithLabels(e.labels()).WithOwnerReferences(e.owner()).
		WithAnnotations(map[string]string{GenerationAnnotation: strconv.FormatUint(gen, 10), ForceAnnotation: e.forceRolloutValue()}).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(1).
			WithServiceName(e.environmentdName()).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{children.NameLabel: name})).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(podLabels).WithAnnotations(annotations).WithSpec(podSpec)))
}

func firstResources(rs ...*corev1.ResourceRequirements) *corev1.ResourceRequirements {
	for _, r := range rs {
		if r != nil {
			return r
		}
	}
	return nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// withoutNullResources drops the sides of its containers' resources that
// were not set, or set empty: a null or {} the live object never holds
// would make the no-op check differ for ever, and the StatefulSet be
// applied on every pass of a rollout.
func withoutNullResources(sts *appsv1ac.StatefulSetApplyConfiguration) {
	if sts.Spec == nil || sts.Spec.Template == nil || sts.Spec.Template.Spec == nil {
		return
	}
	for i := range sts.Spec.Template.Spec.Containers {
		r := sts.Spec.Template.Spec.Containers[i].Resources
		if r == nil {
			continue
		}
		if r.Requests != nil && len(*r.Requests) == 0 {
			r.Requests = nil
		}
		if r.Limits != nil && len(*r.Limits) == 0 {
			r.Limits = nil
		}
	}
}

// convert copies a typed object into its apply configuration, which mirrors
// it field for field.
func convert[AC any](v any) *AC {
	ac := new(AC)
	if err := json.Unmarshal([]byte(jsonString(v)), ac); err != nil {
		panic(err)
	}
	return ac
}

func jsonString(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(raw)
}

// resourcesHash identifies what a generation would run, independent of its
// number: equal hashes mean a new generation would change nothing.
func (e env) resourcesHash() string {
	g := e.generation(0)
	raw, _ := json.Marshal([]any{g.statefulSet.Spec, g.statefulSet.Annotations, g.service.Spec, g.persistPubSub.Spec, g.listeners.Data})
	sum := sha256.Sum256(raw)
	return rollout.HashScheme + hex.EncodeToString(sum[:])
}
