// Package jsonvalue decodes and encodes JSON values as encoding/json does
// into and from `any` (objects as map[string]any, arrays as []any, numbers
// as json.Number), in one pass and without reflection. The conversion
// webhook decodes, converts and re-encodes every object it is sent; with
// encoding/json that JSON work cost four times the conversion itself.
//
// The result is the same as encoding/json's, value for value and byte for
// byte (the fuzz tests hold it to that): invalid UTF-8 in strings becomes
// U+FFFD, a repeated key keeps its last value, map keys are written sorted
// and strings HTML-escaped.
package jsonvalue

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// MaxDepth bounds nesting, as encoding/json does: deeper input is refused
// rather than recursed into (a 16 MiB body of '[' would otherwise exhaust
// the goroutine's stack and end the process).
const MaxDepth = 10000

// SyntaxError is a description of malformed input and the byte offset at
// which it was found.
type SyntaxError struct {
	Offset int
	msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s at offset %d", e.msg, e.Offset) }

// Decoder decodes JSON held in a string. Keys, strings without escapes and
// numbers are substrings of the input, so they cost no allocation of their
// own; they keep the whole input alive while any of them is.
type Decoder struct {
	data  string
	pos   int
	depth int
	// boxes holds the string headers strings and numbers are boxed in
	// (box), a chunk at a time.
	boxes []string
}

// Decode decodes data, which must hold exactly one JSON value.
func Decode(data []byte) (any, error) {
	return DecodeString(string(data))
}

// DecodeString decodes data, which must hold exactly one JSON value.
func DecodeString(data string) (any, error) {
	d := Decoder{data: data}
	d.skipSpace()
	v, err := d.value()
	if err != nil {
		return nil, err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return nil, d.errorf("data after the top-level value")
	}
	return v, nil
}

// DecodeFirst decodes the JSON value at the start of data and returns
// where it ends; what follows is not looked at.
func DecodeFirst(data string) (v any, end int, err error) {
	d := Decoder{data: data}
	if v, err = d.value(); err != nil {
		return nil, 0, err
	}
	return v, d.pos, nil
}

// StringFirst reads the JSON string at the start of data, as Decode
// would, and returns where it ends: a string costs no boxing this way.
func StringFirst(data string) (s string, end int, ok bool) {
	if !strings.HasPrefix(data, `"`) {
		return "", 0, false
	}
	d := Decoder{data: data}
	raw, plain, err := d.scanString()
	if err != nil {
		return "", 0, false
	}
	if !plain {
		raw = unquote(raw)
	}
	return raw, d.pos, true
}

func (d *Decoder) errorf(format string, args ...any) error {
	return &SyntaxError{Offset: d.pos, msg: fmt.Sprintf(format, args...)}
}

func (d *Decoder) unexpected(context string) error {
	if d.pos >= len(d.data) {
		return d.errorf("unexpected end of JSON input %s", context)
	}
	return d.errorf("invalid character %q %s", d.data[d.pos], context)
}

func (d *Decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *Decoder) value() (any, error) {
	if d.pos >= len(d.data) {
		return nil, d.unexpected("looking for beginning of value")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, d.unexpected("looking for beginning of value")
}

func (d *Decoder) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if d.pos >= len(d.data) || d.data[d.pos] != word[i] {
			return d.unexpected("in literal " + word)
		}
		d.pos++
	}
	return nil
}

func (d *Decoder) enter() error {
	d.depth++
	if d.depth > MaxDepth {
		return d.errorf("exceeded max depth %d", MaxDepth)
	}
	return nil
}

func (d *Decoder) object() (any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	d.pos++ // '{'
	// One allocation for a map of up to 8 members, where an empty literal
	// allocates its table on the first insert.
	m := map[string]any{}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		d.depth--
		return m, nil
	}
	for {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, d.unexpected("looking for beginning of object key string")
		}
		key, err := d.key()
		if err != nil {
			return nil, err
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, d.unexpected("after object key")
		}
		d.pos++
		d.skipSpace()
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		m[key] = v
		d.skipSpace()
		if d.pos < len(d.data) {
			switch d.data[d.pos] {
			case ',':
				d.pos++
				d.skipSpace()
				continue
			case '}':
				d.pos++
				d.depth--
				return m, nil
			}
		}
		return nil, d.unexpected("after object key:value pair")
	}
}

func (d *Decoder) array() (any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	d.pos++ // '['
	a := []any{}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		d.depth--
		return a, nil
	}
	for {
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		d.skipSpace()
		if d.pos < len(d.data) {
			switch d.data[d.pos] {
			case ',':
				d.pos++
				d.skipSpace()
				continue
			case ']':
				d.pos++
				d.depth--
				return a, nil
			}
		}
		return nil, d.unexpected("after array element")
	}
}

func (d *Decoder) key() (string, error) {
	raw, plain, err := d.scanString()
	if err != nil || plain {
		return raw, err
	}
	return unquote(raw), nil
}

func (d *Decoder) str() (any, error) {
	raw, plain, err := d.scanString()
	if err != nil {
		return nil, err
	}
	if !plain {
		raw = unquote(raw)
	}
	if raw == "" {
		return "", nil // boxed without allocating
	}
	return d.box(raw, stringType), nil
}

// Boxing a string or a number in an interface allocates its header, and a
// realistic object holds dozens: box takes the headers from chunks
// instead, one allocation for many values (which all live as long as the
// decoded document, the way the webhook uses it). The chunks grow with
// the document, so the last one wastes at most half its room.
const (
	firstBoxes = 4
	maxBoxes   = 128
)

// eface is the layout of an interface value: its type, and a pointer to
// the value (here a string header in a chunk).
type eface struct {
	typ, data unsafe.Pointer
}

var (
	stringType = typeOf("")
	numberType = typeOf(json.Number(""))
)

func typeOf(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

// box is any(s) of the type typ (string or json.Number, whose values are
// both a string header).
func (d *Decoder) box(s string, typ unsafe.Pointer) any {
	if len(d.boxes) == cap(d.boxes) {
		d.boxes = make([]string, 0, min(max(2*cap(d.boxes), firstBoxes), maxBoxes))
	}
	d.boxes = append(d.boxes, s)
	var v any
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = typ, unsafe.Pointer(&d.boxes[len(d.boxes)-1])
	return v
}

// scanString validates the string starting at d.pos and returns its body
// (without quotes), and whether the body is plain: no escapes and valid
// UTF-8, so that it is its own value.
func (d *Decoder) scanString() (body string, plain bool, err error) {
	d.pos++ // '"'
	start := d.pos
	plain = true
	for d.pos < len(d.data) {
		if d.pos = SkipPlain(d.data, d.pos); d.pos == len(d.data) {
			break
		}
		c := d.data[d.pos]
		if c < utf8.RuneSelf && plainInString[c] {
			d.pos++
			continue
		}
		switch {
		case c == '"':
			body = d.data[start:d.pos]
			d.pos++
			return body, plain, nil
		case c == '\\':
			plain = false
			d.pos++
			if d.pos >= len(d.data) {
				return "", false, d.unexpected("in string escape code")
			}
			switch d.data[d.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.pos++
			case 'u':
				d.pos++
				for range 4 {
					if d.pos >= len(d.data) || !isHex(d.data[d.pos]) {
						return "", false, d.unexpected("in \\u hexadecimal character escape")
					}
					d.pos++
				}
			default:
				return "", false, d.unexpected("in string escape code")
			}
		case c < ' ':
			return "", false, d.unexpected("in string literal")
		case c < utf8.RuneSelf:
			d.pos++
		default:
			r, size := utf8.DecodeRuneInString(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				plain = false
			}
			d.pos += size
		}
	}
	return "", false, d.unexpected("in string literal")
}

// plainInString marks the ASCII bytes that stand for themselves in a string.
var plainInString = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// unquote decodes a string body scanString accepted, as encoding/json does:
// an unpaired surrogate and invalid UTF-8 become U+FFFD.
func unquote(s string) string {
	b := make([]byte, 0, len(s))
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			r++
			switch s[r] {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := hex4(s[r+1:])
				r += 5
				if utf16.IsSurrogate(rr) {
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(s[r+2:])); dec != utf8.RuneError {
							b = utf8.AppendRune(b, dec)
							r += 6
							continue
						}
					}
					rr = utf8.RuneError
				}
				b = utf8.AppendRune(b, rr)
				continue
			default: // '"', '\\', '/'
				b = append(b, s[r])
			}
			r++
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRuneInString(s[r:])
			b = utf8.AppendRune(b, rr)
			r += size
		}
	}
	return string(b)
}

func hex4(s string) rune {
	var r rune
	for i := range 4 {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// number scans a number.
func (d *Decoder) number() (any, error) {
	end, ok := numberEnd(d.data, d.pos)
	if !ok {
		d.pos = end
		return nil, d.unexpected("in numeric literal")
	}
	n := d.data[d.pos:end]
	d.pos = end
	return d.box(n, numberType), nil
}

// numberEnd returns where the number starting at s[i] ends, and whether it
// is one in JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// On failure it returns the offset of the offending byte.
func numberEnd[T []byte | string](s T, i int) (int, bool) {
	digits := func() int {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		digits()
	default:
		return i, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return i, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return i, false
		}
	}
	return i, true
}
