package cli

import (
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestApplyEnvFillsUnsetFlagsOnly(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	addr := fs.String("listen-address", ":9443", "")
	drain := fs.Duration("shutdown-drain", time.Second, "")
	mode := fs.String("tls-mode", "self-signed", "")
	if err := fs.Parse([]string{"--tls-mode=secret"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"ORCHESTRATORD_LISTEN_ADDRESS": ":1234",
		"ORCHESTRATORD_SHUTDOWN_DRAIN": "7s",
		"ORCHESTRATORD_TLS_MODE":       "cert-manager",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := ApplyEnv(fs, lookup); err != nil {
		t.Fatal(err)
	}
	if *addr != ":1234" || *drain != 7*time.Second {
		t.Errorf("env not applied: listen-address=%q shutdown-drain=%v", *addr, *drain)
	}
	if *mode != "secret" {
		t.Errorf("the command line must win over the environment, got tls-mode=%q", *mode)
	}
}

func TestApplyEnvReportsBadValueWithVariableName(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.Duration("shutdown-drain", time.Second, "")
	err := ApplyEnv(fs, func(k string) (string, bool) {
		if k == "ORCHESTRATORD_SHUTDOWN_DRAIN" {
			return "soon", true
		}
		return "", false
	})
	if err == nil || !strings.Contains(err.Error(), "ORCHESTRATORD_SHUTDOWN_DRAIN") {
		t.Fatalf("want an error naming the variable, got %v", err)
	}
}

// Some variables are set from Secrets (the chart's OpenTelemetry header):
// a value that does not parse is not quoted back.
func TestApplyEnvDoesNotQuoteTheValue(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.StringSlice("opentelemetry-header", nil, "")
	err := ApplyEnv(fs, func(k string) (string, bool) {
		if k == "ORCHESTRATORD_OPENTELEMETRY_HEADER" {
			return `Authorization=Basic "czNjcmV0`, true
		}
		return "", false
	})
	if err == nil || !strings.Contains(err.Error(), "ORCHESTRATORD_OPENTELEMETRY_HEADER") || strings.Contains(err.Error(), "czNjcmV0") {
		t.Fatalf("want an error naming the variable, not its value; got %v", err)
	}
}

func TestMemoryLimitLeavesRoomForTheExecutable(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(exe)
	if err != nil {
		t.Fatal(err)
	}
	applyMemoryLimit(4000 << 20)
	if got, want := debug.SetMemoryLimit(-1), int64(3600<<20)-info.Size(); got != want {
		t.Errorf("memory limit = %d, want 90%% less the executable's %d bytes: %d", got, info.Size(), want)
	}
	if got := goMemoryLimit(256<<20, 30<<20); got != 256<<20/10*9-30<<20 {
		t.Errorf("goMemoryLimit(256 MiB, 30 MiB) = %d", got)
	}
	if got := goMemoryLimit(64<<20, 60<<20); got != 16<<20 {
		t.Errorf("goMemoryLimit(64 MiB, 60 MiB) = %d, want a quarter of the limit", got)
	}
	t.Setenv("GOMEMLIMIT", "500MiB") // the user's choice wins
	applyMemoryLimit(2000 << 20)
	if got := debug.SetMemoryLimit(-1); got != int64(3600<<20)-info.Size() {
		t.Errorf("memory limit = %d with GOMEMLIMIT set, want it untouched", got)
	}
}
