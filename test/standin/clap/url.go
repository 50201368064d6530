package clap

// url 2.5.8 (servo/rust-url, url/src/parser.rs and host.rs) with idna 1.1.0,
// as mz_ore's SensitiveUrl parses: Url::parse without a base. Only whether a
// string parses is modelled (SensitiveUrlParser drops url's error), but the
// functions return url::ParseError's text for tests and readers.
//
// Not modelled: the UTS 46 processing of non-ASCII host labels and the
// decoding of "xn--" labels (mapping, validity, bidi and joiner rules need
// Unicode tables): such labels are accepted unless they hold an invalid
// percent-encoded UTF-8 sequence, U+FFFD or a forbidden ASCII character, or
// an "xn--" label ends with '-' or is longer than idna's limit; a non-ASCII
// last label is taken not to be a number (its punycode form is not).
// URLs longer than 4 GiB are not refused.

import (
	"errors"
	"math"
	"strings"
	"unicode/utf8"
)

var (
	errURLRelative    = errors.New("relative URL without a base")
	errURLEmptyHost   = errors.New("empty host")
	errURLIdna        = errors.New("invalid international domain name")
	errURLPort        = errors.New("invalid port number")
	errURLIPv4        = errors.New("invalid IPv4 address")
	errURLIPv6        = errors.New("invalid IPv6 address")
	errURLDomainChar  = errors.New("invalid domain character")
	specialURLSchemes = map[string]bool{"http": true, "https": true, "ws": true, "wss": true, "ftp": true}
)

// parseURL is Url::parse(s) (Parser::parse_url with no base).
func parseURL(s string) error {
	// Leading and trailing C0 controls and spaces are trimmed; tabs and
	// newlines are skipped everywhere, which is the same as removing them.
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	s = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
	scheme, rest, ok := urlScheme(s)
	if !ok {
		return errURLRelative
	}
	switch {
	case scheme == "file":
		return urlFile(rest)
	case specialURLSchemes[scheme]:
		// Any number of slashes and backslashes, even none.
		return urlAuthority(strings.TrimLeft(rest, `/\`), true)
	case strings.HasPrefix(rest, "//"):
		return urlAuthority(rest[2:], false)
	}
	// A path-only URL ("mailto:x", "localhost:5432") cannot fail.
	return nil
}

// urlScheme reads an ASCII letter, then letters, digits, '+', '-', '.', up
// to ':'.
func urlScheme(s string) (string, string, bool) {
	if s == "" || !isASCIIAlpha(s[0]) {
		return "", "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isASCIIAlpha(c) || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.':
		case c == ':':
			return strings.ToLower(s[:i]), s[i+1:], true
		default:
			return "", "", false
		}
	}
	return "", "", false
}

func isASCIIAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// urlAuthority is after_double_slash: userinfo, host, port.
func urlAuthority(s string, special bool) error {
	isEnd := func(c byte) bool { return c == '/' || c == '?' || c == '#' || special && c == '\\' }
	// The userinfo ends at the last '@' before the end of the authority.
	end := len(s)
	for i := 0; i < len(s); i++ {
		if isEnd(s[i]) {
			end = i
			break
		}
	}
	hasAuthority := false
	if at := strings.LastIndexByte(s[:end], '@'); at >= 0 {
		userinfo := s[:at]
		s = s[at+1:]
		if userinfo == "" {
			if s != "" && isEnd(s[0]) {
				return errURLEmptyHost
			}
		}
		// Something is written unless the userinfo is "" or ":".
		hasAuthority = userinfo != "" && userinfo != ":"
	}
	// The host ends at ':' outside brackets, or at the end of the authority.
	i, brackets := 0, false
	for ; i < len(s); i++ {
		c := s[i]
		if c == ':' && !brackets || isEnd(c) {
			break
		}
		if c == '[' {
			brackets = true
		} else if c == ']' {
			brackets = false
		}
	}
	host, rest := s[:i], s[i:]
	if special && host == "" {
		return errURLEmptyHost
	}
	empty := false
	if special {
		if err := urlHost(host); err != nil {
			return err
		}
	} else {
		if err := urlOpaqueHost(host); err != nil {
			return err
		}
		empty = host == ""
	}
	if empty && strings.HasPrefix(rest, ":") {
		return errURLEmptyHost
	}
	if strings.HasPrefix(rest, ":") {
		if err := urlPort(rest[1:]); err != nil {
			return err
		}
	}
	if empty && hasAuthority {
		return errURLEmptyHost
	}
	// The path, query and fragment never fail.
	return nil
}

// urlPort: digits up to 65535, ending at '/', '\', '?', '#' or the end.
func urlPort(s string) error {
	port := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			port = port*10 + int(c-'0')
			if port > math.MaxUint16 {
				return errURLPort
			}
		case c == '/' || c == '\\' || c == '?' || c == '#':
			return nil
		default:
			return errURLPort
		}
	}
	return nil
}

// urlFile is parse_file without a base: only "file://host/..." parses a
// host.
func urlFile(s string) error {
	if len(s) < 2 || (s[0] != '/' && s[0] != '\\') || (s[1] != '/' && s[1] != '\\') {
		return nil
	}
	s = s[2:]
	end := strings.IndexAny(s, `/\?#`)
	if end < 0 {
		end = len(s)
	}
	host := s[:end]
	if host == "" || len(host) == 2 && isASCIIAlpha(host[0]) && (host[1] == ':' || host[1] == '|') {
		return nil // no host, or a Windows drive letter
	}
	return urlHost(host)
}

// urlHost is Host::parse (parse_cow) for special schemes.
func urlHost(s string) error {
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return errURLIPv6
		}
		return urlIPv6(s[1 : len(s)-1])
	}
	domain, err := urlDomainToASCII(urlPercentDecode(s))
	if err != nil {
		return err
	}
	if domain == "" {
		return errURLEmptyHost
	}
	if urlEndsInANumber(domain) {
		return urlIPv4(domain)
	}
	return nil
}

// urlOpaqueHost is Host::parse_opaque for other schemes.
func urlOpaqueHost(s string) error {
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return errURLIPv6
		}
		return urlIPv6(s[1 : len(s)-1])
	}
	if strings.ContainsAny(s, "\x00\t\n\r #/:<>?@[\\]^|") {
		return errURLDomainChar
	}
	return nil
}

func urlPercentDecode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			h, _ := digitValue(s[i+1], 16)
			l, _ := digitValue(s[i+2], 16)
			b.WriteByte(byte(h<<4 | l))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool { _, ok := digitValue(c, 16); return ok }

// urlDeniedASCII is idna's AsciiDenyList::URL: C0 controls, space, DEL and
// the WHATWG forbidden domain code points.
func urlDeniedASCII(c byte) bool {
	return c <= ' ' || c == 0x7f || strings.IndexByte("%#/:<>?@[\\]^|", c) >= 0
}

// urlDomainToASCII is idna::domain_to_ascii_from_cow with the URL deny
// list, for what it can decide without Unicode tables (see the file
// comment). It returns the lower-cased domain, non-ASCII labels replaced by
// "xn--".
func urlDomainToASCII(s string) (string, error) {
	if !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
		return "", errURLIdna
	}
	labels := strings.Split(s, ".")
	for i, l := range labels {
		ascii := true
		for j := 0; j < len(l); j++ {
			if l[j] >= 0x80 {
				ascii = false
			} else if urlDeniedASCII(l[j]) {
				return "", errURLIdna
			}
		}
		if !ascii {
			labels[i] = "xn--"
			continue
		}
		l = strings.ToLower(l)
		if strings.HasPrefix(l, "xn--") && (strings.HasSuffix(l, "-") || len(l)-4 > 2000) {
			return "", errURLIdna
		}
		labels[i] = l
	}
	return strings.Join(labels, "."), nil
}

// urlEndsInANumber is the WHATWG ends-in-a-number checker.
func urlEndsInANumber(domain string) bool {
	parts := strings.Split(domain, ".")
	last := parts[len(parts)-1]
	if last == "" {
		if len(parts) == 1 {
			return false
		}
		last = parts[len(parts)-2]
	}
	if last != "" && strings.Trim(last, "0123456789") == "" {
		return true
	}
	_, err := urlIPv4Number(last)
	return err == nil
}

// urlIPv4Number parses decimal, 0x hexadecimal or 0 octal; ok=false with a
// nil error is a number that overflows 32 bits.
func urlIPv4Number(s string) (uint64, error) {
	if s == "" {
		return 0, errURLIPv4
	}
	radix := uint32(10)
	switch {
	case strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"):
		s, radix = s[2:], 16
	case len(s) >= 2 && s[0] == '0':
		s, radix = s[1:], 8
	}
	if s == "" {
		return 0, nil
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		d, ok := digitValue(s[i], radix)
		if !ok {
			return 0, errURLIPv4
		}
		if n <= math.MaxUint32 {
			n = n*uint64(radix) + uint64(d)
		}
	}
	return n, nil // > MaxUint32 when it overflows
}

// urlIPv4 is the WHATWG IPv4 parser.
func urlIPv4(s string) error {
	parts := strings.Split(s, ".")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 4 || len(parts) == 0 {
		return errURLIPv4
	}
	var nums []uint64
	for _, p := range parts {
		n, err := urlIPv4Number(p)
		if err != nil || n > math.MaxUint32 {
			return errURLIPv4
		}
		nums = append(nums, n)
	}
	last := nums[len(nums)-1]
	if last > math.MaxUint32>>(8*(len(nums)-1)) {
		return errURLIPv4
	}
	for _, n := range nums[:len(nums)-1] {
		if n > 255 {
			return errURLIPv4
		}
	}
	return nil
}

// urlIPv6 is the WHATWG IPv6 parser (parse_ipv6addr).
func urlIPv6(s string) error {
	n := len(s)
	if n < 2 {
		return errURLIPv6
	}
	piece, compress, i := 0, -1, 0
	if s[0] == ':' {
		if s[1] != ':' {
			return errURLIPv6
		}
		i, piece, compress = 2, 1, 1
	}
	v4 := false
	for i < n {
		if piece == 8 {
			return errURLIPv6
		}
		if s[i] == ':' {
			if compress >= 0 {
				return errURLIPv6
			}
			i++
			piece++
			compress = piece
			continue
		}
		start := i
		for i < n && i < start+4 && isHex(s[i]) {
			i++
		}
		if i < n {
			switch s[i] {
			case '.':
				if i == start || piece > 6 {
					return errURLIPv6
				}
				i, v4 = start, true
			case ':':
				i++
				if i == n {
					return errURLIPv6
				}
			default:
				return errURLIPv6
			}
		}
		if v4 {
			break
		}
		piece++
	}
	if v4 {
		seen := 0
		for i < n {
			if seen > 0 {
				if seen < 4 && s[i] == '.' {
					i++
				} else {
					return errURLIPv6
				}
			}
			value := -1
			for i < n && s[i] >= '0' && s[i] <= '9' {
				d := int(s[i] - '0')
				switch value {
				case -1:
					value = d
				case 0:
					return errURLIPv6 // no leading zero
				default:
					value = value*10 + d
					if value > 255 {
						return errURLIPv6
					}
				}
				i++
			}
			if value < 0 {
				return errURLIPv6
			}
			seen++
			if seen == 2 || seen == 4 {
				piece++
			}
		}
		if seen != 4 {
			return errURLIPv6
		}
	}
	if i < n {
		return errURLIPv6
	}
	if compress < 0 && piece != 8 {
		return errURLIPv6
	}
	return nil
}
