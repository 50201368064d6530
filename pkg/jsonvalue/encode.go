package jsonvalue

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Append appends the JSON encoding of v to dst, byte for byte what
// json.Marshal writes. The types Decode produces are written directly;
// any other value goes through json.Marshal.
func Append(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return AppendString(dst, v), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case json.Number:
		return appendNumber(dst, v)
	case map[string]any:
		return appendObject(dst, v)
	case []any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = Append(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	}
	b, err := json.Marshal(v)
	return append(dst, b...), err
}

// stackMembers is how many members an object may have before sorting
// them costs an allocation.
const stackMembers = 16

// member is a key and its value, sorted together: writing from the sorted
// pairs looks no key up a second time.
type member struct {
	key   string
	value any
}

func appendObject(dst []byte, m map[string]any) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	var buf [stackMembers]member
	members := buf[:0]
	for k, v := range m {
		members = append(members, member{k, v})
	}
	sortMembers(members)
	dst = append(dst, '{')
	for i, mb := range members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, mb.key)
		dst = append(dst, ':')
		var err error
		if dst, err = Append(dst, mb.value); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// sortMembers sorts by key. Most objects have a handful of members, which
// an insertion sort comparing keys directly sorts faster than one calling
// a comparison function; a tenant's map of thousands takes the O(n log n)
// sort.
func sortMembers(members []member) {
	if len(members) > stackMembers {
		slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
		return
	}
	for i := 1; i < len(members); i++ {
		for j := i; j > 0 && members[j].key < members[j-1].key; j-- {
			members[j], members[j-1] = members[j-1], members[j]
		}
	}
}

func appendNumber(dst []byte, n json.Number) ([]byte, error) {
	s := string(n)
	if s == "" {
		s = "0" // as json.Marshal writes an empty Number
	}
	if end, ok := numberEnd(s, 0); !ok || end != len(s) {
		return dst, fmt.Errorf("json: invalid number literal %q", s)
	}
	return append(dst, s...), nil
}

// AppendString appends s as a JSON string, escaped as json.Marshal escapes
// it: HTML-sensitive characters, U+2028 and U+2029 as \u escapes, invalid
// UTF-8 as U+FFFD.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if len(s)-i >= 8 {
			if i = skipPlainHTML(s, i); i == len(s) {
				break
			}
		}
		if b := s[i]; b < utf8.RuneSelf {
			if plain[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// StringLen is the length of what AppendString appends for s, found
// without writing it.
func StringLen(s string) int {
	n := len(s) + 2
	for i := 0; i < len(s); {
		if len(s)-i >= 8 {
			if i = skipPlainHTML(s, i); i == len(s) {
				break
			}
		}
		if b := s[i]; b < utf8.RuneSelf {
			switch {
			case plain[b]:
			case b == '\\' || b == '"' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
				n++
			default:
				n += 5
			}
			i++
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			n += 5
		case c == '\u2028' || c == '\u2029':
			n += 3
		}
		i += size
	}
	return n
}

const hexDigits = "0123456789abcdef"

// plain marks the ASCII bytes a string holds as they are.
var plain = func() (t [utf8.RuneSelf]bool) {
	for b := ' '; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()
