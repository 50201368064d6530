package rustsrc

import (
	"fmt"
)

// Enough of Rust's grammar to find struct and enum definitions with their
// attributes, fields and variants; the rest of a file is tokens.

// Attr is one outer attribute #[name(args)] or #[name = value] or #[name]
// (a doc comment is #[doc = "..."]).
type Attr struct {
	Name     string
	Paren    bool
	Args     []Token // inside the parentheses
	Value    []Token // after '='
	Line     int
	Rendered string
}

// Field is a field of a struct: named, or of a tuple struct (named "0",
// "1", ...).
type Field struct {
	Attrs []Attr
	Name  string
	Type  []Token
	Line  int
}

// Variant is a variant of an enum.
type Variant struct {
	Attrs  []Attr
	Name   string
	Tuple  [][]Token // the types of a tuple variant
	Fields bool      // a struct-like variant
	Line   int
}

// Item is a struct or enum definition.
type Item struct {
	Kind     string // "struct" or "enum"
	Name     string
	Attrs    []Attr
	Generic  bool
	Shape    string // struct: "named", "tuple" or "unit"
	Fields   []Field
	Variants []Variant
	File     string
	Mod      []string // the inline module path within File (set by ParseFile)
	Line     int
}

// Matching returns the index of the bracket closing toks[i].
func Matching(toks []Token, i int) (int, error) {
	open := toks[i].Text
	closeBy := map[string]string{"(": ")", "[": "]", "{": "}"}[open]
	depth := 0
	for j := i; j < len(toks); j++ {
		if toks[j].Kind != Punct {
			continue
		}
		switch toks[j].Text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
			if depth == 0 {
				if toks[j].Text != closeBy {
					return 0, fmt.Errorf("line %d: %q closed by %q at line %d", toks[i].Line, open, toks[j].Text, toks[j].Line)
				}
				return j, nil
			}
		}
	}
	return 0, fmt.Errorf("line %d: unclosed %q", toks[i].Line, open)
}

// ParseAttr reads #[...] at toks[i]; it returns the attribute and the index
// after it.
func ParseAttr(toks []Token, i int) (Attr, int, error) {
	end, err := Matching(toks, i+1)
	if err != nil {
		return Attr{}, 0, err
	}
	body := toks[i+2 : end]
	a := Attr{Line: toks[i].Line, Rendered: Render(toks[i : end+1])}
	j := 0
	for j < len(body) && (body[j].Kind == Ident || body[j].IsPunct(":")) {
		a.Name += body[j].Text
		j++
	}
	if a.Name == "" {
		return Attr{}, 0, fmt.Errorf("line %d: cannot read attribute %s", a.Line, a.Rendered)
	}
	switch {
	case j == len(body):
	case body[j].IsPunct("("):
		close, err := Matching(body, j)
		if err != nil {
			return Attr{}, 0, err
		}
		if close != len(body)-1 {
			return Attr{}, 0, fmt.Errorf("line %d: cannot read attribute %s", a.Line, a.Rendered)
		}
		a.Paren = true
		a.Args = body[j+1 : close]
	case body[j].IsPunct("="):
		a.Value = body[j+1:]
	default:
		return Attr{}, 0, fmt.Errorf("line %d: cannot read attribute %s", a.Line, a.Rendered)
	}
	return a, end + 1, nil
}

// ParseItem reads the struct or enum definition whose keyword is toks[i];
// it returns the item and the index after it. Its attributes are the
// caller's to set.
func ParseItem(toks []Token, i int, file string) (Item, int, error) {
	it := Item{Kind: toks[i].Text, Name: toks[i+1].Text, File: file, Line: toks[i].Line}
	j := i + 2
	if j < len(toks) && toks[j].IsPunct("<") {
		it.Generic = true
		depth := 0
		for ; j < len(toks); j++ {
			if toks[j].IsPunct("<") {
				depth++
			} else if toks[j].IsPunct(">") {
				depth--
				if depth == 0 {
					j++
					break
				}
			}
		}
	}
	// Skip a where clause.
	for j < len(toks) && !toks[j].IsPunct("{") && !toks[j].IsPunct("(") && !toks[j].IsPunct(";") {
		j++
	}
	if j >= len(toks) {
		return it, 0, fmt.Errorf("line %d: cannot read %s %s", it.Line, it.Kind, it.Name)
	}
	switch {
	case toks[j].IsPunct(";"):
		it.Shape = "unit"
		return it, j + 1, nil
	case toks[j].IsPunct("("):
		end, err := Matching(toks, j)
		if err != nil {
			return it, 0, err
		}
		it.Shape = "tuple"
		for k, part := range SplitTop(toks[j+1 : end]) {
			if len(part) == 0 {
				continue
			}
			attrs, n, err := leadingAttrs(part, 0)
			if err != nil {
				return it, 0, err
			}
			it.Fields = append(it.Fields, Field{Attrs: attrs, Name: fmt.Sprint(k), Type: part[n:], Line: part[0].Line})
		}
		return it, end + 1, nil
	}
	end, err := Matching(toks, j)
	if err != nil {
		return it, 0, err
	}
	body := toks[j+1 : end]
	if it.Kind == "struct" {
		it.Shape = "named"
		it.Fields, err = parseFields(body)
	} else {
		it.Variants, err = parseVariants(body)
	}
	if err != nil {
		return it, 0, fmt.Errorf("%s %s: %v", it.Kind, it.Name, err)
	}
	return it, end + 1, nil
}

// leadingAttrs reads attributes and a visibility at body[j:].
func leadingAttrs(body []Token, j int) ([]Attr, int, error) {
	var attrs []Attr
	for j < len(body) {
		switch {
		case body[j].IsPunct("#") && j+1 < len(body) && body[j+1].IsPunct("["):
			a, next, err := ParseAttr(body, j)
			if err != nil {
				return nil, 0, err
			}
			attrs = append(attrs, a)
			j = next
		case body[j].Is(Ident, "pub"):
			j++
			if j < len(body) && body[j].IsPunct("(") {
				end, err := Matching(body, j)
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

func parseFields(body []Token) ([]Field, error) {
	var fields []Field
	j := 0
	for j < len(body) {
		attrs, k, err := leadingAttrs(body, j)
		if err != nil {
			return nil, err
		}
		if k >= len(body) {
			if len(attrs) > 0 {
				return nil, fmt.Errorf("attributes without a field at line %d", attrs[0].Line)
			}
			break
		}
		if body[k].Kind != Ident || k+1 >= len(body) || !body[k+1].IsPunct(":") {
			return nil, fmt.Errorf("line %d: cannot read field at %q", body[k].Line, body[k].Text)
		}
		f := Field{Attrs: attrs, Name: body[k].Text, Line: body[k].Line}
		parts := SplitTop(body[k+2:])
		f.Type = parts[0]
		if len(f.Type) == 0 {
			return nil, fmt.Errorf("line %d: field %s has no type", f.Line, f.Name)
		}
		fields = append(fields, f)
		j = k + 2 + len(f.Type) + 1
	}
	return fields, nil
}

func parseVariants(body []Token) ([]Variant, error) {
	var variants []Variant
	j := 0
	for j < len(body) {
		attrs, k, err := leadingAttrs(body, j)
		if err != nil {
			return nil, err
		}
		if k >= len(body) {
			break
		}
		if body[k].Kind != Ident {
			return nil, fmt.Errorf("line %d: cannot read variant at %q", body[k].Line, body[k].Text)
		}
		v := Variant{Attrs: attrs, Name: body[k].Text, Line: body[k].Line}
		k++
		if k < len(body) && body[k].IsPunct("(") {
			end, err := Matching(body, k)
			if err != nil {
				return nil, err
			}
			for _, p := range SplitTop(body[k+1 : end]) {
				if len(p) > 0 {
					v.Tuple = append(v.Tuple, p)
				}
			}
			k = end + 1
		} else if k < len(body) && body[k].IsPunct("{") {
			end, err := Matching(body, k)
			if err != nil {
				return nil, err
			}
			v.Fields = true
			k = end + 1
		}
		// Skip a discriminant, up to the comma.
		for k < len(body) && !body[k].IsPunct(",") {
			k++
		}
		variants = append(variants, v)
		j = k + 1
	}
	return variants, nil
}

// SplitTop splits toks at commas outside brackets and generic arguments.
func SplitTop(toks []Token) [][]Token {
	var parts [][]Token
	depth, angle := 0, 0
	start := 0
	for i, t := range toks {
		if t.Kind != Punct {
			continue
		}
		switch t.Text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
		case "<":
			angle++
		case ">":
			if i > 0 && toks[i-1].IsPunct("-") || i > 0 && toks[i-1].IsPunct("=") {
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

// Derives reports whether a #[derive(...)] lists trait (by last segment).
func Derives(attrs []Attr, trait string) bool {
	for _, a := range attrs {
		if a.Name != "derive" {
			continue
		}
		for _, part := range SplitTop(a.Args) {
			if len(part) > 0 && part[len(part)-1].Is(Ident, trait) {
				return true
			}
		}
	}
	return false
}
