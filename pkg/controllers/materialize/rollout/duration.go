package rollout

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// humantime's units (the Rust crate upstream parses
// spec.rolloutRequestTimeout with): a month is 30.44 days, a year 365.25.
var durationUnits = map[string]time.Duration{
	"nsec": time.Nanosecond, "ns": time.Nanosecond,
	"usec": time.Microsecond, "us": time.Microsecond,
	"msec": time.Millisecond, "ms": time.Millisecond,
	"seconds": time.Second, "second": time.Second, "sec": time.Second, "s": time.Second,
	"minutes": time.Minute, "minute": time.Minute, "min": time.Minute, "m": time.Minute,
	"hours": time.Hour, "hour": time.Hour, "hr": time.Hour, "h": time.Hour,
	"days": 24 * time.Hour, "day": 24 * time.Hour, "d": 24 * time.Hour,
	"weeks": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "w": 7 * 24 * time.Hour,
	"months": month, "month": month, "M": month,
	"years": year, "year": year, "y": year,
}

const (
	month = 2_630_016 * time.Second
	year  = 31_557_600 * time.Second
)

// ParseDuration parses a duration as upstream does (humantime): numbers
// with units, optionally separated by spaces, such as "24h", "90m",
// "1h 30m", "2days".
func ParseDuration(s string) (time.Duration, error) {
	rest := strings.TrimSpace(s)
	if rest == "" {
		return 0, fmt.Errorf("empty duration")
	}
	var total time.Duration
	for rest != "" {
		digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
		if digits == 0 {
			return 0, fmt.Errorf("duration %q: expected a number at %q", s, rest)
		}
		n, err := strconv.ParseInt(rest[:digits], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, err)
		}
		rest = strings.TrimLeft(rest[digits:], " ")
		letters := len(rest) - len(strings.TrimLeft(rest, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
		unit, ok := durationUnits[rest[:letters]]
		if !ok {
			return 0, fmt.Errorf("duration %q: unknown unit %q", s, rest[:letters])
		}
		total += time.Duration(n) * unit
		rest = strings.TrimLeft(rest[letters:], " ")
	}
	return total, nil
}

// FormatDuration formats as humantime's format_duration, which upstream's
// messages use: "1day", "1h 30m", "2days 3h".
func FormatDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	secs := int64(d / time.Second)
	nanos := int64(d % time.Second)
	var parts []string
	item := func(n int64, unit string, plural bool) {
		if n == 0 {
			return
		}
		if plural && n > 1 {
			unit += "s"
		}
		parts = append(parts, strconv.FormatInt(n, 10)+unit)
	}
	item(secs/31_557_600, "year", true)
	secs %= 31_557_600
	item(secs/2_630_016, "month", true)
	secs %= 2_630_016
	item(secs/86_400, "day", true)
	secs %= 86_400
	item(secs/3600, "h", false)
	item(secs%3600/60, "m", false)
	item(secs%60, "s", false)
	item(nanos/1_000_000, "ms", false)
	item(nanos/1000%1000, "us", false)
	item(nanos%1000, "ns", false)
	return strings.Join(parts, " ")
}
