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

func TestMemoryLimitKeepsTheHeapUnder90Percent(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	applyMemoryLimit(1000 << 20)
	if got := debug.SetMemoryLimit(-1); got != 900<<20 {
		t.Errorf("memory limit = %d, want %d", got, 900<<20)
	}
	t.Setenv("GOMEMLIMIT", "500MiB") // the user's choice wins
	applyMemoryLimit(2000 << 20)
	if got := debug.SetMemoryLimit(-1); got != 900<<20 {
		t.Errorf("memory limit = %d with GOMEMLIMIT set, want it untouched", got)
	}
}
