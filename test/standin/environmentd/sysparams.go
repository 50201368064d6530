package environmentd

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/materializeinc/orchestratord/test/standin/clap"
)

// systemParameter is the last --system-parameter-default of key, its
// quotes trimmed.
func systemParameter(m *clap.Matches, key string) (string, bool) {
	value, found := "", false
	if m == nil {
		return value, found
	}
	for _, kv := range m.All("system-parameter-default") {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			value, found = strings.Trim(v, "'"), true
		}
	}
	return value, found
}

// parseParamDuration reads a duration system parameter as environmentd
// does (src/sql/src/session/vars/value.rs): ASCII digits, then us, ms, s,
// min, h or d; no unit is milliseconds. "2m" or "1h30m" are refused.
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
	unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "": time.Millisecond,
		"s": time.Second, "min": time.Minute, "h": time.Hour, "d": 24 * time.Hour}
	u, ok := unit[strings.TrimLeft(s[end:], " \t\n\r")]
	if !ok {
		return 0, fmt.Errorf("expected us, ms, s, min, h, or d but got %q", strings.TrimLeft(s[end:], " \t\n\r"))
	}
	if n > uint64(math.MaxInt64/int64(u)) {
		return 0, fmt.Errorf("duration out of range")
	}
	return time.Duration(n) * u, nil
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

// checkSystemParameters parses the --system-parameter-default values the
// stand-in plays, as environmentd's catalog does when it opens: one that
// does not parse fails the boot.
func checkSystemParameters(plan *Plan) error {
	if _, err := catchUpConfig(plan.Args, plan.Version); err != nil {
		return err
	}
	_, err := schedulingConfigOf(plan.Args, plan.Version)
	return err
}
