package chart

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/materializeinc/orchestratord/pkg/cli"
	"github.com/materializeinc/orchestratord/pkg/controllers/app"
	webhookapp "github.com/materializeinc/orchestratord/pkg/webhook/app"
)

// containerEnv is a component's container environment by name, each
// variable as its JSON.
func containerEnv(t *testing.T, dep *unstructured.Unstructured) map[string]any {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	env := map[string]any{}
	for _, e := range containers[0].(map[string]any)["env"].([]any) {
		env[e.(map[string]any)["name"].(string)] = e
	}
	return env
}

// tracingOf parses a component's rendered args with its program's own
// command and returns the log and trace flags it read.
func tracingOf(t *testing.T, component string, args []string) cli.Observability {
	t.Helper()
	switch component {
	case "webhook":
		cmd := webhookapp.NewCommand()
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatalf("the webhook refuses its flags: %v", err)
		}
		return observabilityFlags(cmd.Flags())
	default:
		cmd := app.NewCommand()
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatalf("the controllers refuse their flags: %v", err)
		}
		return observabilityFlags(cmd.Flags())
	}
}

// observabilityFlags reads the flags back into the struct they fill.
func observabilityFlags(fs *pflag.FlagSet) cli.Observability {
	get := func(name string) string { return fs.Lookup(name).Value.String() }
	list := func(name string) []string {
		// Both flags are slices; the header's String does not show them.
		values := fs.Lookup(name).Value.(pflag.SliceValue).GetSlice()
		if len(values) == 0 {
			return nil
		}
		return values
	}
	var o cli.Observability
	o.Logging.Filter = get("startup-log-filter")
	o.Tracing.Endpoint, o.Tracing.Protocol = get("opentelemetry-endpoint"), get("opentelemetry-protocol")
	o.Tracing.Headers, o.Tracing.Resource = list("opentelemetry-header"), list("opentelemetry-resource")
	return o
}

// tracing.*: upstream's --startup-log-filter and --opentelemetry-* flags,
// passed to both Deployments, which parse them; nothing by default.
func TestTracingValues(t *testing.T) {
	tracingFlags := func(args []string) []string {
		var out []string
		for _, a := range args {
			if strings.HasPrefix(a, "--opentelemetry-") || strings.HasPrefix(a, "--startup-log-filter") {
				out = append(out, a)
			}
		}
		return out
	}
	objs := render(t, "ops")
	for _, name := range []string{"webhook", "controllers"} {
		dep := component(t, objs, name)
		if got := tracingFlags(containerArgs(t, dep)); got != nil {
			t.Errorf("%s: tracing flags by default: %q", name, got)
		}
		if _, ok := containerEnv(t, dep)["ORCHESTRATORD_OPENTELEMETRY_HEADER"]; ok {
			t.Errorf("%s: headers from a Secret by default", name)
		}
	}

	// Upstream's chart value, and every key.
	objs = render(t, "ops", "-f", valuesFile(t, `tracing:
  startupLogFilter: INFO,mz_orchestratord=TRACE
  opentelemetry:
    endpoint: http://otel-collector.monitoring:4317
    headers: {x-team: db, authorization: "Bearer t0ken"}
    resource: {deployment.environment: prod, k8s.cluster.name: east}
`))
	for _, name := range []string{"webhook", "controllers"} {
		args := containerArgs(t, component(t, objs, name))
		want := []string{"--startup-log-filter=INFO,mz_orchestratord=TRACE", "--opentelemetry-endpoint=http://otel-collector.monitoring:4317",
			"--opentelemetry-protocol=grpc", "--opentelemetry-header=authorization=Bearer t0ken", "--opentelemetry-header=x-team=db",
			"--opentelemetry-resource=deployment.environment=prod", "--opentelemetry-resource=k8s.cluster.name=east"}
		if got := tracingFlags(args); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %q\nwant %q", name, got, want)
		}
		o := tracingOf(t, name, args)
		if o.Logging.Filter != "INFO,mz_orchestratord=TRACE" || o.Tracing.Endpoint != "http://otel-collector.monitoring:4317" ||
			o.Tracing.Protocol != "grpc" || len(o.Tracing.Headers) != 2 || len(o.Tracing.Resource) != 2 {
			t.Errorf("%s parses %+v", name, o)
		}
	}

	// Credentials from a Secret, the other protocol; without an endpoint
	// nothing but the log filter is passed.
	objs = render(t, "ops", "--set", "tracing.opentelemetry.endpoint=https://api.honeycomb.io,tracing.opentelemetry.protocol=http/protobuf,"+
		"tracing.opentelemetry.headersSecret.name=otel,tracing.opentelemetry.headersSecret.key=headers")
	for _, name := range []string{"webhook", "controllers"} {
		dep := component(t, objs, name)
		if got := tracingOf(t, name, containerArgs(t, dep)); got.Tracing.Protocol != "http/protobuf" || got.Tracing.Headers != nil {
			t.Errorf("%s: %+v", name, got.Tracing)
		}
		want := map[string]any{"name": "ORCHESTRATORD_OPENTELEMETRY_HEADER",
			"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "otel", "key": "headers"}}}
		if got := containerEnv(t, dep)["ORCHESTRATORD_OPENTELEMETRY_HEADER"]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	objs = render(t, "ops", "--set", "tracing.startupLogFilter=debug,tracing.opentelemetry.headers.x=y,tracing.opentelemetry.headersSecret.name=s,tracing.opentelemetry.headersSecret.key=k")
	for _, name := range []string{"webhook", "controllers"} {
		dep := component(t, objs, name)
		if got := tracingFlags(containerArgs(t, dep)); !reflect.DeepEqual(got, []string{"--startup-log-filter=debug"}) {
			t.Errorf("%s without an endpoint: %q", name, got)
		}
		if _, ok := containerEnv(t, dep)["ORCHESTRATORD_OPENTELEMETRY_HEADER"]; ok {
			t.Errorf("%s: headers from a Secret without an endpoint", name)
		}
	}
	if out, err := runWith(helm, "lint", "--strict", chartDir, "--set", "tracing.opentelemetry.endpoint=http://c:4317,tracing.opentelemetry.headers.x=y"); err != nil ||
		strings.Contains(out, "[ERROR]") || strings.Contains(out, "[WARNING]") {
		t.Errorf("lint: %v\n%s", err, out)
	}

	// Refused before anything is installed.
	for set, want := range map[string]string{
		"tracing.opentelemetry.endpoint=http://c:4317,tracing.opentelemetry.headers.x=y,tracing.opentelemetry.headersSecret.name=s,tracing.opentelemetry.headersSecret.key=k": "not both",
		"tracing.opentelemetry.endpoint=otel-collector:4317":                                "endpoint",
		"tracing.opentelemetry.protocol=thrift":                                             "protocol",
		"tracing.opentelemetry.headersSecret.name=s":                                        "key",
		"tracing.opentelemetry.headers.bad:name=v":                                          "bad:name",
		"tracing.opentelemetry.resource.a=b\\,c":                                            "resource",
		"tracing.opentelemetry.endpoint=http://c:4317,tracing.opentelemetry.sampler=always": "sampler",
	} {
		if out := renderFails(t, "--set", set); !strings.Contains(out, want) {
			t.Errorf("--set %s: the error does not name %s:\n%s", set, want, out)
		}
	}
}
