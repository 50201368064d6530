package clap

// The value parsers of the Rust types environmentd and balancerd take
// (Parser.Kind Duration and later). Each function is written from the Rust
// source named in its comment and returns the text the Rust parser's error
// displays, which clap prints after "invalid value 'V' for '--flag <NAME>': ".
// The crate versions are the ones upstream's Cargo.lock pins; the generator
// (hack/gen-standin-args, valueparsers.go) refuses to emit these kinds when
// the lock file or upstream's own parsers change.

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/materializeinc/orchestratord/pkg/humantime"
	"github.com/materializeinc/orchestratord/pkg/mzuuid"
)

// panicError is a value parser that panics in the real program instead of
// returning an error: clap never reports it, the process dies (exit 101).
type panicError struct{ msg string }

func (p *panicError) Error() string { return p.msg }

// checkParsed applies the value parser of one of the modelled Rust types.
func checkParsed(a *Arg, v string) error {
	if a.Parser.Kind < Duration {
		return nil
	}
	// Every one of these parsers starts with OsStr::to_str.
	if !utf8.ValidString(v) {
		return &Error{Kind: InvalidUtf8, Message: "invalid UTF-8 was detected in one or more arguments"}
	}
	var err error
	switch a.Parser.Kind {
	case Duration:
		_, _, err = humantime.ParseParts(v)
	case SocketAddr:
		err = parseSocketAddr(v)
	case NetioSocketAddr:
		err = parseNetioSocketAddr(v)
	case IPAddr:
		err = parseIPAddr(v)
	case IPNet:
		err = parseIPNet(v)
	case UUID:
		err = parseUUID(v)
	case HeaderValue:
		err = parseHeaderValue(v)
	case KeyValueArg:
		err = parseKeyValueArg(v, nil, nil)
	case HeaderKeyValueArg:
		err = parseKeyValueArg(v, parseHeaderName, parseHeaderValue)
	case KeyValPair:
		err = parseKeyVal(v)
	case URL:
		if parseURL(v) != nil {
			// mz_ore's SensitiveUrlParser redacts the value and drops
			// url::ParseError (it sets no source).
			return errorf(ValueValidation, "invalid value '<redacted>' for '%s'", a)
		}
	case EnvFilter:
		err = parseEnvFilter(v)
	case EnvironmentID:
		err = parseEnvironmentID(v)
	case Text:
	case TimelyConfig:
		_, err = ParseTimelyConfig(v)
	}
	if err == nil {
		return nil
	}
	var p *panicError
	if errors.As(err, &p) {
		return &Error{Kind: Panic, Message: p.msg}
	}
	var hp *humantime.PanicError
	if errors.As(err, &hp) {
		return &Error{Kind: Panic, Message: hp.Msg}
	}
	return errorf(ValueValidation, "invalid value '%s' for '%s': %s", v, a, err)
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

func mulOK(a, b uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	return lo, hi == 0
}

func addOK(a, b uint64) (uint64, bool) {
	s, c := bits.Add64(a, b, 0)
	return s, c == 0
}

// --- Rust std (library/core/src/net/parser.rs): IpAddr, SocketAddr ---------

type netParser struct{ s string }

// atomically runs f and restores the input if f fails (read_atomically).
func (p *netParser) atomically(f func() bool) bool {
	saved := p.s
	if !f() {
		p.s = saved
		return false
	}
	return true
}

func (p *netParser) char(c byte) bool {
	if p.s != "" && p.s[0] == c {
		p.s = p.s[1:]
		return true
	}
	return false
}

func digitValue(c byte, radix uint32) (uint32, bool) {
	var d uint32
	switch {
	case c >= '0' && c <= '9':
		d = uint32(c - '0')
	case c >= 'a' && c <= 'z':
		d = uint32(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		d = uint32(c-'A') + 10
	default:
		return 0, false
	}
	return d, d < radix
}

// number is std's read_number: maxDigits 0 means unlimited (with checked
// arithmetic); the result must not exceed max.
func (p *netParser) number(radix uint32, maxDigits int, allowZeroPrefix bool, max uint64) (uint64, bool) {
	var r uint64
	ok := p.atomically(func() bool {
		leadingZero := p.s != "" && p.s[0] == '0'
		count := 0
		var v uint64
		for p.s != "" {
			d, isDigit := digitValue(p.s[0], radix)
			if !isDigit {
				break
			}
			p.s = p.s[1:]
			v = v*uint64(radix) + uint64(d)
			count++
			if maxDigits > 0 && count > maxDigits {
				return false
			}
			if maxDigits == 0 && v > max {
				return false // checked arithmetic in the target type
			}
		}
		if count == 0 || (!allowZeroPrefix && leadingZero && count > 1) || v > max {
			return false
		}
		r = v
		return true
	})
	return r, ok
}

func (p *netParser) ipv4() bool {
	return p.atomically(func() bool {
		for i := 0; i < 4; i++ {
			ok := p.atomically(func() bool {
				if i > 0 && !p.char('.') {
					return false
				}
				// No leading zeros (RFC 6943 3.1.1: no octal).
				_, ok := p.number(10, 3, false, 255)
				return ok
			})
			if !ok {
				return false
			}
		}
		return true
	})
}

func (p *netParser) ipv6() bool {
	// groups reads up to limit colon-separated groups, the last two of
	// which may be an embedded IPv4 address.
	groups := func(limit int) (int, bool) {
		for i := 0; i < limit; i++ {
			if i < limit-1 {
				v4 := p.atomically(func() bool { return (i == 0 || p.char(':')) && p.ipv4() })
				if v4 {
					return i + 2, true
				}
			}
			g := p.atomically(func() bool {
				if i > 0 && !p.char(':') {
					return false
				}
				_, ok := p.number(16, 4, true, 0xffff)
				return ok
			})
			if !g {
				return i, false
			}
		}
		return limit, false
	}
	return p.atomically(func() bool {
		head, headV4 := groups(8)
		if head == 8 {
			return true
		}
		if headV4 || !p.char(':') || !p.char(':') {
			return false
		}
		// "::" stands for at least one group.
		groups(8 - (head + 1))
		return true
	})
}

func (p *netParser) port() bool {
	return p.atomically(func() bool {
		if !p.char(':') {
			return false
		}
		_, ok := p.number(10, 0, true, math.MaxUint16)
		return ok
	})
}

func (p *netParser) socketV4() bool {
	return p.atomically(func() bool { return p.ipv4() && p.port() })
}

func (p *netParser) socketV6() bool {
	return p.atomically(func() bool {
		if !p.char('[') || !p.ipv6() {
			return false
		}
		p.atomically(func() bool { // optional %scope_id
			if !p.char('%') {
				return false
			}
			_, ok := p.number(10, 0, true, math.MaxUint32)
			return ok
		})
		return p.char(']') && p.port()
	})
}

// parseSocketAddr is std's FromStr for SocketAddr: IPv4:port or
// [IPv6%scope]:port, no host names.
func parseSocketAddr(s string) error {
	p := &netParser{s}
	if !p.socketV4() {
		p.socketV6()
	}
	if p.s != "" || s == "" {
		return errors.New("invalid socket address syntax")
	}
	return nil
}

// parseIPAddr is std's FromStr for IpAddr.
func parseIPAddr(s string) error {
	p := &netParser{s}
	if !p.ipv4() {
		p.ipv6()
	}
	if p.s != "" || s == "" {
		return errors.New("invalid IP address syntax")
	}
	return nil
}

// --- mz_ore::netio::SocketAddr (src/ore/src/netio/socket.rs) ----------------

// parseNetioSocketAddr: an absolute path is a Unix socket (std's
// sockaddr_un checks, Linux's 108-byte sun_path), "turmoil:..." anything,
// everything else std's SocketAddr.
func parseNetioSocketAddr(s string) error {
	switch {
	case strings.HasPrefix(s, "/"):
		if strings.IndexByte(s, 0) >= 0 {
			return errors.New("invalid unix socket address syntax: paths must not contain interior null bytes")
		}
		if len(s) >= 108 {
			return errors.New("invalid unix socket address syntax: path must be shorter than SUN_LEN")
		}
		return nil
	case strings.HasPrefix(s, "turmoil:"):
		return nil
	}
	if parseSocketAddr(s) != nil {
		return errors.New("invalid internet socket address syntax")
	}
	return nil
}

// --- ipnet 2.12.1, src/parser.rs: FromStr for IpNet -------------------------
//
// ipnet carries an older copy of std's parser: IPv4 octets may have leading
// zeros, and "::" may stand for no group at all.

type ipnetParser struct{ netParser }

// number is ipnet's read_number: at most maxDigits digits, value < upto.
func (p *ipnetParser) number(radix uint32, maxDigits int, upto uint64) bool {
	return p.atomically(func() bool {
		var r uint64
		count := 0
		for p.s != "" {
			d, ok := digitValue(p.s[0], radix)
			if !ok {
				break
			}
			p.s = p.s[1:]
			r = r*uint64(radix) + uint64(d)
			count++
			if count > maxDigits || r >= upto {
				return false
			}
		}
		return count > 0
	})
}

func (p *ipnetParser) ipv4() bool {
	return p.atomically(func() bool {
		for i := 0; i < 4; i++ {
			if i != 0 && !p.char('.') {
				return false
			}
			if !p.number(10, 3, 0x100) {
				return false
			}
		}
		return true
	})
}

func (p *ipnetParser) ipv6() bool {
	groups := func(limit int) (int, bool) {
		i := 0
		for i < limit {
			if i < limit-1 {
				if p.atomically(func() bool { return (i == 0 || p.char(':')) && p.ipv4() }) {
					return i + 2, true
				}
			}
			if !p.atomically(func() bool { return (i == 0 || p.char(':')) && p.number(16, 4, 0x10000) }) {
				return i, false
			}
			i++
		}
		return i, false
	}
	return p.atomically(func() bool {
		head, headV4 := groups(8)
		if head == 8 {
			return true
		}
		if headV4 || !p.char(':') || !p.char(':') {
			return false
		}
		groups(8 - head)
		return true
	})
}

func parseIPNet(s string) error {
	p := &ipnetParser{netParser{s}}
	v4 := p.atomically(func() bool { return p.ipv4() && p.char('/') && p.number(10, 2, 33) })
	if !v4 {
		p.atomically(func() bool { return p.ipv6() && p.char('/') && p.number(10, 3, 129) })
	}
	if p.s != "" || s == "" {
		return errors.New("invalid IP address syntax")
	}
	return nil
}

// --- uuid: FromStr for Uuid --------------------------------------------------

// parseUUID accepts what uuid's try_parse accepts (simple, hyphenated,
// braced, URN; pkg/mzuuid, which upstream's operator shares) and words the
// error as uuid's InvalidUuid::into_err (read at uuid 1.23.1).
func parseUUID(s string) error {
	if _, err := mzuuid.Canonical(s); err == nil {
		return nil
	}
	body, offset, simple := s, 0, true
	switch {
	case len(s) >= 2 && s[0] == '{' && s[len(s)-1] == '}':
		body, offset, simple = s[1:len(s)-1], 1, false
	case strings.HasPrefix(s, "urn:uuid:"):
		body, offset, simple = s[9:], 9, false
	}
	hyphens := 0
	var bounds [4]int
	for i, c := range body {
		switch {
		case c == '-':
			if hyphens < 4 {
				bounds[hyphens] = i
			}
			hyphens++
		case c < 0x80 && (c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
		default:
			return fmt.Errorf("invalid character: found `%c` at %d", c, i+offset+1)
		}
	}
	if hyphens == 0 && simple {
		return fmt.Errorf("invalid length: expected length 32 for simple format, found %d", len(s))
	}
	if hyphens != 4 {
		return fmt.Errorf("invalid group count: expected 5, found %d", hyphens+1)
	}
	starts := [5]int{0, 9, 14, 19, 24}
	lens := [5]int{8, 4, 4, 4, 12}
	for i := 0; i < 4; i++ {
		if bounds[i] != starts[i+1]-1 {
			return fmt.Errorf("invalid group length in group %d: expected %d, found %d", i, lens[i], bounds[i]-starts[i])
		}
	}
	return fmt.Errorf("invalid group length in group 4: expected 12, found %d", len(s)-starts[4])
}

// --- http 1.4.2: HeaderName, HeaderValue ------------------------------------

// parseHeaderValue: visible ASCII, space, tab and any byte >= 0x80.
func parseHeaderValue(s string) error {
	for i := 0; i < len(s); i++ {
		if b := s[i]; !(b >= 32 && b != 127 || b == '\t') {
			return errors.New("failed to parse header value")
		}
	}
	return nil
}

// parseHeaderName: 1 to 65535 bytes, each an RFC 9110 tchar.
func parseHeaderName(s string) error {
	if s == "" || len(s) > 1<<16-1 {
		return errors.New("invalid HTTP header name")
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0) {
			return errors.New("invalid HTTP header name")
		}
	}
	return nil
}

// --- mz_ore::cli::KeyValueArg (src/ore/src/cli.rs) and balancerd's
// parse_key_val (src/balancerd/src/bin/balancerd.rs) ---------------------

// parseKeyValueArg splits at the first '='; key and value are parsed with
// the given parsers (nil: String, which always parses).
func parseKeyValueArg(s string, key, value func(string) error) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return errors.New("must have format KEY=VALUE")
	}
	if key != nil {
		if err := key(k); err != nil {
			return fmt.Errorf("parsing key: %v", err)
		}
	}
	if value != nil {
		if err := value(v); err != nil {
			return fmt.Errorf("parsing value: %v", err)
		}
	}
	return nil
}

func parseKeyVal(s string) error {
	if !strings.Contains(s, "=") {
		return fmt.Errorf("invalid KEY=value: no `=` found in `%s`", s)
	}
	return nil
}

// --- mz_sql::catalog::EnvironmentId (src/sql/src/catalog.rs) ----------------

// environmentIDPattern is EnvironmentId's regex; the ordinal's \d is
// Unicode in Rust, but a non-ASCII digit then fails u64's FromStr with the
// same error.
var environmentIDPattern = regexp.MustCompile(`^([[:alnum:]]+)-([[:alnum:]\-]+)-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-(\d{1,8})$`)

// cloudProviders is CloudProvider's FromStr (src/cloud-provider/src/lib.rs),
// which lower-cases first.
var cloudProviders = map[string]bool{"local": true, "docker": true, "mzcompose": true, "cloudtest": true,
	"aws": true, "gcp": true, "azure": true, "generic": true}

func parseEnvironmentID(s string) error {
	if g := environmentIDPattern.FindStringSubmatch(s); g == nil || !cloudProviders[strings.ToLower(g[1])] {
		return errors.New("invalid environment ID")
	}
	return nil
}

// --- tracing-subscriber 0.3.23: EnvFilter::from_str -------------------------
//
// mz_tracing's CloneableEnvFilter parses with EnvFilter::from_str, that is
// EnvFilter::builder().parse(s) with regular expressions on: the string is
// split at ',' and each non-empty piece is a Directive.

var errDirective = errors.New("invalid filter directive")

func parseEnvFilter(s string) error {
	if s == "" {
		return nil
	}
	for _, d := range strings.Split(s, ",") {
		if d == "" {
			continue
		}
		if err := parseDirective(d); err != nil {
			return err
		}
	}
	return nil
}

// parseLevelFilter is tracing-core 0.1.36's FromStr for LevelFilter.
func parseLevelFilter(s string) error {
	if n, ok := rustParseUint(s); ok && n <= 5 {
		return nil
	}
	for _, l := range []string{"", "error", "warn", "info", "debug", "trace", "off"} {
		if asciiEqualFold(s, l) {
			return nil
		}
	}
	return errors.New(`error parsing level filter: expected one of "off", "error", "warn", "info", "debug", "trace", or a number 0-5`)
}

// rustParseUint is usize's FromStr (a leading '+' is allowed).
func rustParseUint(s string) (uint64, bool) {
	s = strings.TrimPrefix(s, "+")
	if s == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		var ok1, ok2 bool
		if n, ok1 = mulOK(n, 10); ok1 {
			n, ok2 = addOK(n, uint64(s[i]-'0'))
		}
		if !ok1 || !ok2 {
			return 0, false
		}
	}
	return n, true
}

func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x >= 'A' && x <= 'Z' {
			x += 'a' - 'A'
		}
		if y >= 'A' && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// parseDirective is Directive::parse. Upstream walks the trimmed string but
// slices the untrimmed one with the trimmed string's indices, so leading
// whitespace shifts every slice (and may cut a character, which panics).
func parseDirective(from string) error {
	trimmed := strings.TrimFunc(from, isRustWhitespace)
	slice := func(i, j int) (string, error) {
		for _, k := range []int{i, j} {
			if k < len(from) && !utf8.RuneStart(from[k]) {
				return "", &panicError{charBoundaryPanic(from, k)}
			}
		}
		return from[i:j], nil
	}
	const (
		start = iota
		levelOrTarget
		span
		field
		fields
		target
		level
	)
	state, mark := start, 0
	for i, c := range trimmed {
		switch state {
		case start:
			switch {
			case c == '[':
				state, mark = span, i+1
			case c != '-' && c != ':' && c != '_' && !isRustAlphanumeric(c):
				return errDirective
			default:
				state, mark = levelOrTarget, i
			}
		case levelOrTarget:
			switch c {
			case '=':
				if _, err := slice(mark, i); err != nil {
					return err
				}
				state, mark = level, i+1
			case '[':
				if _, err := slice(mark, i); err != nil {
					return err
				}
				state, mark = span, i+1
			}
		case target:
			if c != '=' {
				return errDirective
			}
			state, mark = level, i+1
		case span:
			switch c {
			case ']':
				if _, err := slice(mark, i); err != nil {
					return err
				}
				state = target
			case '{':
				if _, err := slice(mark, i); err != nil {
					return err
				}
				state, mark = field, i+1
			}
		case field:
			if c == '}' {
				f, err := slice(mark, i)
				if err != nil {
					return err
				}
				if f == "" {
					return errDirective
				}
				// A field value that is not a bool or a number is a
				// regular expression; its syntax is not checked here.
				state = fields
			}
		case fields:
			if c != ']' {
				return errDirective
			}
			state = target
		case level:
		}
		// ',' never reaches Directive::parse: the filter was split at it.
	}
	switch state {
	case levelOrTarget:
		// A level or else a target: never an error.
		_, err := slice(mark, len(from))
		return err
	case level:
		l, err := slice(mark, len(from))
		if err != nil {
			return err
		}
		if l == "" {
			return nil
		}
		return parseLevelFilter(l)
	case target:
		return nil
	}
	return errDirective
}

// isRustAlphanumeric is char::is_alphanumeric: Alphabetic or Numeric.
func isRustAlphanumeric(c rune) bool {
	return unicode.IsLetter(c) || unicode.IsNumber(c) || unicode.Is(unicode.Other_Alphabetic, c)
}

// charBoundaryPanic is the message of str slicing at a byte inside a
// character (core::str::slice_error_fail).
func charBoundaryPanic(s string, index int) string {
	start := index
	for start > 0 && !utf8.RuneStart(s[start]) {
		start--
	}
	c, n := utf8.DecodeRuneInString(s[start:])
	trunc, ellipsis := s, ""
	if len(s) > 256 {
		cut := 256
		for !utf8.RuneStart(s[cut]) {
			cut--
		}
		trunc, ellipsis = s[:cut], "[...]"
	}
	return fmt.Sprintf("byte index %d is not a char boundary; it is inside %s (bytes %d..%d) of `%s`%s",
		index, rustCharDebug(c), start, start+n, trunc, ellipsis)
}

// rustCharDebug is {:?} of a non-ASCII char, closely enough for a panic
// message: printable characters as themselves, others as \u{...}.
func rustCharDebug(c rune) string {
	if unicode.IsGraphic(c) && !unicode.In(c, unicode.Mn, unicode.Me) {
		return "'" + string(c) + "'"
	}
	return `'\u{` + strconv.FormatInt(int64(c), 16) + `}'`
}
