package clap

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// env returns a lookup over a fixed environment.
func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// goodEnvironmentd is the command line upstream's orchestratord builds for
// a Kubernetes environmentd (src/orchestratord/src/controller/materialize/
// generation.rs, create_environmentd_statefulset_object), with the
// secrets it passes in the environment.
func goodEnvironmentd() ([]string, func(string) (string, bool)) {
	args := []string{
		"--helm-chart-version=v26.0.0",
		"--environment-id=local-az1-9f00a1b2-0000-4000-8000-000000000001-0",
		"--clusterd-image=materialize/clusterd:v26.0.0",
		`--cluster-replica-sizes={"25cc":{"workers":1,"scale":1,"credits_per_hour":"0.25"}}`,
		"--bootstrap-default-cluster-replica-size=25cc",
		"--bootstrap-builtin-system-cluster-replica-size=25cc",
		"--bootstrap-builtin-probe-cluster-replica-size=25cc",
		"--bootstrap-builtin-support-cluster-replica-size=25cc",
		"--bootstrap-builtin-catalog-server-cluster-replica-size=25cc",
		"--bootstrap-builtin-analytics-cluster-replica-size=25cc",
		"--bootstrap-builtin-system-cluster-replication-factor=1",
		"--bootstrap-builtin-probe-cluster-replication-factor=1",
		"--bootstrap-builtin-support-cluster-replication-factor=1",
		"--bootstrap-builtin-analytics-cluster-replication-factor=1",
		"--cors-allowed-origin=https://console.example.com",
		"--secrets-controller=kubernetes",
		"--system-parameter-default=allowed_cluster_replica_sizes='25cc'",
		"--system-parameter-default=cluster_enable_topology_spread=false",
		"--system-parameter-default=enable_rbac_checks=false",
		"--persist-isolated-runtime-threads=-1",
		"--orchestrator=kubernetes",
		"--orchestrator-kubernetes-service-account=mz-abc",
		"--orchestrator-kubernetes-image-pull-policy=if-not-present",
		"--orchestrator-kubernetes-service-node-selector=kubernetes.io/arch=amd64",
		"--orchestrator-kubernetes-service-label=materialize.cloud/organization-name=abc",
		"--orchestrator-kubernetes-name-prefix=mzabc-",
		"--log-format=json",
		"--opentelemetry-resource=organization_id=9f00a1b2-0000-4000-8000-000000000001",
		"--opentelemetry-resource=environment_name=abc",
		"--tls-mode=disable",
		"--orchestrator-kubernetes-service-fs-group=999",
		"--config-sync-file-path=/system-params/system-params.json",
		"--config-sync-loop-interval=1s",
		"--persist-pubsub-url=http://mzabc-persist-pubsub-1:6879",
		"--internal-persist-pubsub-listen-addr=0.0.0.0:6879",
		"--deploy-generation=1",
		"--internal-console-redirect-url=http://console.materialize.svc.cluster.local:8080/internal-console",
		"--orchestrator-kubernetes-disable-pod-metrics-collection",
		"--listeners-config-path=/listeners/listeners.json",
		"--system-parameter-default=enable_password_auth=true",
	}
	return args, env(
		"MZ_METADATA_BACKEND_URL", "postgres://mz@db/mz",
		"MZ_PERSIST_BLOB_URL", "s3://bucket/path",
		"AWS_REGION", "us-east-1",
		"MZ_LICENSE_KEY", "/license_key/license_key",
		"MZ_EXTERNAL_LOGIN_PASSWORD_MZ_SYSTEM", "secret",
	)
}

func without(args []string, prefix string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, prefix) {
			out = append(out, a)
		}
	}
	return out
}

// parseErr parses and wants an *Error whose text is want.
func parseErr(t *testing.T, cmd *Command, args []string, lookup func(string) (string, bool), kind ErrorKind, want string) {
	t.Helper()
	_, err := Parse(cmd, args, lookup)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Parse(%q) = %v, want error %q", args, err, want)
	}
	if e.Error() != want || e.Kind != kind {
		t.Errorf("Parse(%q) error (kind %d):\n%s\nwant (kind %d):\n%s", args, e.Kind, e.Error(), kind, want)
	}
}

func TestGoodEnvironmentdCommandLine(t *testing.T) {
	args, lookup := goodEnvironmentd()
	m, err := Parse(Environmentd, args, lookup)
	if err != nil {
		t.Fatalf("the command line orchestratord builds is refused: %v", err)
	}
	for name, want := range map[string]string{
		"environment-id":                      "local-az1-9f00a1b2-0000-4000-8000-000000000001-0",
		"listeners-config-path":               "/listeners/listeners.json",
		"tls-mode":                            "disable",
		"orchestrator":                        "kubernetes",
		"deploy-generation":                   "1",
		"persist-pubsub-url":                  "http://mzabc-persist-pubsub-1:6879",
		"internal-persist-pubsub-listen-addr": "0.0.0.0:6879",
		"persist-blob-url":                    "s3://bucket/path", // from MZ_PERSIST_BLOB_URL
		"license-key":                         "/license_key/license_key",
		"metadata-backend-url":                "postgres://mz@db/mz",
		"orchestrator-kubernetes-disable-pod-metrics-collection": "true",
		"unsafe-mode":                     "false", // a flag's implied default
		"orchestrator-kubernetes-context": "minikube",
		"log-format":                      "json",
		"startup-log-filter":              "info",
	} {
		if got, ok := m.Get(name); !ok || got != want {
			t.Errorf("--%s = %q, %v; want %q", name, got, ok, want)
		}
	}
	if got, want := m.All("system-parameter-default"), []string{
		"allowed_cluster_replica_sizes='25cc'", "cluster_enable_topology_spread=false",
		"enable_rbac_checks=false", "enable_password_auth=true",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("--system-parameter-default = %q, want %q", got, want)
	}
	if got := m.Sources["persist-blob-url"]; got != FromEnv {
		t.Errorf("persist-blob-url source = %v, want FromEnv", got)
	}
	if m.Explicit("orchestrator-kubernetes-context") || !m.Explicit("license-key") {
		t.Errorf("Explicit: defaults must not count, environment values must")
	}

	// The listeners config replaced the listen-address flags.
	parseErr(t, Environmentd, append(args, "--internal-http-listen-addr=0.0.0.0:6878"), lookup,
		UnknownArgument, "error: unexpected argument '--internal-http-listen-addr' found")
}

func TestEnvironmentdTable(t *testing.T) {
	arg := func(name string) *Arg {
		t.Helper()
		a := Lookup(Environmentd, name)
		if a == nil {
			t.Fatalf("--%s is missing from the environmentd table", name)
		}
		return a
	}
	if got, want := Required(Environmentd), []string{
		"cluster_replica_sizes", "environment_id", "listeners_config_path", "orchestrator", "persist_blob_url",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("required environmentd arguments = %q, want %q", got, want)
	}
	if a := arg("environment-id"); !a.Required || a.Env != "MZ_ENVIRONMENT_ID" || a.ValueName != "<CLOUD>-<REGION>-<ORG-ID>-<ORDINAL>" {
		t.Errorf("--environment-id = %+v", a)
	}
	if a := arg("cluster-replica-sizes"); !a.Required || a.Env != "MZ_CLUSTER_REPLICA_SIZES" ||
		!reflect.DeepEqual(a.Requires, []string{"bootstrap_default_cluster_replica_size"}) {
		t.Errorf("--cluster-replica-sizes = %+v", a)
	}
	// --clusterd-image is required only with --orchestrator=kubernetes and
	// defaults to "clusterd" with --orchestrator=process.
	if a := arg("clusterd-image"); a.Required || a.Env != "MZ_CLUSTERD_IMAGE" ||
		!reflect.DeepEqual(a.RequiredIfEq, []Cond{{Arg: "orchestrator", Value: "kubernetes"}}) ||
		!reflect.DeepEqual(a.DefaultIf, []DefaultIf{{Arg: "orchestrator", Equals: "process", Value: "clusterd"}}) {
		t.Errorf("--clusterd-image = %+v", a)
	}
	if a := arg("listeners-config-path"); !a.Required || a.Parser.Kind != Path || a.ValueName != "PATH" {
		t.Errorf("--listeners-config-path = %+v", a)
	}
	if a := arg("orchestrator"); a.Parser.Kind != Enum ||
		!reflect.DeepEqual(a.Parser.Values, []PossibleValue{{Name: "kubernetes"}, {Name: "process"}}) {
		t.Errorf("--orchestrator = %+v", a)
	}
	if a := arg("deploy-generation"); a.Required || !reflect.DeepEqual(a.Default, []string{"0"}) || a.Env != "MZ_DEPLOY_GENERATION" {
		t.Errorf("--deploy-generation = %+v", a)
	}
	if a := arg("persist-pubsub-url"); !reflect.DeepEqual(a.Default, []string{"http://localhost:6879"}) || a.Env != "MZ_PERSIST_PUBSUB_URL" {
		t.Errorf("--persist-pubsub-url = %+v", a)
	}
	if a := arg("license-key"); a.Required || a.Env != "MZ_LICENSE_KEY" || a.Action != Set {
		t.Errorf("--license-key = %+v", a)
	}
	if a := arg("tls-mode"); a.Env != "MZ_TLS_MODE" || !reflect.DeepEqual(a.Default, []string{"disable"}) ||
		!reflect.DeepEqual(a.Parser.Values, []PossibleValue{{Name: "disable"}, {Name: "require"}}) {
		t.Errorf("--tls-mode = %+v", a)
	}
	if a := arg("orchestrator-kubernetes-image-pull-policy"); !reflect.DeepEqual(a.Parser.Values,
		[]PossibleValue{{Name: "always"}, {Name: "if-not-present"}, {Name: "never"}}) {
		t.Errorf("--orchestrator-kubernetes-image-pull-policy = %+v", a)
	}
	if a := arg("unsafe-mode"); a.Action != SetTrue || a.Env != "MZ_UNSAFE_MODE" {
		t.Errorf("--unsafe-mode = %+v", a)
	}
	if a := arg("availability-zone"); a.Action != Append || a.Delimiter != ',' {
		t.Errorf("--availability-zone = %+v", a)
	}
	// TracingCliArgs, flattened, gets the prefix too; tokio-console is a
	// default feature.
	for _, name := range []string{"log-format", "startup-log-filter", "opentelemetry-endpoint", "tokio-console-listen-addr"} {
		if a := arg(name); a.Env != "MZ_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_")) {
			t.Errorf("--%s env = %q", name, a.Env)
		}
	}
	for _, gone := range []string{"internal-http-listen-addr", "scratch-directory", "sql-listen-addr", "http-listen-addr"} {
		if Lookup(Environmentd, gone) != nil {
			t.Errorf("--%s is in the environmentd table", gone)
		}
	}
	if !Environmentd.Version || !Environmentd.ArgsOverrideSelf {
		t.Errorf("environmentd: Version=%v ArgsOverrideSelf=%v, want both", Environmentd.Version, Environmentd.ArgsOverrideSelf)
	}
}

func TestUnknownArgument(t *testing.T) {
	args, lookup := goodEnvironmentd()
	for _, tc := range []struct{ arg, want string }{
		{"--foo", "error: unexpected argument '--foo' found"},
		{"--foo=bar", "error: unexpected argument '--foo' found"},
		{"bogus", "error: unexpected argument 'bogus' found"},
		{"-x", "error: unexpected argument '-x' found"},
		{"-", "error: unexpected argument '-' found"},
	} {
		parseErr(t, Environmentd, append(args, tc.arg), lookup, UnknownArgument, tc.want)
	}
	// A value-taking option does not swallow a following option, and a
	// negative number is not a value either.
	parseErr(t, Environmentd, append(args, "--persist-isolated-runtime-threads", "-1"), lookup,
		UnknownArgument, "error: unexpected argument '-1' found")
}

func TestFlagGivenAValue(t *testing.T) {
	args, lookup := goodEnvironmentd()
	parseErr(t, Environmentd, append(args, "--unsafe-mode=true"), lookup,
		TooManyValues, "error: unexpected value 'true' for '--unsafe-mode' found; no more were expected")
	// "--flag true": the flag is set and "true" is a stray positional.
	parseErr(t, Environmentd, append(args, "--unsafe-mode", "true"), lookup,
		UnknownArgument, "error: unexpected argument 'true' found")
}

func TestMissingValue(t *testing.T) {
	args, lookup := goodEnvironmentd()
	parseErr(t, Environmentd, append(args, "--environment-id"), lookup,
		InvalidValue, "error: a value is required for '--environment-id <<CLOUD>-<REGION>-<ORG-ID>-<ORDINAL>>' but none was supplied")
	parseErr(t, Environmentd, append(without(args, "--orchestrator="), "--orchestrator", "--log-format=json"), lookup,
		InvalidValue, "error: a value is required for '--orchestrator <ORCHESTRATOR>' but none was supplied\n  [possible values: kubernetes, process]")
	// PathBuf refuses an empty value.
	parseErr(t, Environmentd, append(args, "--listeners-config-path="), lookup,
		InvalidValue, "error: a value is required for '--listeners-config-path <PATH>' but none was supplied")
	// "--" does not give a value.
	parseErr(t, Environmentd, append(args, "--helm-chart-version", "--"), lookup,
		InvalidValue, "error: a value is required for '--helm-chart-version <HELM_CHART_VERSION>' but none was supplied")
}

func TestMissingRequired(t *testing.T) {
	args, lookup := goodEnvironmentd()
	parseErr(t, Environmentd, without(args, "--cluster-replica-sizes="), lookup, MissingRequiredArgument,
		"error: the following required arguments were not provided:\n  --cluster-replica-sizes <CLUSTER_REPLICA_SIZES>")
	// --cluster-replica-sizes requires --bootstrap-default-cluster-replica-size
	// explicitly: its default does not count.
	parseErr(t, Environmentd, without(args, "--bootstrap-default-cluster-replica-size="), lookup, MissingRequiredArgument,
		"error: the following required arguments were not provided:\n  --bootstrap-default-cluster-replica-size <BOOTSTRAP_DEFAULT_CLUSTER_REPLICA_SIZE>")
	// Nothing at all: clap lists the required graph in definition order,
	// each argument after what it requires.
	parseErr(t, Environmentd, nil, nil, MissingRequiredArgument,
		"error: the following required arguments were not provided:\n"+
			"  --listeners-config-path <PATH>\n"+
			"  --orchestrator <ORCHESTRATOR>\n"+
			"  --persist-blob-url <PERSIST_BLOB_URL>\n"+
			"  --bootstrap-default-cluster-replica-size <BOOTSTRAP_DEFAULT_CLUSTER_REPLICA_SIZE>\n"+
			"  --cluster-replica-sizes <CLUSTER_REPLICA_SIZES>\n"+
			"  --environment-id <<CLOUD>-<REGION>-<ORG-ID>-<ORDINAL>>")
	// Conditionally required.
	parseErr(t, Environmentd, without(args, "--clusterd-image="), lookup, MissingRequiredArgument,
		"error: the following required arguments were not provided:\n  --clusterd-image <CLUSTERD_IMAGE>")
	parseErr(t, Environmentd, append(without(args, "--tls-mode="), "--tls-mode=require"), lookup, MissingRequiredArgument,
		"error: the following required arguments were not provided:\n  --tls-cert <PATH>\n  --tls-key <PATH>")
	parseErr(t, Environmentd, append(args, "--unsafe-force-builtin-schema-migration=evolution"), lookup, MissingRequiredArgument,
		"error: the following required arguments were not provided:\n  --unsafe-mode")
}

func TestProcessOrchestratorDefaults(t *testing.T) {
	args, lookup := goodEnvironmentd()
	args = without(without(without(args, "--orchestrator="), "--clusterd-image="), "--secrets-controller=")
	args = append(args, "--orchestrator=process")
	parseErr(t, Environmentd, args, lookup, MissingRequiredArgument,
		"error: the following required arguments were not provided:\n  --orchestrator-process-secrets-directory <PATH>")
	m, err := Parse(Environmentd, append(args, "--orchestrator-process-secrets-directory=/tmp/s"), lookup)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"clusterd-image": "clusterd", "secrets-controller": "local-file"} {
		if got, _ := m.Get(name); got != want || m.Explicit(name) {
			t.Errorf("--%s = %q (explicit %v), want default %q", name, got, m.Explicit(name), want)
		}
	}
}

func TestInvalidValue(t *testing.T) {
	args, lookup := goodEnvironmentd()
	parseErr(t, Environmentd, append(without(args, "--orchestrator="), "--orchestrator=x"), lookup,
		InvalidValue, "error: invalid value 'x' for '--orchestrator <ORCHESTRATOR>'\n  [possible values: kubernetes, process]")
	parseErr(t, Environmentd, append(args, "--deploy-generation=x"), lookup,
		ValueValidation, "error: invalid value 'x' for '--deploy-generation <DEPLOY_GENERATION>': invalid digit found in string")
	parseErr(t, Environmentd, append(args, "--deploy-generation=-1"), lookup,
		ValueValidation, "error: invalid value '-1' for '--deploy-generation <DEPLOY_GENERATION>': invalid digit found in string")
	parseErr(t, Environmentd, append(args, "--bootstrap-builtin-system-cluster-replication-factor=3"), lookup,
		ValueValidation, "error: invalid value '3' for '--bootstrap-builtin-system-cluster-replication-factor <BOOTSTRAP_BUILTIN_SYSTEM_CLUSTER_REPLICATION_FACTOR>': 3 is not in 0..=2")
	parseErr(t, Environmentd, append(args, "--orchestrator-kubernetes-service-fs-group=99999999999999999999"), lookup,
		ValueValidation, "error: invalid value '99999999999999999999' for '--orchestrator-kubernetes-service-fs-group <ORCHESTRATOR_KUBERNETES_SERVICE_FS_GROUP>': number too large to fit in target type")
	// Environment values go through the same parsers; flags take true/false.
	parseErr(t, Environmentd, args, env("MZ_UNSAFE_MODE", "1", "MZ_PERSIST_BLOB_URL", "s3://b"),
		InvalidValue, "error: invalid value '1' for '--unsafe-mode'\n  [possible values: true, false]")
	parseErr(t, Environmentd, without(args, "--orchestrator="), env("MZ_ORCHESTRATOR", "", "MZ_PERSIST_BLOB_URL", "s3://b"),
		InvalidValue, "error: a value is required for '--orchestrator <ORCHESTRATOR>' but none was supplied\n  [possible values: kubernetes, process]")
}

func TestRepeatedArguments(t *testing.T) {
	args, lookup := goodEnvironmentd()
	// mz_ore::cli::parse_args sets args_override_self(true): the last wins.
	m, err := Parse(Environmentd, append(args, "--environment-id=aws-us-east-1-9f00a1b2-0000-4000-8000-000000000002-1", "--unsafe-mode", "--unsafe-mode"), lookup)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.All("environment-id"); !reflect.DeepEqual(got, []string{"aws-us-east-1-9f00a1b2-0000-4000-8000-000000000002-1"}) {
		t.Errorf("--environment-id = %q, want the last one only", got)
	}
	// Append arguments keep every occurrence, split at their delimiter.
	m, err = Parse(Environmentd, append(args, "--availability-zone=a,b", "--availability-zone", "c"), lookup)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.All("availability-zone"); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("--availability-zone = %q", got)
	}
	// Without args_override_self clap refuses a repeat.
	cmd := &Command{Name: "x", Args: []*Arg{
		{ID: "x", Long: "x", Action: Set, ValueName: "X"},
		{ID: "v", Long: "verbose", Action: SetTrue},
	}}
	parseErr(t, cmd, []string{"--x=1", "--x", "2"}, nil, ArgumentConflict, "error: the argument '--x <X>' cannot be used multiple times")
	parseErr(t, cmd, []string{"--verbose", "--verbose"}, nil, ArgumentConflict, "error: the argument '--verbose' cannot be used multiple times")
}

// Two valid environment ids, for the environment and the command line.
const (
	envEnvironmentID = "gcp-europe-west1-9f00a1b2-0000-4000-8000-000000000003-2"
	cliEnvironmentID = "azure-eastus2-9f00a1b2-0000-4000-8000-000000000004-3"
)

func TestEnvFallback(t *testing.T) {
	args, _ := goodEnvironmentd()
	args = without(without(args, "--environment-id="), "--listeners-config-path=")
	lookup := env(
		"MZ_PERSIST_BLOB_URL", "s3://b",
		"MZ_ENVIRONMENT_ID", envEnvironmentID,
		"MZ_LISTENERS_CONFIG_PATH", "/env/listeners.json",
		"ENVIRONMENT_ID", "unprefixed", // not read: the prefix is MZ_
		"MZ_AVAILABILITY_ZONE", "z1,z2",
		"MZ_UNSAFE_MODE", "true",
	)
	m, err := Parse(Environmentd, args, lookup)
	if err != nil {
		t.Fatalf("environment values must satisfy required arguments: %v", err)
	}
	for name, want := range map[string][]string{
		"environment-id":        {envEnvironmentID},
		"listeners-config-path": {"/env/listeners.json"},
		"availability-zone":     {"z1", "z2"},
		"unsafe-mode":           {"true"},
	} {
		if got := m.All(name); !reflect.DeepEqual(got, want) || m.Sources[name] != FromEnv {
			t.Errorf("--%s = %q from %v, want %q from the environment", name, got, m.Sources[name], want)
		}
	}
	// The command line wins.
	m, err = Parse(Environmentd, append(args, "--environment-id="+cliEnvironmentID, "--listeners-config-path=/l"), lookup)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Get("environment-id"); got != cliEnvironmentID || m.Sources["environment-id"] != FromCommandLine {
		t.Errorf("--environment-id = %q, want the command line's", got)
	}
	// Environment values count as present for conflicts.
	parseErr(t, Environmentd, append(args, "--persist-consensus-url=postgres://c", "--environment-id="+cliEnvironmentID, "--listeners-config-path=/l"),
		env("MZ_PERSIST_BLOB_URL", "s3://b", "MZ_METADATA_BACKEND_URL", "postgres://m"), ArgumentConflict,
		"error: the argument '--persist-consensus-url <PERSIST_CONSENSUS_URL>' cannot be used with '--metadata-backend-url <METADATA_BACKEND_URL>'")
}

func TestDoubleDashAndHelp(t *testing.T) {
	args, lookup := goodEnvironmentd()
	if _, err := Parse(Environmentd, append(args, "--"), lookup); err != nil {
		t.Errorf("a trailing -- is accepted: %v", err)
	}
	parseErr(t, Environmentd, append(args, "--", "--tls-mode=disable"), lookup,
		UnknownArgument, "error: unexpected argument '--tls-mode=disable' found")
	for _, h := range []string{"-h", "--help"} {
		parseErr(t, Environmentd, append(args, h), lookup, DisplayHelp, "help for environmentd")
	}
	for _, v := range []string{"-V", "--version"} {
		parseErr(t, Environmentd, []string{v}, nil, DisplayVersion, "version of environmentd")
	}
	parseErr(t, Balancerd, []string{"--version"}, nil, UnknownArgument, "error: unexpected argument '--version' found")
}

func TestPositionalsAndShorts(t *testing.T) {
	cmd := &Command{Name: "p", Args: []*Arg{
		{ID: "verbose", Short: 'v', Action: SetTrue},
		{ID: "quiet", Short: 'q', Action: SetTrue},
		{ID: "name", Long: "name", Short: 'n', Action: Set, ValueName: "NAME"},
		{ID: "src", Action: Set, ValueName: "SRC", Required: true},
		{ID: "rest", Action: Append, ValueName: "REST"},
	}}
	m, err := Parse(cmd, []string{"-vq", "-nfoo", "a", "--", "-b", "c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Values; !reflect.DeepEqual(got, map[string][]string{
		"verbose": {"true"}, "quiet": {"true"}, "name": {"foo"}, "src": {"a"}, "rest": {"-b", "c"},
	}) {
		t.Errorf("values = %q", got)
	}
	for _, form := range [][]string{{"-n", "x"}, {"-n=x"}, {"-nx"}, {"--name", "x"}, {"--name=x"}} {
		m, err := Parse(cmd, append(form, "s"), nil)
		if err != nil {
			t.Fatalf("%q: %v", form, err)
		}
		if got, _ := m.Get("name"); got != "x" {
			t.Errorf("%q: name = %q", form, got)
		}
	}
	parseErr(t, cmd, []string{"-vx", "a"}, nil, UnknownArgument, "error: unexpected argument '-x' found")
	parseErr(t, cmd, nil, nil, MissingRequiredArgument, "error: the following required arguments were not provided:\n  <SRC>")
}

func TestBalancerd(t *testing.T) {
	// src/orchestratord/src/controller/balancer.rs, static routing.
	good := []string{
		"service",
		"--pgwire-listen-addr=0.0.0.0:6875",
		"--https-listen-addr=0.0.0.0:6876",
		"--internal-http-listen-addr=0.0.0.0:8080",
		"--https-resolver-template=mzabc-environmentd.materialize.svc.cluster.local:6876",
		"--static-resolver-addr=mzabc-environmentd.materialize.svc.cluster.local:6875",
		"--tls-mode=disable",
	}
	m, err := Parse(Balancerd, good, nil)
	if err != nil {
		t.Fatalf("the command line orchestratord builds is refused: %v", err)
	}
	if m.Subcommand == nil || m.Subcommand.Command != "service" {
		t.Fatalf("subcommand = %+v", m.Subcommand)
	}
	if got, _ := m.Subcommand.Get("https-sni-resolver-template"); got != "mzabc-environmentd.materialize.svc.cluster.local:6876" {
		t.Errorf("--https-sni-resolver-template (given as its alias) = %q", got)
	}
	if got, _ := m.Subcommand.Get("internal-http-listen-addr"); got != "0.0.0.0:8080" {
		t.Errorf("--internal-http-listen-addr = %q", got)
	}
	// The tracing flags belong to the top-level command: before "service".
	if _, err := Parse(Balancerd, append([]string{"--log-format=json"}, good...), nil); err != nil {
		t.Errorf("--log-format before service: %v", err)
	}
	parseErr(t, Balancerd, append(good, "--log-format=json"), nil, UnknownArgument, "error: unexpected argument '--log-format' found")
	// No env prefix for balancerd.
	m, err = Parse(Balancerd, good, env("LOG_FORMAT", "json", "TLS_MODE", "require"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Get("log-format"); got != "json" {
		t.Errorf("LOG_FORMAT: --log-format = %q", got)
	}
	parseErr(t, Balancerd, without(good, "--static-resolver-addr="), nil, MissingRequiredArgument,
		"error: the following required arguments were not provided:\n  --cancellation-resolver-dir </path/to/configmap/dir/>")
	parseErr(t, Balancerd, append(good, "--frontegg-resolver-template=x.{}.y:1"), nil, ArgumentConflict,
		"error: the argument '--static-resolver-addr <HOST:PORT>' cannot be used with '--frontegg-resolver-template <HOST.{}.NAME:PORT>'")
	parseErr(t, Balancerd, nil, nil, DisplayHelpOnMissingArgumentOrSubcommand, "help for balancerd")
	parseErr(t, Balancerd, []string{"--log-format=json"}, nil, MissingSubcommand,
		"error: 'balancerd' requires a subcommand but one was not provided\n  [subcommands: service, help]")
	parseErr(t, Balancerd, []string{"serve"}, nil, InvalidSubcommand, "error: unrecognized subcommand 'serve'")
	parseErr(t, Balancerd, []string{"help"}, nil, DisplayHelp, "help for balancerd")
	parseErr(t, Balancerd, []string{"service", "--help"}, nil, DisplayHelp, "help for service")
}
