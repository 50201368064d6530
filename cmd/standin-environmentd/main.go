// Command standin-environmentd is a TEST STAND-IN for environmentd, NOT
// Materialize. It serves only environmentd's leader API
// (GET /api/leader/status, POST /api/leader/promote, under any path prefix)
// plus /api/readyz and /api/livez, from in-memory state, so the operator's
// rollouts can be exercised in a cluster without running Materialize. See
// package test/standin/environmentd for its behaviour.
//
// In a cluster the operator starts it with environmentd's (or balancerd's)
// command line: it honours --internal-http-listen-addr (the address the
// operator probes) and ignores every other flag and argument it does not
// know. The same image stands in for balancerd and the console in the local
// cluster (hack/cluster/run.sh); GET / answers 200 for the console's probe.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/materializeinc/orchestratord/pkg/environmentd"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

type addrList []string

func (a *addrList) String() string     { return strings.Join(*a, ",") }
func (a *addrList) Set(v string) error { *a = append(*a, v); return nil }

func main() {
	fs := flag.NewFlagSet("standin-environmentd", flag.ExitOnError)
	listen := fs.String("listen-address", fmt.Sprintf(":%d", environmentd.InternalHTTPPort), "address to serve the stand-in leader API on")
	internal := fs.String("internal-http-listen-addr", "", "environmentd's and balancerd's flag: when set, overrides --listen-address")
	var extra addrList
	fs.Var(&extra, "extra-listen-address", "another address to serve the same API on (repeatable)")
	auto := fs.Bool("auto-advance", true, "advance CatchingUp -> ReadyToPromote and Promoting -> IsLeader on status requests")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "standin-environmentd: a TEST STAND-IN for environmentd's leader API; it is not Materialize.")
		fmt.Fprintln(fs.Output(), "Unknown flags and arguments are ignored (the operator passes environmentd's full command line).")
		fs.PrintDefaults()
	}
	args, ignored := knownArgs(fs, os.Args[1:])
	_ = fs.Parse(args)
	if *internal != "" {
		*listen = *internal
	}

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if len(ignored) > 0 {
		log.Info("ignoring arguments the stand-in does not know", "args", ignored)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s := standin.New()
	s.AutoAdvance = *auto
	addrs := append([]string{*listen}, extra...)
	log.Info("serving TEST STAND-IN environmentd leader API (not Materialize)", "listen-addresses", addrs, "auto-advance", *auto)
	h := withRoot(s)
	errc := make(chan error, len(addrs))
	for _, a := range addrs {
		go func() { errc <- standin.ListenAndServe(ctx, a, h) }()
	}
	for range addrs {
		if err := <-errc; err != nil {
			log.Error("serving", "error", err)
			os.Exit(1)
		}
	}
}

// withRoot answers GET / with 200 (the console's readiness probe) and passes
// everything else to the stand-in.
func withRoot(s *standin.Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = fmt.Fprintln(w, "TEST STAND-IN, not Materialize")
			return
		}
		s.ServeHTTP(w, r)
	})
}

// knownArgs splits args into those naming a flag of fs (with the value that
// follows a non-boolean flag given without "=") and the rest.
func knownArgs(fs *flag.FlagSet, args []string) (known, ignored []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" || f == nil {
			ignored = append(ignored, a)
			continue
		}
		known = append(known, a)
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !hasValue && !(ok && b.IsBoolFlag()) && i+1 < len(args) {
			i++
			known = append(known, args[i])
		}
	}
	return known, ignored
}
