package rustsrc

import (
	"fmt"
	"strings"
)

// File is what ParseFile reads of one Rust source file: its struct and
// enum definitions, `impl Default for` blocks, consts and use declarations,
// each with the inline module (`mod name { ... }`) it is declared in.
type File struct {
	Path     string
	Items    []*Item
	Defaults map[string][]Token // "mod::Name" -> body of `fn default() -> Self { ... }`
	Consts   map[string][]Token // "mod::NAME" -> the expression of `const NAME: T = expr;`
	Uses     map[string]map[string][]string
	Globs    map[string][][]string // "mod" -> paths of `use path::*;`
	Mods     map[string]bool       // inline modules, "a::b"
}

// ModKey joins an inline module path: ["a", "b"] is "a::b", the file's
// top level "".
func ModKey(mod []string) string { return strings.Join(mod, "::") }

// ParseFile reads the tokens of the file at path (relative to the
// repository root). Items inside function bodies count as their module's.
func ParseFile(toks []Token, path string) (*File, error) {
	f := &File{
		Path:     path,
		Defaults: map[string][]Token{},
		Consts:   map[string][]Token{},
		Uses:     map[string]map[string][]string{},
		Globs:    map[string][][]string{},
		Mods:     map[string]bool{"": true},
	}
	type open struct {
		name string
		end  int
	}
	var stack []open
	cur := func() []string {
		var m []string
		for _, o := range stack {
			m = append(m, o.name)
		}
		return m
	}
	var pending []Attr
	for i := 0; i < len(toks); i++ {
		for len(stack) > 0 && i >= stack[len(stack)-1].end {
			stack = stack[:len(stack)-1]
		}
		t := toks[i]
		prevPath := i > 0 && (toks[i-1].IsPunct(":") || toks[i-1].IsPunct("."))
		switch {
		case t.IsPunct("#") && i+1 < len(toks) && toks[i+1].IsPunct("["):
			a, next, err := ParseAttr(toks, i)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
			pending = append(pending, a)
			i = next - 1
			continue
		case t.IsPunct("#") && i+2 < len(toks) && toks[i+1].IsPunct("!") && toks[i+2].IsPunct("["):
			end, err := Matching(toks, i+2)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
			i = end
			continue
		case t.Kind == Ident && (t.Text == "pub" || t.Text == "crate" || t.Text == "super" || t.Text == "in") && !prevPath,
			t.IsPunct("(") || t.IsPunct(")"):
			// Visibility between attributes and the item.
			continue
		case t.Is(Ident, "mod") && !prevPath && i+2 < len(toks) && toks[i+1].Kind == Ident && toks[i+2].IsPunct("{"):
			end, err := Matching(toks, i+2)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
			stack = append(stack, open{toks[i+1].Text, end})
			f.Mods[ModKey(cur())] = true
			i += 2
		case (t.Is(Ident, "struct") || t.Is(Ident, "enum")) && !prevPath && i+1 < len(toks) && toks[i+1].Kind == Ident:
			it, next, err := ParseItem(toks, i, path)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
			it.Attrs = pending
			it.Mod = cur()
			f.Items = append(f.Items, &it)
			i = next - 1
		case t.Is(Ident, "impl") && !prevPath:
			// impl[<...>] Default for Name { ... }: keep fn default's body.
			j := i + 1
			for j < len(toks) && !toks[j].IsPunct("{") && !toks[j].IsPunct(";") {
				j++
			}
			if j >= len(toks) || !toks[j].IsPunct("{") {
				break
			}
			head := toks[i+1 : j]
			for k := 0; k+2 < len(head); k++ {
				if head[k].Is(Ident, "Default") && head[k+1].Is(Ident, "for") && head[k+2].Kind == Ident {
					end, err := Matching(toks, j)
					if err != nil {
						return nil, fmt.Errorf("%s: %v", path, err)
					}
					body, err := FnBody(toks[j+1:end], "default")
					if err != nil {
						return nil, fmt.Errorf("%s:%d: impl Default for %s: %v", path, t.Line, head[k+2].Text, err)
					}
					f.Defaults[ModKey(append(cur(), head[k+2].Text))] = body
				}
			}
		case t.Is(Ident, "const") && !prevPath && i+2 < len(toks) && toks[i+1].Kind == Ident && toks[i+2].IsPunct(":"):
			j := i + 3
			for j < len(toks) && !toks[j].IsPunct("=") && !toks[j].IsPunct(";") {
				j++
			}
			k := j
			for k < len(toks) && !toks[k].IsPunct(";") {
				if toks[k].IsPunct("(") || toks[k].IsPunct("[") || toks[k].IsPunct("{") {
					end, err := Matching(toks, k)
					if err != nil {
						return nil, fmt.Errorf("%s: %v", path, err)
					}
					k = end
				}
				k++
			}
			if j < len(toks) && toks[j].IsPunct("=") {
				f.Consts[ModKey(append(cur(), toks[i+1].Text))] = toks[j+1 : k]
			}
			i = k
		case t.Is(Ident, "use") && !prevPath:
			j := i + 1
			for j < len(toks) && !toks[j].IsPunct(";") {
				j++
			}
			m := ModKey(cur())
			if f.Uses[m] == nil {
				f.Uses[m] = map[string][]string{}
			}
			ReadUse(toks[i+1:j], f.Uses[m], func(p []string) { f.Globs[m] = append(f.Globs[m], p) })
			i = j
		}
		pending = nil
	}
	return f, nil
}

// FnBody returns the body of `fn name(...) ... { body }` in toks.
func FnBody(toks []Token, name string) ([]Token, error) {
	for i := 0; i+1 < len(toks); i++ {
		if toks[i].Is(Ident, "fn") && toks[i+1].Is(Ident, name) {
			j := i + 2
			for j < len(toks) && !toks[j].IsPunct("{") {
				if toks[j].IsPunct("(") {
					end, err := Matching(toks, j)
					if err != nil {
						return nil, err
					}
					j = end
				}
				j++
			}
			if j >= len(toks) {
				return nil, fmt.Errorf("fn %s has no body", name)
			}
			end, err := Matching(toks, j)
			if err != nil {
				return nil, err
			}
			return toks[j+1 : end], nil
		}
	}
	return nil, fmt.Errorf("no fn %s", name)
}

// ReadUse records the names a use tree imports (name -> full path) and
// passes each glob import's path to glob.
func ReadUse(toks []Token, out map[string][]string, glob func([]string)) {
	var walk func(prefix []string, toks []Token)
	walk = func(prefix []string, toks []Token) {
		var cur []string
		for i := 0; i < len(toks); i++ {
			t := toks[i]
			switch {
			case t.Kind == Ident && t.Text == "as" && i+1 < len(toks):
				if len(cur) > 0 {
					out[toks[i+1].Text] = append(append([]string{}, prefix...), cur...)
				}
				cur = nil
				i++
			case t.Kind == Ident:
				cur = append(cur, t.Text)
			case t.IsPunct("*"):
				glob(append(append([]string{}, prefix...), cur...))
				cur = nil
			case t.IsPunct("{"):
				end, err := Matching(toks, i)
				if err != nil {
					return
				}
				for _, part := range SplitTop(toks[i+1 : end]) {
					walk(append(append([]string{}, prefix...), cur...), part)
				}
				cur = nil
				i = end
			}
		}
		if len(cur) > 0 {
			full := append(append([]string{}, prefix...), cur...)
			last := full[len(full)-1]
			if last == "self" {
				full = full[:len(full)-1]
				last = full[len(full)-1]
			}
			out[last] = full
		}
	}
	walk(nil, toks)
}
