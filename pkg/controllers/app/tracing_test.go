package app

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The controllers pass their tracing endpoint (when it speaks gRPC, as
// environmentd does; without a user or password in it) and Sentry settings
// on to environmentd, as upstream.
func TestTracingPassedToEnvironmentd(t *testing.T) {
	for _, tc := range []struct {
		args                   []string
		endpoint, dsn, sentEnv string
	}{
		{nil, "", "", ""},
		{[]string{"--opentelemetry-endpoint=http://otel:4317"}, "http://otel:4317", "", ""},
		// The collector's credentials are the operator's: tenants read
		// environmentd's pod spec.
		{[]string{"--opentelemetry-endpoint=https://user:s3cret@otel:4317/x"}, "https://otel:4317/x", "", ""},
		{[]string{"--opentelemetry-endpoint=http://user:s3cret@otel:4317/%zz"}, "", "", ""},
		{[]string{"--opentelemetry-endpoint=user:s3cret@otel:4317"}, "", "", ""},
		{[]string{"--opentelemetry-endpoint=http://otel:4318", "--opentelemetry-protocol=http/protobuf"}, "", "", ""},
		{[]string{"--sentry-dsn=https://k@sentry.example/1", "--sentry-environment=prod"}, "", "https://k@sentry.example/1", "prod"},
	} {
		o := &Options{Controllers: knownControllers, EnvironmentdClusterRole: "role", LeaderElectionNamespace: "ops", LeaderElectionIdentity: "pod"}
		fs := pflag.NewFlagSet("controllers", pflag.ContinueOnError)
		o.Observability.AddFlags(fs)
		o.Environment.AddFlags(fs)
		if err := fs.Parse(append([]string{"--cloud-provider=local", "--region=kind"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		if err := o.complete(); err != nil {
			t.Fatal(err)
		}
		if e := o.Environment; e.OpenTelemetryEndpoint != tc.endpoint || e.SentryDSN != tc.dsn || e.SentryEnvironment != tc.sentEnv {
			t.Errorf("%q: environmentd gets endpoint %q, Sentry %q %q", tc.args, e.OpenTelemetryEndpoint, e.SentryDSN, e.SentryEnvironment)
		}
	}
}

// A controller named twice in --controllers (the flag appends: the chart's
// list and an extra argument) is refused: two campaigns for one Lease with
// one identity would both lead it.
func TestAControllerNamedTwiceIsRefused(t *testing.T) {
	o := &Options{Controllers: []string{"materialize", "balancer", "console", "balancer"}, EnvironmentdClusterRole: "role",
		LeaderElectionNamespace: "ops", LeaderElectionIdentity: "pod"}
	if err := o.complete(); err == nil || !strings.Contains(err.Error(), `"balancer" is named twice`) {
		t.Errorf("complete() = %v, want balancer named twice", err)
	}
}
