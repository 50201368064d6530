package environmentd

import (
	"context"
	"strings"
	"testing"
	"time"

	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
)

// System parameters parse as environmentd's: durations with us, ms (the
// default), s, min, h or d, nothing else; booleans t/true/on and
// f/false/off.
func TestSystemParameterValuesParseAsEnvironmentds(t *testing.T) {
	for in, want := range map[string]time.Duration{"10s": 10 * time.Second, "2min": 2 * time.Minute, "250": 250 * time.Millisecond,
		" 5 ms": 5 * time.Millisecond, "3us": 3 * time.Microsecond, "1d": 24 * time.Hour, "0s": 0} {
		if got, err := parseParamDuration(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"2m", "1h30m", "1.5s", "-1s", "s", "", "99999999999999999999s", "10 seconds"} {
		if got, err := parseParamDuration(in); err == nil {
			t.Errorf("%q parsed as %v; environmentd refuses it", in, got)
		}
	}
	for in, want := range map[string]bool{"t": true, "true": true, "on": true, "f": false, "false": false, "off": false} {
		if got, err := parseParamBool(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"1", "TRUE", "yes", ""} {
		if _, err := parseParamBool(in); err == nil {
			t.Errorf("%q parsed as a boolean; environmentd refuses it", in)
		}
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
}
