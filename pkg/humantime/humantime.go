// Package humantime reads and writes durations as the Rust crate humantime
// (2.3, the version upstream Materialize pins) does: upstream orchestratord
// reads spec.rolloutRequestTimeout with it, environmentd and balancerd their
// duration flags, and upstream's messages format durations with it. Written
// from humantime's src/duration.rs.
package humantime

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// PanicError is input humantime panics on instead of returning an error
// (an overflow in std's Duration::new): the Rust program dies.
type PanicError struct{ Msg string }

func (p *PanicError) Error() string { return p.Msg }

// Parse parses s as humantime::parse_duration (humantime 2.3) and
// returns the duration, saturated at the largest time.Duration (humantime
// goes up to 2^64 seconds).
func Parse(s string) (time.Duration, error) {
	secs, nanos, err := ParseParts(s)
	if err != nil {
		return 0, err
	}
	if secs > uint64(math.MaxInt64/int64(time.Second))-1 {
		return math.MaxInt64, nil
	}
	return time.Duration(secs)*time.Second + time.Duration(nanos), nil
}

// isRustWhitespace is char::is_whitespace (the White_Space property).
func isRustWhitespace(r rune) bool { return unicode.Is(unicode.White_Space, r) }

// htUnitChar are the characters of a unit: ASCII letters and MICRO SIGN.
func htUnitChar(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == 'µ' }

// htUnits maps humantime's unit names to (seconds, nanoseconds) per unit.
var htUnits = map[string]struct{ sec, nsec uint64 }{
	"nanos": {0, 1}, "nsec": {0, 1}, "ns": {0, 1},
	"usec": {0, 1000}, "us": {0, 1000}, "µs": {0, 1000},
	"millis": {0, 1e6}, "msec": {0, 1e6}, "ms": {0, 1e6},
	"seconds": {1, 0}, "second": {1, 0}, "secs": {1, 0}, "sec": {1, 0}, "s": {1, 0},
	"minutes": {60, 0}, "minute": {60, 0}, "min": {60, 0}, "mins": {60, 0}, "m": {60, 0},
	"hours": {3600, 0}, "hour": {3600, 0}, "hr": {3600, 0}, "hrs": {3600, 0}, "h": {3600, 0},
	"days": {86400, 0}, "day": {86400, 0}, "d": {86400, 0},
	"weeks": {604800, 0}, "week": {604800, 0}, "wk": {604800, 0}, "wks": {604800, 0}, "w": {604800, 0},
	"months": {2630016, 0}, "month": {2630016, 0}, "M": {2630016, 0}, // 30.44 days
	"years": {31557600, 0}, "year": {31557600, 0}, "yr": {31557600, 0}, "yrs": {31557600, 0}, "y": {31557600, 0}, // 365.25 days
}

var errHTOverflow = errors.New("number is too large or cannot be represented without a lack of precision (values below 1ns are not supported)")

type htParser struct {
	src        string
	pos        int // byte offset of the next character
	secs       uint64
	nanos      uint64
	haveFrac   bool
	num, denom uint64
}

func (p *htParser) next() (rune, bool) {
	if p.pos >= len(p.src) {
		return 0, false
	}
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += n
	return r, true
}

func mulOK(a, b uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	return lo, hi == 0
}

func addOK(a, b uint64) (uint64, bool) {
	s, c := bits.Add64(a, b, 0)
	return s, c == 0
}

// ParseParts returns the duration as seconds and nanoseconds, as humantime
// holds it (up to 2^64 seconds).
func ParseParts(s string) (uint64, uint32, error) {
	if s == "0" {
		return 0, 0, nil
	}
	p := &htParser{src: s}
	n, ok, err := p.firstDigit()
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, errors.New("value was empty")
	}
outer:
	for {
		p.haveFrac = false
		off := p.pos
		// The number; whitespace between digits is skipped.
	number:
		for {
			c, more := p.next()
			if !more {
				break
			}
			switch {
			case c >= '0' && c <= '9':
				var ok1, ok2 bool
				if n, ok1 = mulOK(n, 10); ok1 {
					n, ok2 = addOK(n, uint64(c-'0'))
				}
				if !ok1 || !ok2 {
					return 0, 0, errHTOverflow
				}
			case isRustWhitespace(c):
			case htUnitChar(c):
				break number
			case c == '.':
				if err := p.fraction(&off); err != nil {
					return 0, 0, err
				}
				break number
			default:
				return 0, 0, fmt.Errorf("invalid character at %d", off)
			}
			off = p.pos
		}
		// The unit: letters up to whitespace, a digit or the end.
		start := off
		end := p.pos
		for {
			c, more := p.next()
			if !more {
				break
			}
			switch {
			case c >= '0' && c <= '9':
				if err := p.unit(n, start, end); err != nil {
					return 0, 0, err
				}
				n = uint64(c - '0')
				continue outer
			case isRustWhitespace(c):
			case htUnitChar(c):
				end = p.pos
				continue
			default:
				return 0, 0, fmt.Errorf("invalid character at %d", end)
			}
			break
		}
		if err := p.unit(n, start, end); err != nil {
			return 0, 0, err
		}
		n, ok, err = p.firstDigit()
		if err != nil {
			return 0, 0, err
		}
		if !ok {
			return p.secs, uint32(p.nanos), nil
		}
	}
}

// firstDigit skips whitespace and reads one digit; (0, false) at the end.
func (p *htParser) firstDigit() (uint64, bool, error) {
	off := p.pos
	for {
		c, more := p.next()
		if !more {
			return 0, false, nil
		}
		switch {
		case c >= '0' && c <= '9':
			return uint64(c - '0'), true, nil
		case isRustWhitespace(c):
		default:
			return 0, false, fmt.Errorf("expected number at %d", off)
		}
	}
}

// fraction reads the digits after a decimal point.
func (p *htParser) fraction(off *int) error {
	num, denom, zeros := uint64(0), uint64(1), true
loop:
	for {
		c, more := p.next()
		if !more {
			break
		}
		var ok bool
		switch {
		case c == '0':
			if denom, ok = mulOK(denom, 10); !ok {
				return errHTOverflow
			}
			if !zeros {
				if num, ok = mulOK(num, 10); !ok {
					return errHTOverflow
				}
			}
		case c >= '1' && c <= '9':
			zeros = false
			if denom, ok = mulOK(denom, 10); !ok {
				return errHTOverflow
			}
			ok2 := false
			if num, ok = mulOK(num, 10); ok {
				num, ok2 = addOK(num, uint64(c-'0'))
			}
			if !ok || !ok2 {
				return errHTOverflow
			}
		case isRustWhitespace(c):
		case htUnitChar(c):
			break loop
		default:
			return fmt.Errorf("invalid character at %d", *off)
		}
		*off = p.pos
	}
	if denom == 1 {
		// No digit after the separator, e.g. "1.".
		return fmt.Errorf("invalid character at %d", *off)
	}
	p.haveFrac, p.num, p.denom = true, num, denom
	return nil
}

func (p *htParser) unit(n uint64, start, end int) error {
	name := p.src[start:end]
	u, ok := htUnits[name]
	if !ok {
		if name == "" {
			return fmt.Errorf("time unit needed, for example %dsec or %dms", n, n)
		}
		// {:?} of a string of letters: just quotes.
		return fmt.Errorf("unknown time unit \"%s\", supported units: ns, us/µs, ms, sec, min, hours, days, weeks, months, years (and few variations)", name)
	}
	var sec, nsec uint64
	if u.sec > 0 {
		if sec, ok = mulOK(n, u.sec); !ok {
			return errHTOverflow
		}
	} else if nsec, ok = mulOK(n, u.nsec); !ok {
		return errHTOverflow
	}
	if err := p.add(sec, nsec); err != nil {
		return err
	}
	if !p.haveFrac {
		return nil
	}
	// The fraction must divide exactly into the unit's resolution:
	// nanoseconds up to minutes, seconds from hours.
	num, d := p.num, p.denom
	div := func(x uint64) (uint64, error) {
		if x%d != 0 {
			return 0, errHTOverflow
		}
		return x / d, nil
	}
	var perUnit uint64
	inNanos := true
	switch {
	case u.sec == 0 && u.nsec == 1:
		return errHTOverflow // no fractions of a nanosecond
	case u.sec == 0:
		perUnit = u.nsec
	case u.sec == 1:
		perUnit = 1e9
	case u.sec == 60:
		perUnit = 60e9
	default:
		perUnit, inNanos = u.sec, false
	}
	x, ok := mulOK(num, perUnit)
	if !ok {
		return errHTOverflow
	}
	q, err := div(x)
	if err != nil {
		return err
	}
	if inNanos {
		return p.add(0, q)
	}
	return p.add(q, 0)
}

// add is humantime's add_current: it carries nanoseconds only above one
// second, and std's Duration::new then carries an exact second (panicking
// on overflow).
func (p *htParser) add(sec, nsec uint64) error {
	ns, ok := addOK(p.nanos, nsec)
	if !ok {
		return errHTOverflow
	}
	if ns > 1e9 {
		if sec, ok = addOK(sec, ns/1e9); !ok {
			return errHTOverflow
		}
		ns %= 1e9
	}
	if sec, ok = addOK(p.secs, sec); !ok {
		return errHTOverflow
	}
	if ns == 1e9 {
		if sec == math.MaxUint64 {
			return &PanicError{"overflow in Duration::new"}
		}
		sec, ns = sec+1, 0
	}
	p.secs, p.nanos = sec, ns
	return nil
}

// Format formats d as humantime's format_duration, which upstream's
// messages use: "1day", "1h 30m", "2days 3h".
func Format(d time.Duration) string {
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
