package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// A small Rust reader, copied from hack/gen-standin-args (rust.go) and
// extended: outer doc comments become #[doc = "..."] attributes (schemars
// orders an enum's documented variants after the others), and parseFile
// knows which inline module each item, impl, const and use belongs to.

type tokKind int

const (
	tIdent tokKind = iota
	tPunct
	tStr  // text is the unescaped value
	tChar // text is the character
	tNum
	tLifetime
)

type token struct {
	kind tokKind
	text string
	line int
}

func (t token) is(kind tokKind, text string) bool { return t.kind == kind && t.text == text }

func (t token) punct(s string) bool { return t.is(tPunct, s) }

func lexRust(src string) ([]token, error) {
	var toks []token
	r := []rune(src)
	line := 1
	i := 0
	peek := func(k int) rune {
		if i+k < len(r) {
			return r[i+k]
		}
		return 0
	}
	for i < len(r) {
		c := r[i]
		switch {
		case c == '\n':
			line++
			i++
		case unicode.IsSpace(c):
			i++
		case c == '/' && peek(1) == '/':
			start := i
			for i < len(r) && r[i] != '\n' {
				i++
			}
			// An outer doc comment (/// but not ////) is #[doc = "..."].
			if text := string(r[start:i]); strings.HasPrefix(text, "///") && !strings.HasPrefix(text, "////") {
				toks = append(toks, token{tPunct, "#", line}, token{tPunct, "[", line}, token{tIdent, "doc", line},
					token{tPunct, "=", line}, token{tStr, text[3:], line}, token{tPunct, "]", line})
			}
		case c == '/' && peek(1) == '*':
			start, startLine := i, line
			doc := peek(2) == '*' && peek(3) != '*' && peek(3) != '/'
			depth := 0
			for i < len(r) {
				if r[i] == '/' && peek(1) == '*' {
					depth++
					i += 2
				} else if r[i] == '*' && peek(1) == '/' {
					depth--
					i += 2
					if depth == 0 {
						break
					}
				} else {
					if r[i] == '\n' {
						line++
					}
					i++
				}
			}
			if depth != 0 {
				return nil, fmt.Errorf("line %d: unterminated block comment", line)
			}
			// An outer block doc comment (/** but not /*** or /**/) too.
			if doc {
				text := string(r[start+3 : i-2])
				toks = append(toks, token{tPunct, "#", startLine}, token{tPunct, "[", startLine}, token{tIdent, "doc", startLine},
					token{tPunct, "=", startLine}, token{tStr, text, startLine}, token{tPunct, "]", startLine})
			}
		case c == '"' || (c == 'b' && peek(1) == '"') || (c == 'c' && peek(1) == '"'):
			start := line
			if c != '"' {
				i++
			}
			i++
			var b strings.Builder
			for {
				if i >= len(r) {
					return nil, fmt.Errorf("line %d: unterminated string", start)
				}
				if r[i] == '"' {
					i++
					break
				}
				if r[i] == '\\' {
					s, n, err := unescape(r[i:])
					if err != nil {
						return nil, fmt.Errorf("line %d: %v", line, err)
					}
					for _, x := range r[i : i+n] {
						if x == '\n' {
							line++
						}
					}
					b.WriteString(s)
					i += n
					continue
				}
				if r[i] == '\n' {
					line++
				}
				b.WriteRune(r[i])
				i++
			}
			toks = append(toks, token{tStr, b.String(), start})
		case (c == 'r' || (c == 'b' && peek(1) == 'r')) && rawStringStart(r, i) > 0:
			// r"..", r#".."#, br"..": no escapes.
			j := i + rawStringStart(r, i)
			hashes := 0
			for r[j] == '#' {
				hashes++
				j++
			}
			j++ // the opening quote
			closing := "\"" + strings.Repeat("#", hashes)
			end := strings.Index(string(r[j:]), closing)
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated raw string", line)
			}
			body := []rune(string(r[j:])[:end])
			toks = append(toks, token{tStr, string(body), line})
			line += strings.Count(string(body), "\n")
			i = j + len(body) + len([]rune(closing))
		case c == '\'':
			// A char literal ('x', '\n', '\u{..}') or a lifetime/label.
			if peek(1) == '\\' {
				s, n, err := unescape(r[i+1:])
				if err != nil {
					return nil, fmt.Errorf("line %d: %v", line, err)
				}
				if peek(1+n) != '\'' {
					return nil, fmt.Errorf("line %d: bad char literal", line)
				}
				toks = append(toks, token{tChar, s, line})
				i += n + 2
			} else if peek(2) == '\'' {
				toks = append(toks, token{tChar, string(peek(1)), line})
				i += 3
			} else {
				j := i + 1
				for j < len(r) && isIdentRune(r[j]) {
					j++
				}
				toks = append(toks, token{tLifetime, string(r[i:j]), line})
				i = j
			}
		case c == '_' || unicode.IsLetter(c):
			j := i
			if c == 'r' && peek(1) == '#' && i+2 < len(r) && isIdentStart(r[i+2]) {
				j = i + 2 // raw identifier r#name
				i = j
			}
			for j < len(r) && isIdentRune(r[j]) {
				j++
			}
			toks = append(toks, token{tIdent, string(r[i:j]), line})
			i = j
		case unicode.IsDigit(c):
			j := i
			for j < len(r) && (isIdentRune(r[j]) || (r[j] == '.' && j+1 < len(r) && unicode.IsDigit(r[j+1]))) {
				j++
			}
			toks = append(toks, token{tNum, string(r[i:j]), line})
			i = j
		default:
			toks = append(toks, token{tPunct, string(c), line})
			i++
		}
	}
	return toks, nil
}

// rawStringStart returns the length of the prefix ("r" or "br") of a raw
// string starting at i, or 0 if there is none.
func rawStringStart(r []rune, i int) int {
	j := i
	if r[j] == 'b' {
		j++
	}
	if j >= len(r) || r[j] != 'r' {
		return 0
	}
	j++
	k := j
	for k < len(r) && r[k] == '#' {
		k++
	}
	if k < len(r) && r[k] == '"' {
		return j - i
	}
	return 0
}

func isIdentStart(c rune) bool { return c == '_' || unicode.IsLetter(c) }
func isIdentRune(c rune) bool  { return c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c) }

// unescape decodes the escape at the start of r (r[0] == '\\').
func unescape(r []rune) (string, int, error) {
	if len(r) < 2 {
		return "", 0, fmt.Errorf("bad escape")
	}
	switch r[1] {
	case 'n':
		return "\n", 2, nil
	case 't':
		return "\t", 2, nil
	case 'r':
		return "\r", 2, nil
	case '0':
		return "\x00", 2, nil
	case '\\', '\'', '"':
		return string(r[1]), 2, nil
	case 'x':
		if len(r) < 4 {
			return "", 0, fmt.Errorf("bad \\x escape")
		}
		v, err := strconv.ParseUint(string(r[2:4]), 16, 8)
		return string(rune(v)), 4, err
	case 'u':
		end := strings.IndexRune(string(r), '}')
		if len(r) < 4 || r[2] != '{' || end < 0 {
			return "", 0, fmt.Errorf("bad \\u escape")
		}
		body := []rune(string(r)[:end])
		v, err := strconv.ParseUint(string(body[3:]), 16, 32)
		return string(rune(v)), len(body) + 1, err
	case '\n':
		// Line continuation: skip the newline and leading whitespace.
		n := 1
		for n < len(r) && unicode.IsSpace(r[n]) {
			n++
		}
		return "", n, nil
	}
	return "", 0, fmt.Errorf("unknown escape \\%c", r[1])
}

// attr is one outer attribute #[name(args)] or #[name = value] or #[name].
type attr struct {
	name     string
	paren    bool
	args     []token // inside the parentheses
	value    []token // after '='
	line     int
	rendered string
}

type field struct {
	attrs []attr
	name  string
	typ   []token
	line  int
}

type variant struct {
	attrs  []attr
	name   string
	tuple  [][]token // the types of a tuple variant
	fields bool      // a struct-like variant
	line   int
}

// item is a struct or enum definition.
type item struct {
	kind     string // "struct" or "enum"
	name     string
	attrs    []attr
	generic  bool
	shape    string // struct: "named", "tuple" or "unit"
	fields   []field
	variants []variant
	file     string
	mod      []string // the inline module path within file
	line     int
}

// matching returns the index of the bracket closing toks[i].
func matching(toks []token, i int) (int, error) {
	open := toks[i].text
	closeBy := map[string]string{"(": ")", "[": "]", "{": "}"}[open]
	depth := 0
	for j := i; j < len(toks); j++ {
		if toks[j].kind != tPunct {
			continue
		}
		switch toks[j].text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
			if depth == 0 {
				if toks[j].text != closeBy {
					return 0, fmt.Errorf("line %d: %q closed by %q at line %d", toks[i].line, open, toks[j].text, toks[j].line)
				}
				return j, nil
			}
		}
	}
	return 0, fmt.Errorf("line %d: unclosed %q", toks[i].line, open)
}

// parseAttr reads #[...] at toks[i]; it returns the attribute and the index
// after it.
func parseAttr(toks []token, i int) (attr, int, error) {
	end, err := matching(toks, i+1)
	if err != nil {
		return attr{}, 0, err
	}
	body := toks[i+2 : end]
	a := attr{line: toks[i].line, rendered: render(toks[i : end+1])}
	j := 0
	for j < len(body) && (body[j].kind == tIdent || body[j].punct(":")) {
		a.name += body[j].text
		j++
	}
	if a.name == "" {
		return attr{}, 0, fmt.Errorf("line %d: cannot read attribute %s", a.line, a.rendered)
	}
	switch {
	case j == len(body):
	case body[j].punct("("):
		close, err := matching(body, j)
		if err != nil {
			return attr{}, 0, err
		}
		if close != len(body)-1 {
			return attr{}, 0, fmt.Errorf("line %d: cannot read attribute %s", a.line, a.rendered)
		}
		a.paren = true
		a.args = body[j+1 : close]
	case body[j].punct("="):
		a.value = body[j+1:]
	default:
		return attr{}, 0, fmt.Errorf("line %d: cannot read attribute %s", a.line, a.rendered)
	}
	return a, end + 1, nil
}

func parseItem(toks []token, i int, file string) (item, int, error) {
	it := item{kind: toks[i].text, name: toks[i+1].text, file: file, line: toks[i].line}
	j := i + 2
	if j < len(toks) && toks[j].punct("<") {
		it.generic = true
		depth := 0
		for ; j < len(toks); j++ {
			if toks[j].punct("<") {
				depth++
			} else if toks[j].punct(">") {
				depth--
				if depth == 0 {
					j++
					break
				}
			}
		}
	}
	// Skip a where clause.
	for j < len(toks) && !toks[j].punct("{") && !toks[j].punct("(") && !toks[j].punct(";") {
		j++
	}
	if j >= len(toks) {
		return it, 0, fmt.Errorf("line %d: cannot read %s %s", it.line, it.kind, it.name)
	}
	switch {
	case toks[j].punct(";"):
		it.shape = "unit"
		return it, j + 1, nil
	case toks[j].punct("("):
		end, err := matching(toks, j)
		if err != nil {
			return it, 0, err
		}
		it.shape = "tuple"
		for k, part := range splitTop(toks[j+1 : end]) {
			if len(part) == 0 {
				continue
			}
			attrs, n, err := leadingAttrs(part, 0)
			if err != nil {
				return it, 0, err
			}
			it.fields = append(it.fields, field{attrs: attrs, name: fmt.Sprint(k), typ: part[n:], line: part[0].line})
		}
		return it, end + 1, nil
	}
	end, err := matching(toks, j)
	if err != nil {
		return it, 0, err
	}
	body := toks[j+1 : end]
	if it.kind == "struct" {
		it.shape = "named"
		it.fields, err = parseFields(body)
	} else {
		it.variants, err = parseVariants(body)
	}
	if err != nil {
		return it, 0, fmt.Errorf("%s %s: %v", it.kind, it.name, err)
	}
	return it, end + 1, nil
}

// leadingAttrs reads attributes and a visibility at body[j:].
func leadingAttrs(body []token, j int) ([]attr, int, error) {
	var attrs []attr
	for j < len(body) {
		switch {
		case body[j].punct("#") && j+1 < len(body) && body[j+1].punct("["):
			a, next, err := parseAttr(body, j)
			if err != nil {
				return nil, 0, err
			}
			attrs = append(attrs, a)
			j = next
		case body[j].is(tIdent, "pub"):
			j++
			if j < len(body) && body[j].punct("(") {
				end, err := matching(body, j)
				if err != nil {
					return nil, 0, err
				}
				j = end + 1
			}
		default:
			return attrs, j, nil
		}
	}
	return attrs, j, nil
}

func parseFields(body []token) ([]field, error) {
	var fields []field
	j := 0
	for j < len(body) {
		attrs, k, err := leadingAttrs(body, j)
		if err != nil {
			return nil, err
		}
		if k >= len(body) {
			if len(attrs) > 0 {
				return nil, fmt.Errorf("attributes without a field at line %d", attrs[0].line)
			}
			break
		}
		if body[k].kind != tIdent || k+1 >= len(body) || !body[k+1].punct(":") {
			return nil, fmt.Errorf("line %d: cannot read field at %q", body[k].line, body[k].text)
		}
		f := field{attrs: attrs, name: body[k].text, line: body[k].line}
		parts := splitTop(body[k+2:])
		f.typ = parts[0]
		if len(f.typ) == 0 {
			return nil, fmt.Errorf("line %d: field %s has no type", f.line, f.name)
		}
		fields = append(fields, f)
		j = k + 2 + len(f.typ) + 1
	}
	return fields, nil
}

func parseVariants(body []token) ([]variant, error) {
	var variants []variant
	j := 0
	for j < len(body) {
		attrs, k, err := leadingAttrs(body, j)
		if err != nil {
			return nil, err
		}
		if k >= len(body) {
			break
		}
		if body[k].kind != tIdent {
			return nil, fmt.Errorf("line %d: cannot read variant at %q", body[k].line, body[k].text)
		}
		v := variant{attrs: attrs, name: body[k].text, line: body[k].line}
		k++
		if k < len(body) && body[k].punct("(") {
			end, err := matching(body, k)
			if err != nil {
				return nil, err
			}
			for _, p := range splitTop(body[k+1 : end]) {
				if len(p) > 0 {
					v.tuple = append(v.tuple, p)
				}
			}
			k = end + 1
		} else if k < len(body) && body[k].punct("{") {
			end, err := matching(body, k)
			if err != nil {
				return nil, err
			}
			v.fields = true
			k = end + 1
		}
		// Skip a discriminant, up to the comma.
		for k < len(body) && !body[k].punct(",") {
			k++
		}
		variants = append(variants, v)
		j = k + 1
	}
	return variants, nil
}

// splitTop splits toks at commas outside brackets and generic arguments.
func splitTop(toks []token) [][]token {
	var parts [][]token
	depth, angle := 0, 0
	start := 0
	for i, t := range toks {
		if t.kind != tPunct {
			continue
		}
		switch t.text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
		case "<":
			angle++
		case ">":
			if i > 0 && toks[i-1].punct("-") || i > 0 && toks[i-1].punct("=") {
				continue // -> or =>
			}
			if angle > 0 {
				angle--
			}
		case ",":
			if depth == 0 && angle == 0 {
				parts = append(parts, toks[start:i])
				start = i + 1
			}
		}
	}
	parts = append(parts, toks[start:])
	return parts
}

// render prints tokens back as compact Rust.
func render(toks []token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 {
			prev := toks[i-1]
			word := func(k tokKind) bool { return k == tIdent || k == tNum || k == tLifetime }
			// Spaces between words, after commas and around a `key = value`
			// equals sign (not in `..=`).
			eqBefore := t.punct("=") && prev.kind != tPunct
			eqAfter := prev.punct("=") && i >= 2 && toks[i-2].kind != tPunct
			if word(prev.kind) && word(t.kind) || prev.punct(",") || eqBefore || eqAfter {
				b.WriteByte(' ')
			}
		}
		switch t.kind {
		case tStr:
			b.WriteString(strconv.Quote(t.text))
		case tChar:
			b.WriteString("'" + strings.Trim(strconv.QuoteRune([]rune(t.text)[0]), "'") + "'")
		default:
			b.WriteString(t.text)
		}
	}
	return b.String()
}
