// Command standin-environmentd is a TEST STAND-IN for environmentd, NOT
// Materialize. It serves only environmentd's leader API
// (GET /api/leader/status, POST /api/leader/promote, under any path prefix)
// plus /api/readyz and /api/livez, from in-memory state, so the operator's
// rollouts can be exercised in a cluster without running Materialize. See
// package test/standin/environmentd for its behaviour.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/materializeinc/orchestratord/pkg/environmentd"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

func main() {
	fs := flag.NewFlagSet("standin-environmentd", flag.ExitOnError)
	listen := fs.String("listen-address", fmt.Sprintf(":%d", environmentd.InternalHTTPPort), "address to serve the stand-in leader API on")
	auto := fs.Bool("auto-advance", true, "advance CatchingUp -> ReadyToPromote and Promoting -> IsLeader on status requests")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "standin-environmentd: a TEST STAND-IN for environmentd's leader API; it is not Materialize.")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s := standin.New()
	s.AutoAdvance = *auto
	log.Info("serving TEST STAND-IN environmentd leader API (not Materialize)", "listen-address", *listen, "auto-advance", *auto)
	if err := standin.ListenAndServe(ctx, *listen, s); err != nil {
		log.Error("serving", "error", err)
		os.Exit(1)
	}
}
