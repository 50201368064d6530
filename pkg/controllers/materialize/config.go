package materialize

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/materializeinc/orchestratord/pkg/certificates"
	"github.com/materializeinc/orchestratord/pkg/controllers/podspec"
)

// Config is how every environment is run: the settings upstream
// orchestratord takes as operator flags (src/orchestratord/src/bin/
// orchestratord.rs). Flag names and defaults are upstream's, so a user's
// existing values carry over.
type Config struct {
	CloudProvider     string
	Region            string
	HelmChartVersion  string
	SecretsController string

	CollectPodMetrics                 bool
	EnablePrometheusScrapeAnnotations bool
	EnableSecurityContext             bool
	EnableInternalStatementLogging    bool
	DisableStatementLogging           bool

	AWSAccountID                  string
	EnvironmentdIAMRoleARN        string
	EnvironmentdConnectionRoleARN string
	AWSSecretsControllerTags      []string
	EnvironmentdAvailabilityZones []string

	EphemeralVolumeClass string
	SchedulerName        string
	ImagePullPolicy      string
	// ImagePullSecrets name Secrets in each environment's namespace: the
	// imagePullSecrets of environmentd's, balancerd's and the console's
	// pods and of the ServiceAccount the operator creates for environmentd,
	// which clusterd's pods run as. Upstream has no such flag.
	ImagePullSecrets []string

	// SegmentAPIKey and SegmentClientSide are passed to environmentd as
	// upstream passes them (--segment-api-key, --segment-client-side): its
	// usage telemetry, sent by the console from the browser when client
	// side. Empty sends none.
	SegmentAPIKey     string
	SegmentClientSide bool

	// OpenTelemetryEndpoint, SentryDSN and SentryEnvironment are the
	// operator's own --opentelemetry-endpoint, --sentry-dsn and
	// --sentry-environment (pkg/tracing's flags, set by the controllers),
	// passed on to environmentd as upstream passes them. Empty passes none.
	OpenTelemetryEndpoint        string
	SentryDSN, SentryEnvironment string

	// OperatorNamespace and OperatorPodSelectorLabels let the operator's own
	// pods through the internal network policies to the leader API.
	OperatorNamespace         string
	OperatorPodSelectorLabels []string

	EnvironmentdNodeSelector     []string
	EnvironmentdAffinityJSON     string
	EnvironmentdTolerationsJSON  []string
	EnvironmentdDefaultResources string
	ClusterdNodeSelector         []string
	ClusterdAffinityJSON         string
	ClusterdTolerationsJSON      []string

	NetworkPoliciesInternalEnabled bool
	NetworkPoliciesIngressEnabled  bool
	NetworkPoliciesIngressCIDRs    []string
	NetworkPoliciesEgressEnabled   bool
	NetworkPoliciesEgressCIDRs     []string

	ClusterReplicaSizes                             string
	BootstrapDefaultClusterReplicaSize              string
	BootstrapBuiltinSystemClusterReplicaSize        string
	BootstrapBuiltinProbeClusterReplicaSize         string
	BootstrapBuiltinSupportClusterReplicaSize       string
	BootstrapBuiltinCatalogServerClusterReplicaSize string
	BootstrapBuiltinAnalyticsClusterReplicaSize     string
	// Replication factors are strings so that "unset" (no flag passed to
	// environmentd) differs from 0.
	BootstrapBuiltinSystemClusterReplicationFactor    string
	BootstrapBuiltinProbeClusterReplicationFactor     string
	BootstrapBuiltinSupportClusterReplicationFactor   string
	BootstrapBuiltinAnalyticsClusterReplicationFactor string

	AllowedOrigins          []string
	InternalConsoleProxyURL string

	// The console's image tag: the map's value for the active environmentd
	// tag, else the default, else environmentd's own tag.
	ConsoleImageTagDefault string
	ConsoleImageTagMap     []string

	SQLPort, HTTPPort, InternalSQLPort, InternalHTTPPort, PersistPubSubPort int32

	// balancerd and console pods (the Balancer and Console controllers).
	BalancerdNodeSelector, ConsoleNodeSelector         []string
	BalancerdAffinityJSON, ConsoleAffinityJSON         string
	BalancerdTolerationsJSON, ConsoleTolerationsJSON   []string
	BalancerdDefaultResources, ConsoleDefaultResources string
	BalancerdSQLPort, BalancerdHTTPPort                int32
	BalancerdInternalHTTPPort, ConsoleHTTPPort         int32
	// DefaultCertificateSpecs is upstream's --default-certificate-specs
	// (JSON: balancerdExternal, consoleExternal, internal).
	DefaultCertificateSpecs string

	// Parsed by Complete.
	balancerdPods, consolePods podspec.PodSettings
	certificates               certificates.Defaults
	replicaSizes               map[string]replicaSize
	environmentdAffinity       *corev1.Affinity
	environmentdTolerations    []corev1.Toleration
	environmentdResources      *corev1.ResourceRequirements
	clusterdAffinity           *corev1.Affinity
	clusterdTolerations        []corev1.Toleration
}

// DefaultClusterReplicaSizes is what upstream's Helm chart passes as
// --environmentd-cluster-replica-sizes with its default values (the sizes
// 25cc to 6400cc and mz_probe, swap enabled): environmentd refuses to start
// without sizes, so the operator has the chart's by default.
//
//go:embed default_cluster_replica_sizes.json
var DefaultClusterReplicaSizes string

// DefaultAllowedOrigins are upstream's --environmentd-allowed-origins.
var DefaultAllowedOrigins = []string{
	"http://local.dev.materialize.com:3000", "http://local.mtrlz.com:3000",
	"http://localhost:3000", "https://staging.console.materialize.com",
}

// DefaultConfig is Config with upstream's defaults, as AddFlags sets them.
func DefaultConfig() Config {
	c := Config{}
	fs := pflag.NewFlagSet("defaults", pflag.ContinueOnError)
	c.AddFlags(fs)
	// The program requires both, as upstream's; a development cluster's.
	c.CloudProvider, c.Region = "local", "kind"
	if err := c.Complete(); err != nil {
		panic(err) // the defaults are valid
	}
	return c
}

// AddFlags registers the environment flags under upstream's names.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	// Required, as upstream's: a default would give every environment of a
	// production install a development cluster's environment id.
	fs.StringVar(&c.CloudProvider, "cloud-provider", "", "cloud provider of the environments: local, aws, gcp, azure or generic (required: part of environmentd's --environment-id)")
	fs.StringVar(&c.Region, "region", "", "region of the environments (required: part of environmentd's --environment-id; AWS_REGION of environmentd)")
	fs.StringVar(&c.HelmChartVersion, "helm-chart-version", "", "passed to environmentd as --helm-chart-version")
	fs.StringVar(&c.SecretsController, "secrets-controller", "kubernetes", "environmentd's --secrets-controller")
	fs.BoolVar(&c.CollectPodMetrics, "collect-pod-metrics", false, "let environmentd collect clusterd pod metrics (else --orchestrator-kubernetes-disable-pod-metrics-collection)")
	fs.BoolVar(&c.EnablePrometheusScrapeAnnotations, "enable-prometheus-scrape-annotations", false, "annotate environmentd and clusterd pods for Prometheus scraping")
	fs.BoolVar(&c.EnableSecurityContext, "enable-security-context", false, "run environmentd with the restricted container security context")
	fs.BoolVar(&c.EnableInternalStatementLogging, "enable-internal-statement-logging", false, "environmentd system parameter enable_internal_statement_logging=true")
	fs.BoolVar(&c.DisableStatementLogging, "disable-statement-logging", false, "environmentd system parameter statement_logging_max_sample_rate=0")
	fs.StringVar(&c.AWSAccountID, "aws-account-id", "", "AWS account of the environments (required with --cloud-provider=aws)")
	fs.StringVar(&c.EnvironmentdIAMRoleARN, "environmentd-iam-role-arn", "", "default eks.amazonaws.com/role-arn of environmentd's ServiceAccount (AWS)")
	fs.StringVar(&c.EnvironmentdConnectionRoleARN, "environmentd-connection-role-arn", "", "default --aws-connection-role-arn of environmentd (AWS)")
	fs.StringArrayVar(&c.AWSSecretsControllerTags, "aws-secrets-controller-tags", nil, "extra arguments for environmentd's AWS secrets controller tags (AWS; repeatable)")
	fs.StringArrayVar(&c.EnvironmentdAvailabilityZones, "environmentd-availability-zones", nil, "availability zones passed to environmentd as --availability-zone (AWS; repeatable)")
	fs.StringVar(&c.EphemeralVolumeClass, "ephemeral-volume-class", "", "storage class of clusterd's ephemeral volumes")
	fs.StringVar(&c.SchedulerName, "scheduler-name", "", "scheduler of environmentd and clusterd pods")
	fs.StringVar(&c.ImagePullPolicy, "image-pull-policy", "always", "image pull policy of environmentd and clusterd: always, if-not-present or never")
	fs.StringSliceVar(&c.ImagePullSecrets, "image-pull-secrets", nil,
		"Secrets in each environment's namespace pulling the images of environmentd, balancerd and the console, and of clusterd through environmentd's ServiceAccount (comma-separated or repeated)")
	fs.StringVar(&c.SegmentAPIKey, "segment-api-key", "", "environmentd's --segment-api-key (usage telemetry); empty sends none")
	fs.BoolVar(&c.SegmentClientSide, "segment-client-side", false, "environmentd's --segment-client-side (with --segment-api-key): the console sends telemetry from the browser")
	fs.StringVar(&c.OperatorNamespace, "orchestratord-namespace", "", "namespace of the operator's pods, admitted by the internal network policies; empty means the pod's namespace")
	fs.StringArrayVar(&c.OperatorPodSelectorLabels, "orchestratord-pod-selector-labels", nil, "KEY=VALUE labels of the operator's pods, admitted to environmentd's HTTP ports by the internal network policies (repeatable)")
	fs.StringArrayVar(&c.EnvironmentdNodeSelector, "environmentd-node-selector", nil, "KEY=VALUE node selector of environmentd pods (repeatable)")
	fs.StringVar(&c.EnvironmentdAffinityJSON, "environmentd-affinity", "", "affinity of environmentd pods (JSON)")
	fs.StringArrayVar(&c.EnvironmentdTolerationsJSON, "environmentd-toleration", nil, "toleration of environmentd pods (JSON; repeatable)")
	fs.StringVar(&c.EnvironmentdDefaultResources, "environmentd-default-resources", "", "resources of environmentd when spec.environmentdResourceRequirements is unset (JSON)")
	fs.StringArrayVar(&c.ClusterdNodeSelector, "clusterd-node-selector", nil, "KEY=VALUE node selector of clusterd pods (repeatable)")
	fs.StringVar(&c.ClusterdAffinityJSON, "clusterd-affinity", "", "affinity of clusterd pods (JSON)")
	fs.StringArrayVar(&c.ClusterdTolerationsJSON, "clusterd-toleration", nil, "toleration of clusterd pods (JSON; repeatable)")
	fs.BoolVar(&c.NetworkPoliciesInternalEnabled, "network-policies-internal-enabled", false, "create network policies that allow traffic within each environment and from the operator")
	fs.BoolVar(&c.NetworkPoliciesIngressEnabled, "network-policies-ingress-enabled", false, "create a network policy admitting --network-policies-ingress-cidrs to SQL and HTTP")
	fs.StringArrayVar(&c.NetworkPoliciesIngressCIDRs, "network-policies-ingress-cidrs", nil, "CIDRs admitted to SQL and HTTP (repeatable)")
	fs.BoolVar(&c.NetworkPoliciesEgressEnabled, "network-policies-egress-enabled", false, "create a network policy limiting egress to --network-policies-egress-cidrs")
	fs.StringArrayVar(&c.NetworkPoliciesEgressCIDRs, "network-policies-egress-cidrs", nil, "CIDRs environments may reach (repeatable)")
	fs.StringVar(&c.ClusterReplicaSizes, "environmentd-cluster-replica-sizes", "",
		"environmentd's --cluster-replica-sizes (JSON map of size name to size); empty means the sizes of upstream's Helm chart")
	// Defaults are upstream's Helm chart's; "none" passes nothing.
	for _, f := range []struct {
		v         *string
		name, def string
	}{
		{&c.BootstrapDefaultClusterReplicaSize, "bootstrap-default-cluster-replica-size", "25cc"},
		{&c.BootstrapBuiltinSystemClusterReplicaSize, "bootstrap-builtin-system-cluster-replica-size", "25cc"},
		{&c.BootstrapBuiltinProbeClusterReplicaSize, "bootstrap-builtin-probe-cluster-replica-size", "mz_probe"},
		{&c.BootstrapBuiltinSupportClusterReplicaSize, "bootstrap-builtin-support-cluster-replica-size", "25cc"},
		{&c.BootstrapBuiltinCatalogServerClusterReplicaSize, "bootstrap-builtin-catalog-server-cluster-replica-size", "25cc"},
		{&c.BootstrapBuiltinAnalyticsClusterReplicaSize, "bootstrap-builtin-analytics-cluster-replica-size", "25cc"},
		{&c.BootstrapBuiltinSystemClusterReplicationFactor, "bootstrap-builtin-system-cluster-replication-factor", "0"},
		{&c.BootstrapBuiltinProbeClusterReplicationFactor, "bootstrap-builtin-probe-cluster-replication-factor", "0"},
		{&c.BootstrapBuiltinSupportClusterReplicationFactor, "bootstrap-builtin-support-cluster-replication-factor", "0"},
		{&c.BootstrapBuiltinAnalyticsClusterReplicationFactor, "bootstrap-builtin-analytics-cluster-replication-factor", "0"},
	} {
		fs.StringVar(f.v, f.name, f.def, "passed to environmentd as --"+f.name+`; "none" passes nothing`)
	}
	fs.StringArrayVar(&c.AllowedOrigins, "environmentd-allowed-origins", DefaultAllowedOrigins, "environmentd's --cors-allowed-origin values (repeatable)")
	fs.StringVar(&c.InternalConsoleProxyURL, "internal-console-proxy-url", "https://console.materialize.com", "environmentd's --internal-console-redirect-url")
	fs.StringVar(&c.ConsoleImageTagDefault, "console-image-tag-default", "", "console image tag when --console-image-tag-map has none for the environmentd tag; empty means the environmentd image's tag")
	fs.StringArrayVar(&c.ConsoleImageTagMap, "console-image-tag-map", nil, "ENVIRONMENTD_TAG=CONSOLE_TAG: the console image tag for an environmentd image tag (repeatable)")
	fs.Int32Var(&c.SQLPort, "environmentd-sql-port", 6875, "environmentd's SQL port")
	fs.Int32Var(&c.HTTPPort, "environmentd-http-port", 6876, "environmentd's HTTP port")
	fs.Int32Var(&c.InternalSQLPort, "environmentd-internal-sql-port", 6877, "environmentd's internal SQL port")
	fs.Int32Var(&c.InternalHTTPPort, "environmentd-internal-http-port", 6878, "environmentd's internal HTTP port (leader API without authentication)")
	fs.Int32Var(&c.PersistPubSubPort, "environmentd-internal-persist-pubsub-port", 6879, "environmentd's persist pub-sub port")
	for _, comp := range []struct {
		name                      string
		nodeSelector, tolerations *[]string
		affinity, resources       *string
	}{
		{"balancerd", &c.BalancerdNodeSelector, &c.BalancerdTolerationsJSON, &c.BalancerdAffinityJSON, &c.BalancerdDefaultResources},
		{"console", &c.ConsoleNodeSelector, &c.ConsoleTolerationsJSON, &c.ConsoleAffinityJSON, &c.ConsoleDefaultResources},
	} {
		fs.StringArrayVar(comp.nodeSelector, comp.name+"-node-selector", nil, "KEY=VALUE node selector of "+comp.name+" pods (repeatable)")
		fs.StringVar(comp.affinity, comp.name+"-affinity", "", "affinity of "+comp.name+" pods (JSON)")
		fs.StringArrayVar(comp.tolerations, comp.name+"-toleration", nil, "toleration of "+comp.name+" pods (JSON; repeatable)")
		fs.StringVar(comp.resources, comp.name+"-default-resources", "", "resources of "+comp.name+" when its custom resource sets none (JSON)")
	}
	fs.Int32Var(&c.BalancerdSQLPort, "balancerd-sql-port", 6875, "balancerd's SQL port")
	fs.Int32Var(&c.BalancerdHTTPPort, "balancerd-http-port", 6876, "balancerd's HTTP port (the console's API endpoint)")
	fs.Int32Var(&c.BalancerdInternalHTTPPort, "balancerd-internal-http-port", 8080, "balancerd's internal HTTP port (probes, metrics)")
	fs.Int32Var(&c.ConsoleHTTPPort, "console-http-port", 8080, "the console's HTTP port")
	fs.StringVar(&c.DefaultCertificateSpecs, "default-certificate-specs", "{}",
		"JSON {balancerdExternal, consoleExternal, internal}: cert-manager certificate specs for environments that set none (fields they leave unset)")
}

// BalancerdPods are the operator-wide settings of balancerd pods.
func (c *Config) BalancerdPods() podspec.PodSettings { return c.balancerdPods }

// ConsolePods are the operator-wide settings of console pods.
func (c *Config) ConsolePods() podspec.PodSettings { return c.consolePods }

// Certificates are the parsed --default-certificate-specs.
func (c *Config) Certificates() certificates.Defaults { return c.certificates }

var cloudProviders = map[string]bool{"local": true, "docker": true, "mzcompose": true, "cloudtest": true,
	"aws": true, "gcp": true, "azure": true, "generic": true}

// Complete validates the flags and parses their JSON values.
func (c *Config) Complete() error {
	c.CloudProvider = strings.ToLower(c.CloudProvider)
	if c.CloudProvider == "" {
		return fmt.Errorf("--cloud-provider is required: aws, gcp, azure or generic where the environments run (local for a development cluster); it is part of every environment's id")
	}
	if !cloudProviders[c.CloudProvider] {
		return fmt.Errorf("--cloud-provider: %q is not one of local, docker, mzcompose, cloudtest, aws, gcp, azure, generic", c.CloudProvider)
	}
	if c.Region == "" {
		return fmt.Errorf("--region is required: the region the environments run in (kind for a development cluster); it is part of every environment's id")
	}
	if c.CloudProvider == "aws" && c.AWSAccountID == "" {
		return fmt.Errorf("--aws-account-id is required when using --cloud-provider=aws")
	}
	if _, ok := pullPolicies[c.ImagePullPolicy]; !ok {
		return fmt.Errorf("--image-pull-policy: %q is not one of always, if-not-present, never", c.ImagePullPolicy)
	}
	for _, name := range c.ImagePullSecrets {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("--image-pull-secrets: %q is not a Secret name: %s", name, strings.Join(errs, "; "))
		}
	}
	// In a fixed order, so that of two bad values the same one is named.
	for _, f := range []struct {
		flag string
		kvs  []string
	}{{"--orchestratord-pod-selector-labels", c.OperatorPodSelectorLabels},
		{"--balancerd-node-selector", c.BalancerdNodeSelector}, {"--console-node-selector", c.ConsoleNodeSelector},
		{"--environmentd-node-selector", c.EnvironmentdNodeSelector}, {"--clusterd-node-selector", c.ClusterdNodeSelector},
		{"--console-image-tag-map", c.ConsoleImageTagMap}} {
		if _, err := keyValues(f.kvs); err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	// Upstream's port flags are u16s, which its command line refuses
	// beyond; port 0 no Service or probe takes either.
	for _, p := range []struct {
		flag string
		port int32
	}{{"--environmentd-sql-port", c.SQLPort}, {"--environmentd-http-port", c.HTTPPort},
		{"--environmentd-internal-sql-port", c.InternalSQLPort}, {"--environmentd-internal-http-port", c.InternalHTTPPort},
		{"--environmentd-internal-persist-pubsub-port", c.PersistPubSubPort}, {"--balancerd-sql-port", c.BalancerdSQLPort},
		{"--balancerd-http-port", c.BalancerdHTTPPort}, {"--balancerd-internal-http-port", c.BalancerdInternalHTTPPort},
		{"--console-http-port", c.ConsoleHTTPPort}} {
		if p.port < 1 || p.port > 65535 {
			return fmt.Errorf("%s: %d is not a port (1-65535)", p.flag, p.port)
		}
	}
	if c.ClusterReplicaSizes == "" {
		c.ClusterReplicaSizes = DefaultClusterReplicaSizes
	}
	sizes, err := parseReplicaSizes(c.ClusterReplicaSizes)
	if err != nil {
		return fmt.Errorf("--environmentd-cluster-replica-sizes: %w", err)
	}
	c.replicaSizes = sizes
	for _, v := range []*string{&c.BootstrapDefaultClusterReplicaSize, &c.BootstrapBuiltinSystemClusterReplicaSize,
		&c.BootstrapBuiltinProbeClusterReplicaSize, &c.BootstrapBuiltinSupportClusterReplicaSize,
		&c.BootstrapBuiltinCatalogServerClusterReplicaSize, &c.BootstrapBuiltinAnalyticsClusterReplicaSize,
		&c.BootstrapBuiltinSystemClusterReplicationFactor, &c.BootstrapBuiltinProbeClusterReplicationFactor,
		&c.BootstrapBuiltinSupportClusterReplicationFactor, &c.BootstrapBuiltinAnalyticsClusterReplicationFactor} {
		if *v == "none" {
			*v = ""
		}
	}
	// environmentd refuses to boot when the default cluster's size is not
	// offered ("bootstrap default cluster replica size is unknown"); the
	// builtin clusters' sizes are looked up only for replicas it makes.
	if size := c.BootstrapDefaultClusterReplicaSize; size != "" {
		if _, ok := sizes[size]; !ok {
			return fmt.Errorf("--bootstrap-default-cluster-replica-size: %q is not one of --environmentd-cluster-replica-sizes", size)
		}
	}
	if c.environmentdAffinity, err = parseJSON[corev1.Affinity]("--environmentd-affinity", c.EnvironmentdAffinityJSON); err != nil {
		return err
	}
	if c.clusterdAffinity, err = parseJSON[corev1.Affinity]("--clusterd-affinity", c.ClusterdAffinityJSON); err != nil {
		return err
	}
	if c.environmentdResources, err = parseJSON[corev1.ResourceRequirements]("--environmentd-default-resources", c.EnvironmentdDefaultResources); err != nil {
		return err
	}
	if c.environmentdTolerations, err = parseTolerations("--environmentd-toleration", c.EnvironmentdTolerationsJSON); err != nil {
		return err
	}
	if c.clusterdTolerations, err = parseTolerations("--clusterd-toleration", c.ClusterdTolerationsJSON); err != nil {
		return err
	}
	if c.balancerdPods, err = c.podSettings("balancerd", c.BalancerdNodeSelector, c.BalancerdAffinityJSON, c.BalancerdTolerationsJSON, c.BalancerdDefaultResources); err != nil {
		return err
	}
	if c.consolePods, err = c.podSettings("console", c.ConsoleNodeSelector, c.ConsoleAffinityJSON, c.ConsoleTolerationsJSON, c.ConsoleDefaultResources); err != nil {
		return err
	}
	if c.certificates, err = certificates.ParseDefaults(c.DefaultCertificateSpecs); err != nil {
		return err
	}
	for flag, v := range map[string]string{
		"--bootstrap-builtin-system-cluster-replication-factor":    c.BootstrapBuiltinSystemClusterReplicationFactor,
		"--bootstrap-builtin-probe-cluster-replication-factor":     c.BootstrapBuiltinProbeClusterReplicationFactor,
		"--bootstrap-builtin-support-cluster-replication-factor":   c.BootstrapBuiltinSupportClusterReplicationFactor,
		"--bootstrap-builtin-analytics-cluster-replication-factor": c.BootstrapBuiltinAnalyticsClusterReplicationFactor,
	} {
		var n uint32
		if _, err := fmt.Sscan(v, &n); v != "" && (err != nil || fmt.Sprint(n) != v) {
			return fmt.Errorf("%s: %q is not a non-negative integer", flag, v)
		}
	}
	return nil
}

// podSettings parses one component's flags; the pull policy and secrets,
// scheduler, security context and scrape annotations are the operator's.
func (c *Config) podSettings(name string, nodeSelector []string, affinity string, tolerations []string, resources string) (podspec.PodSettings, error) {
	s := podspec.PodSettings{
		ImagePullPolicy:  pullPolicies[c.ImagePullPolicy],
		ImagePullSecrets: c.ImagePullSecrets,
		SchedulerName:    c.SchedulerName,
		SecurityContext:  c.EnableSecurityContext,
		PrometheusScrape: c.EnablePrometheusScrapeAnnotations,
	}
	if len(nodeSelector) > 0 {
		s.NodeSelector = map[string]string{}
		for _, kv := range mustKeyValues(nodeSelector) {
			s.NodeSelector[kv.key] = kv.value
		}
	}
	var err error
	if s.Affinity, err = parseJSON[corev1.Affinity]("--"+name+"-affinity", affinity); err != nil {
		return s, err
	}
	if s.Tolerations, err = parseTolerations("--"+name+"-toleration", tolerations); err != nil {
		return s, err
	}
	if s.DefaultResources, err = parseJSON[corev1.ResourceRequirements]("--"+name+"-default-resources", resources); err != nil {
		return s, err
	}
	return s, nil
}

// pullPolicies maps upstream's kebab-case policy to Kubernetes' value.
var pullPolicies = map[string]corev1.PullPolicy{
	"always": corev1.PullAlways, "if-not-present": corev1.PullIfNotPresent, "never": corev1.PullNever,
}

func parseJSON[T any](flag, raw string) (*T, error) {
	if raw == "" {
		return nil, nil
	}
	var v T
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return &v, nil
}

func parseTolerations(flag string, raws []string) ([]corev1.Toleration, error) {
	var out []corev1.Toleration
	for _, raw := range raws {
		t, err := parseJSON[corev1.Toleration](flag, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, *t)
	}
	return out, nil
}

// keyValue is one KEY=VALUE flag value, in the order given.
type keyValue struct{ key, value string }

func keyValues(kvs []string) ([]keyValue, error) {
	out := make([]keyValue, 0, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not KEY=VALUE", kv)
		}
		out = append(out, keyValue{k, v})
	}
	return out, nil
}

func mustKeyValues(kvs []string) []keyValue {
	out, err := keyValues(kvs)
	if err != nil {
		panic(err) // Complete has checked them
	}
	return out
}

// isCloud is upstream's CloudProvider::is_cloud.
func (c *Config) isCloud() bool {
	switch c.CloudProvider {
	case "aws", "gcp", "azure", "generic":
		return true
	}
	return false
}
