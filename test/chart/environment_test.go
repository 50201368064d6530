package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/materializeinc/orchestratord/pkg/controllers/app"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
)

// controllersArgs renders the chart and returns the controllers' container
// args.
func controllersArgs(t *testing.T, args ...string) []string {
	t.Helper()
	objs := render(t, "ops", args...)
	dep := find(objs, "Deployment", "orchestratord-controllers")
	if dep == nil {
		t.Fatal("no controllers Deployment")
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	var out []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// flagValues returns the values of every --name=value among args, in order.
func flagValues(args []string, name string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			return true
		}
	}
	return false
}

func oneFlag(t *testing.T, args []string, name string) string {
	t.Helper()
	v := flagValues(args, name)
	if len(v) != 1 {
		t.Fatalf("--%s given %d times, want once: %q", name, len(v), args)
	}
	return v[0]
}

func jsonEqual(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: rendered value is not JSON: %v\n%s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func chartVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ Version string }
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c.Version
}

// Default values pass upstream's chart's environment flags.
func TestDefaultEnvironmentArgs(t *testing.T) {
	args := controllersArgs(t)
	for name, want := range map[string]string{
		"helm-chart-version":                                     chartVersion(t),
		"cloud-provider":                                         "local",
		"region":                                                 "kind",
		"secrets-controller":                                     "kubernetes",
		"orchestratord-namespace":                                "ops",
		"image-pull-policy":                                      "if-not-present", // upstream chart: kebabcase of IfNotPresent
		"bootstrap-default-cluster-replica-size":                 "25cc",
		"bootstrap-builtin-system-cluster-replica-size":          "25cc",
		"bootstrap-builtin-probe-cluster-replica-size":           "mz_probe",
		"bootstrap-builtin-support-cluster-replica-size":         "25cc",
		"bootstrap-builtin-catalog-server-cluster-replica-size":  "25cc",
		"bootstrap-builtin-analytics-cluster-replica-size":       "25cc",
		"bootstrap-builtin-system-cluster-replication-factor":    "0",
		"bootstrap-builtin-probe-cluster-replication-factor":     "0",
		"bootstrap-builtin-support-cluster-replication-factor":   "0",
		"bootstrap-builtin-analytics-cluster-replication-factor": "0",
	} {
		if got := oneFlag(t, args, name); got != want {
			t.Errorf("--%s=%s, want %s", name, got, want)
		}
	}
	for _, name := range []string{"disable-statement-logging", "enable-internal-statement-logging",
		"enable-security-context", "enable-prometheus-scrape-annotations"} {
		if !hasFlag(args, name) {
			t.Errorf("no --%s", name)
		}
	}
	for _, name := range []string{"aws-account-id", "environmentd-iam-role-arn", "environmentd-connection-role-arn",
		"collect-pod-metrics", "network-policies-internal-enabled", "network-policies-ingress-enabled",
		"network-policies-egress-enabled", "network-policies-ingress-cidrs", "network-policies-egress-cidrs",
		"scheduler-name", "ephemeral-volume-class", "environmentd-node-selector", "environmentd-affinity",
		"environmentd-toleration", "clusterd-node-selector", "clusterd-affinity", "clusterd-toleration"} {
		if hasFlag(args, name) {
			t.Errorf("--%s rendered with default values: %q", name, flagValues(args, name))
		}
	}
	jsonEqual(t, "--environmentd-default-resources", oneFlag(t, args, "environmentd-default-resources"),
		`{"limits":{"memory":"4Gi"},"requests":{"cpu":"1","memory":"4095Mi"}}`)

	// The internal NetworkPolicies admit exactly the controllers' pods.
	objs := render(t, "ops")
	selector, _, _ := unstructured.NestedStringMap(find(objs, "Deployment", "orchestratord-controllers").Object,
		"spec", "selector", "matchLabels")
	var want []string
	for k, v := range selector {
		want = append(want, k+"="+v)
	}
	sort.Strings(want)
	if got := flagValues(args, "orchestratord-pod-selector-labels"); !reflect.DeepEqual(got, want) {
		t.Errorf("--orchestratord-pod-selector-labels %q, want the controllers' selector %q", got, want)
	}
}

// The chart's default sizes are the binary's built-in default: a user of the
// chart and one of the plain binary get the same sizes.
func TestDefaultClusterReplicaSizesMatchBinary(t *testing.T) {
	args := controllersArgs(t)
	jsonEqual(t, "--environmentd-cluster-replica-sizes (chart defaults vs pkg/controllers/materialize/default_cluster_replica_sizes.json)",
		oneFlag(t, args, "environmentd-cluster-replica-sizes"), materialize.DefaultClusterReplicaSizes)
}

// With a storage class and without swap, sizes keep their disk and get the
// scratch-fs node selector, as upstream's processClusterSizes does.
func TestClusterSizesWithStorageClass(t *testing.T) {
	args := controllersArgs(t, "--set", "storage.storageClass.name=local-nvme,clusters.swap_enabled=false")
	var sizes map[string]map[string]any
	if err := json.Unmarshal([]byte(oneFlag(t, args, "environmentd-cluster-replica-sizes")), &sizes); err != nil {
		t.Fatal(err)
	}
	got := sizes["25cc"]
	if got["disk_limit"] != "7762MiB" || got["swap_enabled"] != false || got["is_cc"] != true ||
		!reflect.DeepEqual(got["selectors"], map[string]any{"materialize.cloud/scratch-fs": "true"}) {
		t.Errorf("25cc with a storage class and no swap: %v", got)
	}
	if v := oneFlag(t, args, "ephemeral-volume-class"); v != "local-nvme" {
		t.Errorf("--ephemeral-volume-class=%s", v)
	}
	// A size's own swap_enabled wins over clusters.swap_enabled.
	args = controllersArgs(t, "--set", "storage.storageClass.name=local-nvme,clusters.swap_enabled=false,clusters.sizes.50cc.swap_enabled=true")
	if err := json.Unmarshal([]byte(oneFlag(t, args, "environmentd-cluster-replica-sizes")), &sizes); err != nil {
		t.Fatal(err)
	}
	if got := sizes["50cc"]; got["swap_enabled"] != true || got["disk_limit"] != "15525MiB" ||
		!reflect.DeepEqual(got["selectors"], map[string]any{"materialize.cloud/swap": "true"}) {
		t.Errorf("50cc with its own swap_enabled: %v", got)
	}
}

func TestAWSArgs(t *testing.T) {
	const (
		account = "123456789012"
		envRole = "arn:aws:iam::123456789012:role/environmentd"
		conRole = "arn:aws:iam::123456789012:role/connections"
	)
	set := "cloudProvider.providers.aws.accountID=" + account +
		",cloudProvider.providers.aws.iam.roles.environment=" + envRole +
		",cloudProvider.providers.aws.iam.roles.connection=" + conRole + ",cloudProvider.region=us-east-1"
	// --set-string: an account id is a string (it may start with 0).
	args := controllersArgs(t, "--set-string", "cloudProvider.type=aws,"+set)
	for name, want := range map[string]string{"cloud-provider": "aws", "region": "us-east-1", "aws-account-id": account,
		"environmentd-iam-role-arn": envRole, "environmentd-connection-role-arn": conRole} {
		if got := oneFlag(t, args, name); got != want {
			t.Errorf("--%s=%s, want %s", name, got, want)
		}
	}
	// As upstream: the AWS settings apply only to the aws provider.
	args = controllersArgs(t, "--set-string", "cloudProvider.type=gcp,"+set)
	for _, name := range []string{"aws-account-id", "environmentd-iam-role-arn", "environmentd-connection-role-arn"} {
		if hasFlag(args, name) {
			t.Errorf("--%s rendered for cloudProvider.type=gcp", name)
		}
	}
}

func TestNetworkPoliciesArgs(t *testing.T) {
	args := controllersArgs(t, "--set", "networkPolicies.enabled=true,networkPolicies.internal.enabled=true")
	if !hasFlag(args, "network-policies-internal-enabled") {
		t.Errorf("no --network-policies-internal-enabled: %q", args)
	}
	for _, name := range []string{"network-policies-ingress-enabled", "network-policies-egress-enabled",
		"network-policies-ingress-cidrs", "network-policies-egress-cidrs"} {
		if hasFlag(args, name) {
			t.Errorf("--%s rendered with only internal policies enabled", name)
		}
	}
	// networkPolicies.enabled gates them all, as upstream.
	args = controllersArgs(t, "--set", "networkPolicies.internal.enabled=true")
	if hasFlag(args, "network-policies-internal-enabled") {
		t.Errorf("--network-policies-internal-enabled rendered without networkPolicies.enabled")
	}
	args = controllersArgs(t, "--set", "networkPolicies.enabled=true,networkPolicies.ingress.enabled=true,networkPolicies.ingress.cidrs={10.0.0.0/8,192.168.0.0/16}")
	if !hasFlag(args, "network-policies-ingress-enabled") ||
		!reflect.DeepEqual(flagValues(args, "network-policies-ingress-cidrs"), []string{"10.0.0.0/8", "192.168.0.0/16"}) {
		t.Errorf("ingress policies: %q", args)
	}
}

// Every value of all-options.yaml reaches its flag, JSON values as JSON.
func TestAllOptionsEnvironmentArgs(t *testing.T) {
	args := controllersArgs(t, "-f", "testdata/all-options.yaml")
	for name, want := range map[string][]string{
		"cloud-provider":                                      {"aws"},
		"secrets-controller":                                  {"aws-secrets-manager"},
		"image-pull-policy":                                   {"if-not-present"},
		"bootstrap-default-cluster-replica-size":              {"custom"},
		"bootstrap-builtin-analytics-cluster-replica-size":    {"none"},
		"bootstrap-builtin-system-cluster-replication-factor": {"1"},
		"bootstrap-builtin-probe-cluster-replication-factor":  nil,
		"environmentd-node-selector":                          {"kubernetes.io/os=linux", "pool=environmentd"},
		"clusterd-node-selector":                              {"pool=clusterd"},
		"ephemeral-volume-class":                              {"openebs-lvm-instance-store-ext4"},
		"scheduler-name":                                      {"custom-scheduler"},
		"network-policies-egress-cidrs":                       {"0.0.0.0/0"},
		"console-image-tag-default":                           {"v26.38.1"},
		"console-image-tag-map":                               {"v26.35.0=v26.35.0-console"},
		"image-pull-secrets":                                  {"environments"},
		"segment-api-key":                                     {"test-key"},
	} {
		if got := flagValues(args, name); !reflect.DeepEqual(got, want) {
			t.Errorf("--%s %q, want %q", name, got, want)
		}
	}
	for name, want := range map[string]bool{"collect-pod-metrics": true, "enable-prometheus-scrape-annotations": false,
		"disable-statement-logging": false, "enable-internal-statement-logging": false, "enable-security-context": true,
		"segment-client-side": false} {
		if hasFlag(args, name) != want {
			t.Errorf("--%s rendered: %v, want %v", name, !want, want)
		}
	}
	tolerations := flagValues(args, "environmentd-toleration")
	if len(tolerations) != 2 {
		t.Fatalf("%d --environmentd-toleration, want one per toleration: %q", len(tolerations), tolerations)
	}
	var tol corev1.Toleration
	if err := json.Unmarshal([]byte(tolerations[1]), &tol); err != nil || tol.Key != "spot" || tol.Operator != corev1.TolerationOpExists {
		t.Errorf("--environmentd-toleration=%s: %v %+v", tolerations[1], err, tol)
	}
	var aff corev1.Affinity
	if err := json.Unmarshal([]byte(oneFlag(t, args, "clusterd-affinity")), &aff); err != nil || aff.PodAntiAffinity == nil {
		t.Errorf("--clusterd-affinity: %v %+v", err, aff)
	}
	var sizes map[string]map[string]any
	if err := json.Unmarshal([]byte(oneFlag(t, args, "environmentd-cluster-replica-sizes")), &sizes); err != nil {
		t.Fatal(err)
	}
	if _, ok := sizes["6400cc"]; ok {
		t.Errorf("a size set to null is still rendered")
	}
	if got := sizes["custom"]; got["disk_limit"] != "16GiB" || got["family"] != "custom" ||
		!reflect.DeepEqual(got["selectors"], map[string]any{"pool": "custom", "disk": "nvme", "materialize.cloud/scratch-fs": "true"}) {
		t.Errorf("custom size: %v", got)
	}
}

// The controllers binary accepts and validates every flag the chart renders,
// so the chart cannot pass a flag the binary does not know or a value it
// refuses.
func TestRenderedArgsParse(t *testing.T) {
	for _, values := range [][]string{nil, {"-f", "testdata/all-options.yaml"},
		{"--set", "networkPolicies.enabled=true,networkPolicies.internal.enabled=true,environmentd.imagePullPolicy=Never"},
		{"--set", "telemetry.enabled=true,imagePullSecrets[0].name=registry,console.enabled=false,balancerd.enabled=false,storage.storageClass.name=local"}} {
		args := controllersArgs(t, values...)
		if err := app.NewCommand().ParseFlags(args); err != nil {
			t.Errorf("%v: the controllers refuse the rendered flags: %v", values, err)
			continue
		}
		var c materialize.Config
		fs := pflag.NewFlagSet("environment", pflag.ContinueOnError)
		fs.ParseErrorsAllowlist.UnknownFlags = true // the controllers' other flags
		c.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := c.Complete(); err != nil {
			t.Errorf("%v: the controllers refuse the rendered environment flags: %v", values, err)
		}
	}
}

func TestSchemaRejectsBadEnvironmentValues(t *testing.T) {
	for bad, field := range map[string]string{
		"cloudProvider.type=amazon":                          "cloudProvider/type",
		"cloudProvider.type=aws":                             "cloudProvider/providers/aws/accountID",
		"cloudProvider.providers.aws.accountID=123456789012": "cloudProvider/providers/aws/accountID", // a number, not a string
		"environmentd.imagePullPolicy=always":                "environmentd/imagePullPolicy",
		"secretsController=vault":                            "secretsController",
		"clusters.sizes.25cc.memory_limt=1Gi":                "memory_limt",
		"clusters.defaultReplicationFactor.system=-1":        "clusters/defaultReplicationFactor/system",
		"networkPolicies.ingress.cidr=10.0.0.0/8":            "cidr",
		"observability.podMetric.enabled=true":               "podMetric",
	} {
		out, err := helmRun("template", "orchestratord", chartDir, "--set", bad)
		if err == nil {
			t.Errorf("--set %s rendered; the schema must reject it", bad)
			continue
		}
		if !strings.Contains(out, field) {
			t.Errorf("--set %s: the error does not name %s:\n%s", bad, field, out)
		}
	}
}

// The install notes warn while cloudProvider.type is the chart's default,
// local (it becomes part of every environment's id), and not once a real
// provider and region are set. Notes render only on install or upgrade:
// a client-side dry run against the test's API server (whose CRDs are not
// the release's, so the chart's are left out).
func TestNotesWarnOfTheLocalCloudProvider(t *testing.T) {
	notes := func(args ...string) string {
		t.Helper()
		// Its own release name: other tests here apply the chart's
		// cluster-scoped objects as release orchestratord.
		out, err := helmRun(append([]string{"install", "notes", chartDir, "--namespace", "notes", "--dry-run=client",
			"--kubeconfig", cp.KubeconfigPath, "--set", "crds.enabled=false"}, args...)...)
		if err != nil {
			t.Fatalf("helm install --dry-run=client %v: %v\n%s", args, err, out)
		}
		_, after, ok := strings.Cut(out, "\nNOTES:\n")
		if !ok {
			t.Fatalf("no NOTES in:\n%s", out)
		}
		return after
	}
	const warning = `WARNING: cloudProvider.type is "local" (region "kind")`
	if got := notes(); !strings.Contains(got, warning) {
		t.Errorf("default values: no warning in the notes:\n%s", got)
	}
	if got := notes("--set", "cloudProvider.type=generic,cloudProvider.region=eu-west-1"); strings.Contains(got, "WARNING") {
		t.Errorf("generic, eu-west-1: the notes warn:\n%s", got)
	}
}
