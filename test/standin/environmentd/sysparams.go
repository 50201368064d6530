package environmentd

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/materializeinc/orchestratord/test/standin/clap"
)

// systemParameter is the last --system-parameter-default of key, whose
// case environmentd's catalog ignores. The value is as given: environmentd
// trims no quotes.
func systemParameter(m *clap.Matches, key string) (string, bool) {
	value, found := "", false
	if m == nil {
		return value, found
	}
	for _, kv := range m.All("system-parameter-default") {
		if k, v, _ := strings.Cut(kv, "="); strings.EqualFold(k, key) {
			value, found = v, true
		}
	}
	return value, found
}

// param is a system parameter the stand-in plays: its name, and what
// reads a value of it into where it goes.
type param struct {
	key string
	set func(value string) error
}

func durationParam(key string, dst *time.Duration) param {
	return param{key, func(v string) (err error) { *dst, err = parseParamDuration(v); return err }}
}

func boolParam(key string, dst *bool) param {
	return param{key, func(v string) (err error) { *dst, err = parseParamBool(v); return err }}
}

func int32Param(key string, dst *int32) param {
	return param{key, func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		*dst = int32(n)
		return err
	}}
}

// optionalInt32Param is an Option<i32>: empty is None.
func optionalInt32Param(key string, dst **int32) param {
	return param{key, func(v string) error {
		if v == "" {
			*dst = nil
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 32)
		w := int32(n)
		*dst = &w
		return err
	}}
}

// readParams reads each of params that m gives, in order, and names the
// first that does not parse.
func readParams(m *clap.Matches, params ...param) error {
	for _, p := range params {
		if v, ok := systemParameter(m, p.key); ok {
			if err := p.set(v); err != nil {
				return fmt.Errorf("invalid system parameter %s=%q: %v", p.key, v, err)
			}
		}
	}
	return nil
}

// parseParamDuration reads a duration system parameter as environmentd
// does (src/sql/src/session/vars/value.rs): ASCII digits, then us, ms, s,
// min, h or d; no unit is milliseconds. "2m" or "1h30m" are refused.
// A value past what a time.Duration holds (about 292 years), which
// environmentd accepts up to 2^64 seconds, is that long.
func parseParamDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	end := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(s)
	}
	n, err := strconv.ParseUint(s[:end], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid value for a duration")
	}
	units := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "": time.Millisecond,
		"s": time.Second, "min": time.Minute, "h": time.Hour, "d": 24 * time.Hour}
	unitName := strings.TrimLeftFunc(s[end:], unicode.IsSpace)
	unit, ok := units[unitName]
	if !ok {
		return 0, fmt.Errorf("expected us, ms, s, min, h, or d but got %q", unitName)
	}
	// Upstream multiplies seconds (or takes micro- and milliseconds
	// whole) in a u64.
	if unit >= time.Second && n > math.MaxUint64/uint64(unit/time.Second) {
		return 0, fmt.Errorf("duration out of range")
	}
	if n > uint64(math.MaxInt64/int64(unit)) {
		return math.MaxInt64, nil
	}
	return time.Duration(n) * unit, nil
}

// parseParamBool reads a boolean system parameter as environmentd does.
func parseParamBool(s string) (bool, error) {
	switch s {
	case "t", "true", "on":
		return true, nil
	case "f", "false", "off":
		return false, nil
	}
	return false, fmt.Errorf("invalid value for a boolean")
}

// parseLenientBool is mz_repr's parse_bool, with which environmentd's
// preflight reads enable_0dt_deployment_panic_after_timeout before the
// catalog opens.
func parseLenientBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "t", "tr", "tru", "true", "y", "ye", "yes", "on", "1":
		return true, nil
	case "f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0":
		return false, nil
	}
	return false, fmt.Errorf("invalid input syntax for type boolean")
}

// checkPreflightParameters parses what environmentd's preflight reads
// before it looks at the catalog's generation, so a value that does not
// parse fails even a generation the catalog has fenced out.
func checkPreflightParameters(plan *Plan) error {
	for _, key := range []string{"with_0dt_deployment_max_wait", "with_0dt_deployment_ddl_check_interval"} {
		if v, ok := systemParameter(plan.Args, key); ok {
			if _, err := parseParamDuration(v); err != nil {
				return fmt.Errorf("failed to parse default for %s: %v", key, err)
			}
		}
	}
	if v, ok := systemParameter(plan.Args, "enable_0dt_deployment_panic_after_timeout"); ok {
		if _, err := parseLenientBool(v); err != nil {
			return fmt.Errorf("failed to parse default for enable_0dt_deployment_panic_after_timeout: %v", err)
		}
	}
	return nil
}

// checkSystemParameters parses the --system-parameter-default values of
// the parameters the stand-in plays (not every one environmentd knows),
// as environmentd's catalog does when it opens: one that does not parse
// fails the boot.
func checkSystemParameters(plan *Plan) error {
	if _, err := catchUpConfig(plan.Args, plan.Version); err != nil {
		return err
	}
	_, err := schedulingConfigOf(plan.Args, plan.Version)
	return err
}
