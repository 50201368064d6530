package environmentd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
)

// boot runs one environmentd process of deploy generation gen against
// catalog, without listeners, and returns its leader API state and the
// channel its exit arrives on.
func boot(t *testing.T, ctx context.Context, catalog Catalog, gen string) (*Deployment, <-chan error) {
	t.Helper()
	d := NewDeployment()
	p := &Process{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Catalog: catalog,
		Replicas: neverCaughtUp{}, FenceCheck: 10 * time.Millisecond, Deployment: d}
	plan := &Plan{Listeners: &Listeners{}, Generation: gen}
	exit := make(chan error, 1)
	go func() { exit <- p.Run(ctx, plan) }()
	return d, exit
}

// neverCaughtUp is a cluster whose replicas never hydrate: only skip-catchup
// ends the catch-up.
type neverCaughtUp struct{}

func (neverCaughtUp) CaughtUp(context.Context) (bool, string, map[string]ClusterHealth) {
	return false, "0/1 replica processes hydrated", nil
}

func waitStatus(t *testing.T, d *Deployment, want mzenv.LeaderStatus) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); d.Status() != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("status %s, want %s", d.Status(), want)
		}
	}
}

func waitPhase(t *testing.T, d *Deployment, want phase) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		d.mu.Lock()
		got := d.phase
		d.mu.Unlock()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("phase %d, want %d", got, want)
		}
	}
}

func wantExit(t *testing.T, exit <-chan error, code int, message string) {
	t.Helper()
	select {
	case err := <-exit:
		var e *ExitError
		if !errors.As(err, &e) || e.Code != code || e.Message != message {
			t.Fatalf("exit %v, want code %d %q", err, code, message)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no exit, want code %d %q", code, message)
	}
}

// A rollout as real environmentd lives it (src/environmentd/src/deployment/
// preflight.rs): the first generation leads at once on a fresh catalog; the
// next catches up (reported Initializing), is promoted, takes the catalog
// over and halts; restarted, it leads; the old leader, fenced by the
// takeover, exits 0, and so does it when restarted.
func TestProcessLivesARolloutAsEnvironmentd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	catalog := &MemoryCatalog{}

	gen1, gen1Exit := boot(t, ctx, catalog, "1")
	waitStatus(t, gen1, mzenv.IsLeader)

	gen2, gen2Exit := boot(t, ctx, catalog, "2")
	waitStatus(t, gen2, mzenv.Initializing)
	waitPhase(t, gen2, phaseCatchingUp)
	if !gen2.trySkipCatchup() {
		t.Fatal("skip-catchup refused while catching up")
	}
	waitStatus(t, gen2, mzenv.ReadyToPromote)
	if g, _, _ := catalog.Generation(ctx); g != 1 {
		t.Fatalf("catalog at %d before promotion, want 1", g)
	}
	if !gen2.tryPromote() {
		t.Fatal("promotion refused at ReadyToPromote")
	}
	wantExit(t, gen2Exit, ExitHalt, "halting process: fenced out old deployment; rebooting as leader")
	if g, _, _ := catalog.Generation(ctx); g != 2 {
		t.Fatalf("catalog at %d after takeover, want 2", g)
	}
	wantExit(t, gen1Exit, ExitFenced, "fenced out by deploy generation 2")

	restarted2, _ := boot(t, ctx, catalog, "2")
	waitStatus(t, restarted2, mzenv.IsLeader)
	_, restarted1Exit := boot(t, ctx, catalog, "1")
	wantExit(t, restarted1Exit, ExitFenced, "this deployment has been fenced out")
}

// Catching up, a generation refuses promotion and accepts skip-catchup,
// which makes it ready; nothing takes the catalog over before promotion.
func TestProcessRefusesEarlyPromotion(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	catalog := &MemoryCatalog{}
	_ = catalog.Open(ctx, 4)
	d, _ := boot(t, ctx, catalog, "5")
	waitPhase(t, d, phaseCatchingUp)
	if got := d.Status(); got != mzenv.Initializing {
		t.Errorf("catching up reported as %s, want Initializing", got)
	}
	if d.tryPromote() {
		t.Fatal("promoted while catching up")
	}
	if !d.trySkipCatchup() {
		t.Fatal("skip-catchup refused while catching up")
	}
	waitStatus(t, d, mzenv.ReadyToPromote)
	if g, _, _ := catalog.Generation(ctx); g != 4 {
		t.Fatalf("catalog at %d, want 4 (no takeover without promotion)", g)
	}
}

// flakyCatalog is a catalog whose store is unreachable for its first calls.
type flakyCatalog struct {
	MemoryCatalog
	failures atomic.Int32
}

func (c *flakyCatalog) Generation(ctx context.Context) (uint64, bool, error) {
	if c.failures.Add(-1) >= 0 {
		return 0, false, errors.New("connection refused")
	}
	return c.MemoryCatalog.Generation(ctx)
}

// An unreachable catalog store is retried, the process Initializing
// meanwhile, as persist retries its consensus store; an undecodable catalog
// is fatal at once; a catalog a newer generation took while this one
// booted fences it out (exit 0), not a crash.
func TestCatalogStoreFailuresAtBoot(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	flaky := &flakyCatalog{}
	flaky.failures.Store(3)
	d, exit := boot(t, ctx, flaky, "1")
	waitStatus(t, d, mzenv.IsLeader)
	select {
	case err := <-exit:
		t.Fatalf("exited after store failures: %v", err)
	default:
	}

	_, exit = boot(t, ctx, &corruptCatalog{}, "1")
	wantExit(t, exit, ExitPanic, "environmentd: fatal: catalog cannot be decoded: bad")

	_, exit = boot(t, ctx, &takenWhileBooting{}, "1")
	wantExit(t, exit, ExitFenced, "this deployment has been fenced out")
}

type corruptCatalog struct{ MemoryCatalog }

func (*corruptCatalog) Generation(context.Context) (uint64, bool, error) {
	return 0, false, fmt.Errorf("%w: bad", errCorruptCatalog)
}

// takenWhileBooting is a fresh catalog that a newer generation opens
// between this process's read and its open.
type takenWhileBooting struct{ MemoryCatalog }

func (*takenWhileBooting) Open(context.Context, uint64) error {
	return fmt.Errorf("%w: 2", errFenced)
}
