// Command standin-environmentd is a TEST STAND-IN for environmentd, balancerd,
// the console and clusterd, NOT Materialize. It parses its command line and
// environment exactly as the real program does (tables generated from
// upstream's clap definitions, test/standin/clap) and refuses what the real
// program refuses, with the real program's messages and exit codes; then it
// serves only what the operator talks to: environmentd's leader API from
// in-memory state on the listeners its listeners file declares, with their
// route groups and authentication; balancerd's probes and proxies; the
// console's app and API proxy (it reads its environment as the image's nginx
// does: test/standin/console).
//
// What it plays comes from its image's environment: STANDIN_PLAYS is
// environmentd (default), balancerd, console or clusterd; STANDIN_VERSION is the
// version of environmentd or balancerd it plays (it decides the command
// line the release line has and environmentd's listeners file schema);
// unset, the newest release line of the generated tables
// (test/standin/clap), as X.Y.0.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/materializeinc/orchestratord/test/standin/balancerd"
	"github.com/materializeinc/orchestratord/test/standin/clap"
	"github.com/materializeinc/orchestratord/test/standin/clusterd"
	"github.com/materializeinc/orchestratord/test/standin/console"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	plays := os.Getenv("STANDIN_PLAYS")
	graceful := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if plays == "console" {
		// nginx stops gracefully on SIGQUIT (the console image's stop
		// signal) and at once, dropping its connections, on SIGTERM or
		// SIGINT. The Rust programs keep SIGQUIT's default: killed.
		graceful = []os.Signal{syscall.SIGQUIT}
		fast := make(chan os.Signal, 1)
		signal.Notify(fast, os.Interrupt, syscall.SIGTERM)
		go func() {
			<-fast
			os.Exit(0)
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), graceful...)
	defer stop()
	var err error
	switch plays {
	case "", "environmentd":
		err = environmentd(ctx, log)
	case "balancerd":
		err = balancerd.Run(ctx, log, os.Args[1:], os.LookupEnv)
	case "console":
		err = console.Run(ctx, log, os.LookupEnv, os.ReadFile)
	case "clusterd":
		err = clusterd.Run(ctx, log, os.Args[1:], os.LookupEnv)
	default:
		err = fmt.Errorf("STANDIN_PLAYS=%q: want environmentd, balancerd, console or clusterd", plays)
	}
	if err != nil {
		if e, ok := err.(interface{ ExitCode() int }); ok {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(e.ExitCode())
		}
		log.Error("stand-in failed", "error", err)
		os.Exit(1)
	}
}

func environmentd(ctx context.Context, log *slog.Logger) error {
	version, err := standin.Version(clap.Environmentd, os.LookupEnv)
	if err != nil {
		return err
	}
	plan, exit := standin.Check(version, os.Args[1:], os.LookupEnv, os.ReadFile)
	if exit != nil {
		return exit
	}
	var addrs []string
	for _, l := range append(append([]standin.Listener(nil), plan.Listeners.SQL...), plan.Listeners.HTTP...) {
		addrs = append(addrs, l.Name+"="+l.Addr.String())
	}
	log.Info("TEST STAND-IN environmentd (not Materialize) accepted its command line",
		"version", version.String(), "generation", plan.Generation, "listeners", addrs)
	if plan.LicenseWarning != "" {
		log.Warn(plan.LicenseWarning)
	}
	p, err := process(ctx, log, plan, version.String())
	if err != nil {
		return err
	}
	err = p.Run(ctx, plan)
	var e *standin.ExitError
	if errors.As(err, &e) && e.Code == standin.ExitFenced {
		// The image's entrypoint (upstream src/environmentd/ci/entrypoint.sh):
		// a graceful exit sleeps, so the kubelet does not restart a fenced-out
		// generation; its pod stays, not ready, until the operator removes it.
		log.Info("exiting process (0): " + e.Message)
		fmt.Fprintln(os.Stderr, "environmentd exited gracefully; sleeping forever")
		<-ctx.Done()
		return nil
	}
	return err
}

// process connects the stand-in to the catalog and orchestrator it plays
// against: in a pod (--orchestrator=kubernetes), the API server as the pod's
// ServiceAccount (KUBECONFIG, when set, for tests run outside a pod);
// otherwise an in-memory catalog.
func process(ctx context.Context, log *slog.Logger, plan *standin.Plan, version string) (*standin.Process, error) {
	p := &standin.Process{Log: log, Catalog: &standin.MemoryCatalog{}, FenceCheck: time.Second}
	if o, _ := plan.Args.Get("orchestrator"); o == "kubernetes" {
		cfg, ns, err := standin.KubeClientConfig()
		if err != nil {
			return nil, err
		}
		// STANDIN_HYDRATION (a Materialize's environmentdExtraEnv) is how
		// long its replicas take to hydrate; real environmentd ignores it.
		// A bad value is refused here, not left to each replica to drop
		// the connection over.
		if v := os.Getenv("STANDIN_HYDRATION"); v != "" {
			if d, err := time.ParseDuration(v); err != nil || d < 0 {
				return nil, fmt.Errorf("STANDIN_HYDRATION=%q: want a duration", v)
			}
		}
		if p, err = standin.KubeProcess(ctx, log, plan, version, os.Getenv("STANDIN_HYDRATION"), cfg, ns, os.Getenv("HOSTNAME")); err != nil {
			return nil, err
		}
	}
	// Tests shorten the VpcEndpoint retries.
	p.RetryFor = durationEnv("STANDIN_RETRY_FOR", p.RetryFor)
	return p, nil
}

func durationEnv(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}
