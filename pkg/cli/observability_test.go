package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/materializeinc/orchestratord/pkg/tracing"
)

func observability(t *testing.T, args ...string) *Observability {
	t.Helper()
	var o Observability
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &o
}

// Both programs' log and trace flags, and what a bad one says.
func TestObservabilityStart(t *testing.T) {
	var buf bytes.Buffer
	log, stop, err := observability(t, "--log-format=text", "--log-prefix=controllers").Start(&buf, "controllers")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hello")
	stop()
	if !strings.HasPrefix(buf.String(), "controllers: ") || tracing.Enabled() {
		t.Errorf("log %q, tracing on %v", buf.String(), tracing.Enabled())
	}
	for args, want := range map[string]string{
		"--log-format=xml":                           "--log-format",
		"--startup-log-filter=mz_orchestratord=lots": "--startup-log-filter",
		"--opentelemetry-endpoint=otel:4317":         "--opentelemetry-endpoint",
	} {
		if _, _, err := observability(t, args).Start(&buf, "webhook"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", args, err, want)
		}
	}
}
