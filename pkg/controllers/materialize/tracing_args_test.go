package materialize

import (
	"slices"
	"strings"
	"testing"

	"github.com/materializeinc/orchestratord/pkg/imageref"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

// The operator's --opentelemetry-endpoint and Sentry settings reach
// environmentd where upstream's generation.rs puts them (the endpoint after
// --log-format=json, Sentry's after the system parameters, with the region
// as a tag), and environmentd's parser (the stand-in's, upstream's clap
// table) accepts them; without them nothing is passed.
func TestTracingArgs(t *testing.T) {
	e := testEnv(testMaterialize("materialize/environmentd:v26.35.0", ""))
	traced := func(a string) bool {
		return strings.HasPrefix(a, "--opentelemetry-endpoint") || strings.HasPrefix(a, "--sentry-")
	}
	if args := e.generationArgs(1); slices.ContainsFunc(args, traced) {
		t.Errorf("tracing flags by default: %q", args)
	}
	cfg, err := configFrom(t, "--region=east")
	if err != nil {
		t.Fatal(err)
	}
	cfg.OpenTelemetryEndpoint, cfg.SentryDSN, cfg.SentryEnvironment = "http://otel-collector:4317", "https://k@sentry.example/1", "prod"
	e.cfg = cfg
	args := e.generationArgs(1)
	for _, want := range [][]string{
		{"--log-format=json", "--opentelemetry-endpoint=http://otel-collector:4317", "--opentelemetry-resource=organization_id=" + e.organizationID()},
		{"--sentry-dsn=https://k@sentry.example/1", "--sentry-environment=prod", "--sentry-tag=region=east", "--persist-pubsub-url=http://" + e.persistPubSubName(1) + ":6879"},
	} {
		i := slices.Index(args, want[0])
		if i < 0 || len(args) < i+len(want) || !slices.Equal(args[i:i+len(want)], want) {
			t.Errorf("args %q, want %q in a row", args, want)
		}
	}
	sts, cms := render(t, e, 1)
	argv, lookup, read := podInput(t, sts, cms, secrets())
	if _, exit := standin.Check(imageref.MustParseVersion("26.35.0"), argv, lookup, read); exit != nil {
		t.Errorf("environmentd refuses the generation: exit %d: %s", exit.Code, exit.Message)
	}
	cfg.SentryEnvironment = ""
	if args := e.generationArgs(1); slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--sentry-environment") }) {
		t.Errorf("--sentry-environment without one: %q", args)
	}
}
