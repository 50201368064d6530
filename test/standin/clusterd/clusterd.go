// Package clusterd is a TEST STAND-IN for clusterd, not Materialize: it
// parses clusterd's command line as the real program does (clap tables
// generated from upstream's src/clusterd/src/lib.rs, package
// test/standin/clap), checks what clusterd checks before it serves, then
// listens where its flags say: the storage and compute controller ports
// (the stand-ins' cluster transport, package test/standin/ctp) and the
// internal HTTP port (/api/livez, /metrics, /api/usage-metrics). A replica
// reports itself hydrated a while after a controller first creates its
// dataflows: as long as the controller asks, else STANDIN_HYDRATION from
// its image's environment (a Go duration, default 2s).
package clusterd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/standin/clap"
	"github.com/materializeinc/orchestratord/test/standin/ctp"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

// ExitPanic is a panic: clusterd's enhanced panic handler aborts the
// process (SIGABRT, 128+6).
const ExitPanic = 134

// DefaultHydration is how long hydration takes without STANDIN_HYDRATION.
const DefaultHydration = 2 * time.Second

func panicked(format string, a ...any) *standin.ExitError {
	return &standin.ExitError{Code: ExitPanic, Message: "thread 'main' panicked: " + fmt.Sprintf(format, a...)}
}

// Plan is what a clusterd command line asks for.
type Plan struct {
	Version                     imageref.Version
	Process                     int
	Workers                     uint64
	StorageCtl, ComputeCtl      string
	InternalHTTP, EnvironmentID string
	GRPCHost                    string
	// ScratchDirectory is --scratch-directory, whose disk use clusterd
	// reports.
	ScratchDirectory string
}

// Version is the clusterd version the stand-in plays (STANDIN_VERSION, else
// the newest release line of its table).
func Version(lookup func(string) (string, bool)) (imageref.Version, error) {
	return standin.Version(clap.Clusterd, lookup)
}

// processFromHostname is clusterd's main: in Kubernetes, without
// CLUSTERD_PROCESS, the process index is the StatefulSet ordinal at the end
// of HOSTNAME, when it is a number.
func processFromHostname(lookup func(string) (string, bool)) func(string) (string, bool) {
	_, inKube := lookup("KUBERNETES_SERVICE_HOST")
	_, set := lookup("CLUSTERD_PROCESS")
	host, _ := lookup("HOSTNAME")
	ordinal := host[strings.LastIndex(host, "-")+1:]
	if _, err := strconv.ParseUint(ordinal, 10, 64); !inKube || set || err != nil {
		return lookup
	}
	return func(k string) (string, bool) {
		if k == "CLUSTERD_PROCESS" {
			return ordinal, true
		}
		return lookup(k)
	}
}

// Check parses argv as clusterd of version does and makes its checks
// before serving: equal workers in both timely configs (an assertion) and a
// process index among the timely addresses (timely panics otherwise).
func Check(version imageref.Version, argv []string, lookup func(string) (string, bool)) (*Plan, error) {
	m, err := clap.Parse(clap.Clusterd.At(version.Major, version.Minor), argv, processFromHostname(lookup))
	if err != nil {
		var ce *clap.Error
		if errors.As(err, &ce) {
			return nil, &standin.ExitError{Code: ce.ExitCode(), Message: ce.Error()}
		}
		return nil, &standin.ExitError{Code: 2, Message: err.Error()}
	}
	get := func(name string) string { v, _ := m.Get(name); return v }
	storage, _ := clap.ParseTimelyConfig(get("storage-timely-config"))
	compute, _ := clap.ParseTimelyConfig(get("compute-timely-config"))
	if storage.Workers != compute.Workers {
		return nil, panicked("assertion `left == right` failed: storage and compute must have equal workers-per-process\n  left: %d\n right: %d", storage.Workers, compute.Workers)
	}
	process, _ := strconv.Atoi(get("process"))
	for _, tc := range []clap.TimelyConfigValue{storage, compute} {
		if process >= len(tc.Addresses) {
			return nil, panicked("process index %d out of range of the %d timely addresses", process, len(tc.Addresses))
		}
	}
	if storage.Workers == 0 {
		return nil, panicked("timely: a process needs at least one worker")
	}
	return &Plan{Version: version, Process: process, Workers: storage.Workers,
		StorageCtl: get("storage-controller-listen-addr"), ComputeCtl: get("compute-controller-listen-addr"),
		InternalHTTP: get("internal-http-listen-addr"), EnvironmentID: get("environment-id"), GRPCHost: get("grpc-host"),
		ScratchDirectory: get("scratch-directory")}, nil
}

// hydration is STANDIN_HYDRATION, or DefaultHydration.
func hydration(lookup func(string) (string, bool)) (time.Duration, error) {
	v, ok := lookup("STANDIN_HYDRATION")
	if !ok || v == "" {
		return DefaultHydration, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("STANDIN_HYDRATION=%q: want a duration", v)
	}
	return d, nil
}

// Run checks argv as clusterd of Version(lookup) and serves until ctx ends.
func Run(ctx context.Context, log *slog.Logger, argv []string, lookup func(string) (string, bool)) error {
	version, err := Version(lookup)
	if err != nil {
		return err
	}
	plan, err := Check(version, argv, lookup)
	if err != nil {
		return err
	}
	d, err := hydration(lookup)
	if err != nil {
		return err
	}
	log.Info("TEST STAND-IN clusterd (not Materialize) accepted its command line",
		"version", version.String(), "process", plan.Process, "workers", plan.Workers,
		"storagectl", plan.StorageCtl, "computectl", plan.ComputeCtl, "internal-http", plan.InternalHTTP)
	return Serve(ctx, log, plan, &ctp.Replica{Process: plan.Process, DefaultHydration: d})
}

// Serve listens on plan's addresses until ctx ends. A failed bind is
// clusterd's fatal error, which panics.
func Serve(ctx context.Context, log *slog.Logger, plan *Plan, replica *ctp.Replica) error {
	internal := http.NewServeMux()
	internal.HandleFunc("GET /api/livez", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	internal.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = fmt.Fprintf(w, "# TYPE mz_standin_clusterd_up gauge\nmz_standin_clusterd_up 1\n")
	})
	internal.HandleFunc("GET /api/usage-metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(collectUsage(hostFS, plan.ScratchDirectory))
	})
	addrs := []string{plan.StorageCtl, plan.ComputeCtl, plan.InternalHTTP}
	var lns []net.Listener
	errc := make(chan error, len(addrs))
	version := plan.Version.String()
	logf := func(msg string, args ...any) { log.Warn(msg, args...) }
	for i, addr := range addrs {
		ln, err := standin.Listen(addr)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return &standin.ExitError{Code: ExitPanic, Message: fmt.Sprintf("clusterd: fatal: listening on %s: %v", addr, err)}
		}
		lns = append(lns, ln)
		if i == 2 {
			go func() { errc <- standin.ServeHTTP(ln, internal) }()
			continue
		}
		go func() { errc <- replica.Serve(ln, version, plan.GRPCHost, logf) }()
	}
	return standin.CloseAndWait(ctx, lns, errc)
}
