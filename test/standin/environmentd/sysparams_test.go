package environmentd

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
	"github.com/materializeinc/orchestratord/pkg/imageref"
)

// System parameters parse as environmentd's: durations with us, ms (the
// default), s, min, h or d, nothing else; booleans t/true/on and
// f/false/off.
func TestSystemParameterValuesParseAsEnvironmentds(t *testing.T) {
	for in, want := range map[string]time.Duration{"10s": 10 * time.Second, "2min": 2 * time.Minute, "250": 250 * time.Millisecond,
		" 5 ms": 5 * time.Millisecond, "5\u00a0ms": 5 * time.Millisecond, "3us": 3 * time.Microsecond, "1d": 24 * time.Hour, "0s": 0,
		// Past what a Duration holds, and what environmentd takes.
		"1000000d": math.MaxInt64, "18446744073709551615": math.MaxInt64, "18446744073709551615s": math.MaxInt64} {
		if got, err := parseParamDuration(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"2m", "1h30m", "1.5s", "-1s", "s", "", "99999999999999999999s", "10 seconds", "'2min'", "18446744073709551615min"} {
		if got, err := parseParamDuration(in); err == nil {
			t.Errorf("%q parsed as %v; environmentd refuses it", in, got)
		}
	}
	for in, want := range map[string]bool{"t": true, "true": true, "on": true, "f": false, "false": false, "off": false} {
		if got, err := parseParamBool(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"1", "TRUE", "yes", "", "'t'"} {
		if _, err := parseParamBool(in); err == nil {
			t.Errorf("%q parsed as a boolean; environmentd refuses it", in)
		}
	}
	// The preflight's own reader, before the catalog's.
	for in, want := range map[string]bool{" TRUE ": true, "1": true, "ye": true, "of": false, "n": false} {
		if got, err := parseLenientBool(in); err != nil || got != want {
			t.Errorf("lenient %q: %v %v", in, got, err)
		}
	}
	if _, err := parseLenientBool("maybe"); err == nil {
		t.Error("lenient: maybe parsed")
	}
}

// A system parameter default that does not parse fails environmentd's
// boot, whichever parameter it is; one of a later version than the one
// played is unknown, and ignored.
func TestSystemParametersAreEnvironmentds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, kv := range []string{"with_0dt_caught_up_check_stability_period=2m", "cluster_topology_spread_max_skew=one",
		"enable_0dt_caught_up_stability_check=1", "0dt_deployment_hydration_check_interval=1h30m"} {
		_, exit := bootAt(t, ctx, "26.35.0", &restartingReplica{}, params(kv))
		select {
		case err := <-exit:
			key, _, _ := strings.Cut(kv, "=")
			if err == nil || !strings.Contains(err.Error(), "invalid system parameter "+key) {
				t.Errorf("%s: exit %v", kv, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: booted", kv)
		}
	}
	d, _ := bootAt(t, ctx, "26.31.0", &restartingReplica{}, params("with_0dt_caught_up_check_stability_period=soon", "0dt_deployment_hydration_check_interval=10ms"))
	waitStatus(t, d, mzenv.ReadyToPromote)
	// Names are matched whatever their case, as the catalog matches them.
	_, exit := bootAt(t, ctx, "26.35.0", &restartingReplica{}, params("WITH_0DT_CAUGHT_UP_CHECK_STABILITY_PERIOD=2m"))
	wantExitWith(t, exit, ExitPanic, "invalid system parameter with_0dt_caught_up_check_stability_period")

	// A leader never takes the catch-up intervals: zero boots it. A
	// read-only generation's timer panics on it.
	catalog := &MemoryCatalog{}
	_ = catalog.Open(ctx, 2)
	d, exit = bootPlan(t, ctx, catalog, &restartingReplica{}, &Plan{Listeners: &Listeners{}, Generation: "2",
		Args: params("0dt_deployment_hydration_check_interval=0s"), Version: imageref.MustParseVersion("26.35.0")})
	waitStatus(t, d, mzenv.IsLeader)
	_, exit = bootAt(t, ctx, "26.35.0", &restartingReplica{}, params("0dt_deployment_hydration_check_interval=0s"))
	wantExitWith(t, exit, ExitPanic, "`period` must be non-zero")

	// The preflight parses its own before it reads the catalog's
	// generation: a generation the catalog fenced out fails on it too.
	catalog = &MemoryCatalog{}
	_ = catalog.Open(ctx, 3)
	_, exit = bootPlan(t, ctx, catalog, &restartingReplica{}, &Plan{Listeners: &Listeners{}, Generation: "2",
		Args: params("with_0dt_deployment_max_wait=1h30m"), Version: imageref.MustParseVersion("26.35.0")})
	wantExitWith(t, exit, ExitPanic, "failed to parse default for with_0dt_deployment_max_wait")
	_, exit = bootPlan(t, ctx, catalog, &restartingReplica{}, &Plan{Listeners: &Listeners{}, Generation: "2",
		Args: params("cluster_topology_spread_max_skew=one"), Version: imageref.MustParseVersion("26.35.0")})
	wantExitWith(t, exit, ExitFenced, "fenced out")
}

// wantExitWith waits for an exit with code whose message contains part.
func wantExitWith(t *testing.T, exit <-chan error, code int, part string) {
	t.Helper()
	select {
	case err := <-exit:
		var e *ExitError
		if !errors.As(err, &e) || e.Code != code || !strings.Contains(e.Message, part) {
			t.Fatalf("exit %v, want code %d with %q", err, code, part)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no exit, want code %d with %q", code, part)
	}
}
