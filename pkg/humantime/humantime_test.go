package humantime

import (
	"errors"
	"testing"
	"time"
)

const unknownUnit = `, supported units: ns, us/µs, ms, sec, min, hours, days, weeks, months, years (and few variations)`
const htOverflow = "number is too large or cannot be represented without a lack of precision (values below 1ns are not supported)"

func TestParse(t *testing.T) {
	for _, in := range []string{"0", "1s", "5000ms", "30s", "1h", "3600s", "2h 37min", "1h30m", "32ms", "4.2s", "1.5h", "0.5min",
		"  5s  ", "1 2s", "1 h", "1µs", "1us", "1nsec", "1y", "1M", "100 years", "1.000s", "18446744073709551615s"} {
		if _, _, err := ParseParts(in); err != nil {
			t.Errorf("ParseParts(%q): %v", in, err)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"", "value was empty"},
		{"   ", "value was empty"},
		{"5", "time unit needed, for example 5sec or 5ms"},
		{"1.5", "time unit needed, for example 1sec or 1ms"},
		{"1hour30", "time unit needed, for example 30sec or 30ms"},
		{"1x", `unknown time unit "x"` + unknownUnit},
		{"1S", `unknown time unit "S"` + unknownUnit},
		{"1µ", `unknown time unit "µ"` + unknownUnit},
		{"1μs", "invalid character at 1"}, // GREEK SMALL LETTER MU is not MICRO SIGN
		{"-1s", "expected number at 0"},
		{"s", "expected number at 0"},
		{".5s", "expected number at 0"},
		{"1s x", "expected number at 3"},
		{"1.s", "invalid character at 1"},
		{"1,5s", "invalid character at 1"},
		{"5s!", "invalid character at 2"},
		{"1.5ns", htOverflow},
		{"1.0000000001s", htOverflow},
		{"18446744073709551616s", htOverflow},
		{"18446744073709551615m", htOverflow},
	} {
		if _, _, err := ParseParts(c.in); err == nil || err.Error() != c.want {
			t.Errorf("ParseParts(%q) = %v, want %q", c.in, err, c.want)
		}
	}
	for in, want := range map[string]time.Duration{
		"30s": 30 * time.Second, "1.5h": 90 * time.Minute, "4.2s": 4200 * time.Millisecond, "1 2s": 12 * time.Second,
		"1M": 2630016 * time.Second, "0.5min": 30 * time.Second, "1h 1h": 2 * time.Hour, "1.5ms": 1500 * time.Microsecond,
		"600years": time.Duration(1<<63 - 1), "0.5s 0.5s": time.Second,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	// humantime leaves an exact second of nanoseconds to Duration::new,
	// which panics when it overflows the seconds.
	_, _, err := ParseParts("18446744073709551615s 0.5s 0.5s")
	var p *PanicError
	if !errors.As(err, &p) || p.Msg != "overflow in Duration::new" {
		t.Errorf("a carried second past 2^64 s: %v, want Duration::new's panic", err)
	}
}

// humantime's format_duration, as upstream's RolloutTimeout message prints.
func TestFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour: "1day", 48 * time.Hour: "2days", 90 * time.Minute: "1h 30m", 2 * time.Second: "2s",
		26*time.Hour + 30*time.Second: "1day 2h 30s", 0: "0s", 1500 * time.Millisecond: "1s 500ms",
	} {
		if got := Format(d); got != want {
			t.Errorf("Format(%v) = %q, want %q", d, got, want)
		}
	}
}

// The forms upstream's documentation gives for spec.rolloutRequestTimeout,
// which Go's time.ParseDuration refuses.
func TestRolloutRequestTimeoutForms(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"24h": 24 * time.Hour, "1h 30m": 90 * time.Minute, "2d": 48 * time.Hour, "2days": 48 * time.Hour,
		"30min": 30 * time.Minute, "1week": 7 * 24 * time.Hour, " 6 hours ": 6 * time.Hour, "1.5h": 90 * time.Minute,
		"2hrs": 2 * time.Hour, "3secs": 3 * time.Second,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
