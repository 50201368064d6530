package clap

// TimelyConfig is clusterd's --storage-timely-config and
// --compute-timely-config: serde_json::from_str into mz_cluster_client's
// TimelyConfig (src/cluster-client/src/client.rs; serde_json 1.0.151). The
// struct has no serde attributes, so every field but the Option is
// required, unknown fields are ignored, and a JSON array fills the fields
// in order. The messages are serde_json's; positions are "line L column C"
// with C counted in bytes up to the end of the last token read, as
// serde_json counts them.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// timelyField is one field of TimelyConfig in declaration order.
type timelyField struct {
	name     string
	kind     string // usize, u32, bool, strings
	optional bool
}

var timelyFields = []timelyField{
	{"workers", "usize", false},
	{"process", "usize", false},
	{"addresses", "strings", false},
	{"arrangement_exert_proportionality", "u32", false},
	{"enable_zero_copy", "bool", false},
	{"enable_zero_copy_lgalloc", "bool", false},
	{"zero_copy_limit", "usize", true},
}

// TimelyConfigValue is the part of a parsed TimelyConfig the stand-in uses.
type TimelyConfigValue struct {
	Workers   uint64
	Addresses []string
}

// ParseTimelyConfig parses s as clusterd does.
func ParseTimelyConfig(s string) (TimelyConfigValue, error) {
	p := &serdeJSON{src: s, dec: json.NewDecoder(strings.NewReader(s))}
	p.dec.UseNumber()
	var out TimelyConfigValue
	tok, err := p.token()
	if err != nil {
		return out, err
	}
	seen := map[string]bool{}
	set := func(f timelyField) error {
		v, err := p.value(f)
		if err != nil {
			return err
		}
		switch f.name {
		case "workers":
			out.Workers = v.(uint64)
		case "addresses":
			out.Addresses = v.([]string)
		}
		seen[f.name] = true
		return nil
	}
	switch tok {
	case json.Delim('{'):
		for p.dec.More() {
			k, err := p.dec.Token()
			if err != nil {
				var se *json.SyntaxError
				if errors.As(err, &se) && !strings.Contains(se.Error(), "looking for") && !strings.Contains(se.Error(), " after ") {
					// Go's decoder says no more than "invalid character".
					p.off = p.next(p.off, ",") + 1
					return out, p.errorf("key must be a string")
				}
				return out, p.syntax(err)
			}
			p.off = int(p.dec.InputOffset())
			key, _ := k.(string)
			var f *timelyField
			for i := range timelyFields {
				if timelyFields[i].name == key {
					f = &timelyFields[i]
				}
			}
			if f == nil { // ignored, as serde does without deny_unknown_fields
				var skip json.RawMessage
				if err := p.dec.Decode(&skip); err != nil {
					return out, p.syntax(err)
				}
				p.off = int(p.dec.InputOffset())
				continue
			}
			if seen[key] {
				return out, p.errorf("duplicate field `%s`", key)
			}
			if err := set(*f); err != nil {
				return out, err
			}
		}
		if _, err := p.token(); err != nil { // '}'
			return out, err
		}
		for _, f := range timelyFields {
			if !f.optional && !seen[f.name] {
				return out, p.errorf("missing field `%s`", f.name)
			}
		}
	case json.Delim('['):
		n := 0
		for ; p.dec.More(); n++ {
			if n == len(timelyFields) {
				// serde_json finds an element past the struct's end.
				p.off = p.next(p.off, ",") + 1
				return out, p.errorf("trailing characters")
			}
			if err := set(timelyFields[n]); err != nil {
				return out, err
			}
		}
		if _, err := p.token(); err != nil { // ']'
			return out, err
		}
		if n < len(timelyFields) {
			return out, p.errorf("invalid length %d, expected struct TimelyConfig with 7 elements", n)
		}
	default:
		return out, p.errorf("invalid type: %s, expected struct TimelyConfig", describe(tok))
	}
	// serde_json::from_str refuses anything but whitespace after the value.
	rest := strings.TrimLeft(s[p.dec.InputOffset():], " \t\n\r")
	if rest != "" {
		p.off = len(s) - len(rest) + 1
		return out, p.errorf("trailing characters")
	}
	return out, nil
}

// serdeJSON reads tokens and words errors as serde_json does.
type serdeJSON struct {
	src string
	dec *json.Decoder
	off int // bytes read, for the position of the next error
}

func (p *serdeJSON) token() (json.Token, error) {
	t, err := p.dec.Token()
	if err != nil {
		return nil, p.syntax(err)
	}
	p.off = int(p.dec.InputOffset())
	return t, nil
}

// errorf adds serde_json's position: the line and the column of the last
// byte read.
func (p *serdeJSON) errorf(format string, a ...any) error {
	before := p.src[:min(p.off, len(p.src))]
	line := strings.Count(before, "\n") + 1
	col := len(before) - (strings.LastIndexByte(before, '\n') + 1)
	return fmt.Errorf("%s at line %d column %d", fmt.Sprintf(format, a...), line, col)
}

// next is the index of the first byte at or after i that is not
// whitespace, past one separator of seps.
func (p *serdeJSON) next(i int, seps string) int {
	skip := func() {
		for i < len(p.src) && strings.ContainsRune(" \t\n\r", rune(p.src[i])) {
			i++
		}
	}
	skip()
	if i < len(p.src) && seps != "" && strings.ContainsRune(seps, rune(p.src[i])) {
		i++
		skip()
	}
	return i
}

// syntax words a JSON syntax error as serde_json does, at the byte it
// stopped at.
func (p *serdeJSON) syntax(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		p.off = len(p.src)
		return p.errorf("EOF while parsing %s", p.openAtEOF())
	case errors.As(err, &se):
		msg := se.Error()
		at := p.next(p.off, ":,")
		if strings.Contains(msg, "after object key") && !strings.Contains(msg, "key:value") {
			at = p.next(p.off, "")
		}
		var what string
		switch {
		case strings.Contains(msg, "in literal"):
			// serde_json reads the literal up to its first wrong byte.
			for _, lit := range []string{"true", "false", "null"} {
				if at < len(p.src) && p.src[at] == lit[0] {
					i := 0
					for i < len(lit) && at+i < len(p.src) && p.src[at+i] == lit[i] {
						i++
					}
					at += i
					break
				}
			}
			what = "expected ident"
		case strings.Contains(msg, "looking for beginning of object key string"):
			what = "key must be a string"
		case strings.Contains(msg, "after object key:value pair"):
			what = "expected `,` or `}`"
		case strings.Contains(msg, "after object key"):
			what = "expected `:`"
		case strings.Contains(msg, "after array element"):
			what = "expected `,` or `]`"
		default:
			what = "expected value"
		}
		p.off = at + 1
		return p.errorf("%s", what)
	}
	return p.errorf("%v", err)
}

// openAtEOF is what serde_json was parsing when the input ended: a string
// left open, a value after ':' or ',', else the innermost open object or
// list.
func (p *serdeJSON) openAtEOF() string {
	var stack []byte
	inString, escaped := false, false
	last := byte(0)
	for i := 0; i < len(p.src); i++ {
		c := p.src[i]
		switch {
		case inString:
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			stack = append(stack, c)
		case (c == '}' || c == ']') && len(stack) > 0:
			stack = stack[:len(stack)-1]
		}
		if !strings.ContainsRune(" \t\n\r", rune(c)) {
			last = c
		}
	}
	switch {
	case inString:
		return "a string"
	case last == ':' || last == ',' || len(stack) == 0:
		return "a value"
	case stack[len(stack)-1] == '[':
		return "a list"
	}
	return "an object"
}

// value reads f's value.
func (p *serdeJSON) value(f timelyField) (any, error) {
	if f.kind == "strings" {
		t, err := p.token()
		if err != nil {
			return nil, err
		}
		if t != json.Delim('[') {
			if d, ok := t.(json.Delim); ok && d == '{' {
				p.off-- // serde_json stops before the brace
				return nil, p.errorf("invalid type: map, expected a sequence")
			}
			return nil, p.errorf("invalid type: %s, expected a sequence", describe(t))
		}
		out := []string{}
		for p.dec.More() {
			e, err := p.token()
			if err != nil {
				return nil, err
			}
			s, ok := e.(string)
			if !ok {
				return nil, p.errorf("invalid type: %s, expected a string", describe(e))
			}
			out = append(out, s)
		}
		if _, err := p.token(); err != nil {
			return nil, err
		}
		return out, nil
	}
	var raw json.RawMessage
	if err := p.dec.Decode(&raw); err != nil {
		return nil, p.syntax(err)
	}
	p.off = int(p.dec.InputOffset())
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	t, _ := dec.Token()
	if _, ok := t.(json.Delim); ok {
		p.off -= len(raw) // serde_json stops before the bracket
	}
	if f.optional && t == nil {
		return nil, nil
	}
	switch f.kind {
	case "bool":
		if b, ok := t.(bool); ok {
			return b, nil
		}
		return nil, p.errorf("invalid type: %s, expected a boolean", describe(t))
	default: // usize, u32
		n, ok := t.(json.Number)
		if !ok {
			return nil, p.errorf("invalid type: %s, expected %s", describe(t), f.kind)
		}
		if strings.ContainsAny(string(n), ".eE") {
			return nil, p.errorf("invalid type: %s, expected %s", describe(t), f.kind)
		}
		if strings.HasPrefix(string(n), "-") {
			return nil, p.errorf("invalid value: integer `%s`, expected %s", n, f.kind)
		}
		u, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil {
			// Beyond u64 serde_json reads a float.
			fl, _ := strconv.ParseFloat(string(n), 64)
			return nil, p.errorf("invalid type: floating point `%s`, expected %s", rustFloat(fl), f.kind)
		}
		if f.kind == "u32" && u > math.MaxUint32 {
			return nil, p.errorf("invalid value: integer `%d`, expected u32", u)
		}
		return u, nil
	}
}

// describe is serde's Unexpected for a JSON token.
func describe(t json.Token) string {
	switch v := t.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("boolean `%t`", v)
	case string:
		return fmt.Sprintf("string %q", v)
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			f, _ := strconv.ParseFloat(string(v), 64)
			return fmt.Sprintf("floating point `%s`", rustFloat(f))
		}
		return fmt.Sprintf("integer `%s`", v)
	case json.Delim:
		if v == '[' {
			return "sequence"
		}
		return "map"
	}
	return fmt.Sprint(t)
}

// rustFloat is serde's Unexpected::Float display in the serde_core upstream
// pins (1.0.228): Rust's f64 Display, with ".0" added to a whole number
// (its WithDecimalPoint).
func rustFloat(f float64) string {
	out := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(out, ".") && !math.IsInf(f, 0) && !math.IsNaN(f) {
		out += ".0"
	}
	return out
}
