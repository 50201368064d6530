package rollout

import (
	"testing"
	"time"
)

// The forms upstream's documentation and humantime accept; Go's
// time.ParseDuration refuses most ("1h 30m", "2d", "30min"), which made
// them the 24h default.
func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"24h": 24 * time.Hour, "90m": 90 * time.Minute, "1h 30m": 90 * time.Minute, "1h30m": 90 * time.Minute,
		"2d": 48 * time.Hour, "2days": 48 * time.Hour, "30min": 30 * time.Minute, "1week": 7 * 24 * time.Hour,
		"45s": 45 * time.Second, "500ms": 500 * time.Millisecond, " 6 hours ": 6 * time.Hour,
	} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "h", "10", "10 parsecs", "-1h", "1.5h"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

// humantime's format_duration, as upstream's RolloutTimeout message prints.
func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour: "1day", 48 * time.Hour: "2days", 90 * time.Minute: "1h 30m", 2 * time.Second: "2s",
		26*time.Hour + 30*time.Second: "1day 2h 30s", 0: "0s", 1500 * time.Millisecond: "1s 500ms",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
