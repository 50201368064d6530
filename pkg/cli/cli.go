// Package cli holds what both programs' cobra commands share: environment
// variable fallbacks for flags, the version subcommand and signal handling.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/materializeinc/orchestratord/pkg/version"
)

// EnvPrefix prefixes the environment variable that backs every flag.
const EnvPrefix = "ORCHESTRATORD_"

// EnvName is the environment variable backing a flag: --tls-cert-file is
// ORCHESTRATORD_TLS_CERT_FILE.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// ApplyEnv sets every flag not given on the command line from its
// environment variable, so a flag always wins over the environment.
func ApplyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" || f.Annotations[commandLineOnly] != nil {
			return
		}
		if value, ok := lookup(EnvName(f.Name)); ok {
			if err := fs.Set(f.Name, value); err != nil {
				// Neither the value nor pflag's error, which quotes it: some
				// values come from Secrets.
				errs = append(errs, fmt.Errorf("%s: not a valid %s for --%s (the value is not shown: it may come from a Secret)",
					EnvName(f.Name), f.Value.Type(), f.Name))
			}
		}
	})
	return errors.Join(errs...)
}

var memoryLimit int64

// MemoryLimit is --memory-limit: the container's memory limit in bytes, 0
// when not given.
func MemoryLimit() int64 { return memoryLimit }

// applyMemoryLimit keeps the Go runtime's memory under 90% of the
// container's limit less the executable's size, so the garbage collector
// works harder near it instead of the kernel killing the process: the
// binary's text pages count towards the container's limit (about 25 MiB of
// the webhook's, measured) but not towards Go's, and the rest is for what
// the runtime does not count.
func applyMemoryLimit(limit int64) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set || limit <= 0 {
		return
	}
	var exe int64
	if path, err := os.Executable(); err == nil {
		if info, err := os.Stat(path); err == nil {
			exe = info.Size()
		}
	}
	debug.SetMemoryLimit(goMemoryLimit(limit, exe))
}

// goMemoryLimit is the Go memory limit for a container limit and an
// executable of exe bytes; never below a quarter of the container's.
func goMemoryLimit(limit, exe int64) int64 {
	return max(limit/10*9-exe, limit/4)
}

// NewRoot returns a root command whose flags fall back to the environment
// and which has a version subcommand.
func NewRoot(use, short, long string) *cobra.Command {
	root := &cobra.Command{
		Use:           use,
		Short:         short,
		Long:          long,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().String(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := ApplyEnv(cmd.Flags(), os.LookupEnv); err != nil {
				return err
			}
			applyMemoryLimit(memoryLimit)
			return nil
		},
	}
	root.PersistentFlags().Int64Var(&memoryLimit, "memory-limit", 0,
		"the container's memory limit in bytes (the chart passes limits.memory); Go's memory is kept under 90% of it less the executable's size, unless GOMEMLIMIT is set")
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version and exit",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), use, version.Get())
		},
	})
	return root
}

// Main runs a root command until SIGTERM or SIGINT and exits non-zero on error.
func Main(root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", root.Name(), err)
		os.Exit(1)
	}
}

// PodNamespace is the namespace of the pod the program runs in: $POD_NAMESPACE
// (downward API), else the service account's namespace file; empty outside
// a pod.
func PodNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	raw, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}
