package main

import (
	"fmt"
	"strings"
)

// rfile is what parseFile reads of one Rust source file: its struct and
// enum definitions, `impl Default for` blocks, consts and use declarations,
// each with the inline module (`mod name { ... }`) it is declared in.
type rfile struct {
	path     string
	items    []*item
	defaults map[string][]token // "mod::Name" -> body of `fn default() -> Self { ... }`
	consts   map[string][]token // "mod::NAME" -> the expression of `const NAME: T = expr;`
	uses     map[string]map[string][]string
	globs    map[string][][]string // "mod" -> paths of `use path::*;`
	mods     map[string]bool       // inline modules, "a::b"
}

func modKey(mod []string) string { return strings.Join(mod, "::") }

func parseFile(toks []token, path string) (*rfile, error) {
	f := &rfile{
		path:     path,
		defaults: map[string][]token{},
		consts:   map[string][]token{},
		uses:     map[string]map[string][]string{},
		globs:    map[string][][]string{},
		mods:     map[string]bool{"": true},
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
	var pending []attr
	for i := 0; i < len(toks); i++ {
		for len(stack) > 0 && i >= stack[len(stack)-1].end {
			stack = stack[:len(stack)-1]
		}
		t := toks[i]
		prevPath := i > 0 && (toks[i-1].punct(":") || toks[i-1].punct("."))
		switch {
		case t.punct("#") && i+1 < len(toks) && toks[i+1].punct("["):
			a, next, err := parseAttr(toks, i)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
			pending = append(pending, a)
			i = next - 1
			continue
		case t.punct("#") && i+2 < len(toks) && toks[i+1].punct("!") && toks[i+2].punct("["):
			end, err := matching(toks, i+2)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
			i = end
			continue
		case t.kind == tIdent && (t.text == "pub" || t.text == "crate" || t.text == "super" || t.text == "in") && !prevPath,
			t.punct("(") || t.punct(")"):
			// Visibility between attributes and the item.
			continue
		case t.is(tIdent, "mod") && !prevPath && i+2 < len(toks) && toks[i+1].kind == tIdent && toks[i+2].punct("{"):
			end, err := matching(toks, i+2)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
			stack = append(stack, open{toks[i+1].text, end})
			f.mods[modKey(cur())] = true
			i += 2
		case (t.is(tIdent, "struct") || t.is(tIdent, "enum")) && !prevPath && i+1 < len(toks) && toks[i+1].kind == tIdent:
			it, next, err := parseItem(toks, i, path)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
			it.attrs = pending
			it.mod = cur()
			f.items = append(f.items, &it)
			i = next - 1
		case t.is(tIdent, "impl") && !prevPath:
			// impl[<...>] Default for Name { ... }: keep fn default's body.
			j := i + 1
			for j < len(toks) && !toks[j].punct("{") && !toks[j].punct(";") {
				j++
			}
			if j >= len(toks) || !toks[j].punct("{") {
				break
			}
			head := toks[i+1 : j]
			for k := 0; k+2 < len(head); k++ {
				if head[k].is(tIdent, "Default") && head[k+1].is(tIdent, "for") && head[k+2].kind == tIdent {
					end, err := matching(toks, j)
					if err != nil {
						return nil, fmt.Errorf("%s: %v", path, err)
					}
					body, err := fnBody(toks[j+1:end], "default")
					if err != nil {
						return nil, fmt.Errorf("%s:%d: impl Default for %s: %v", path, t.line, head[k+2].text, err)
					}
					f.defaults[modKey(append(cur(), head[k+2].text))] = body
				}
			}
		case t.is(tIdent, "const") && !prevPath && i+2 < len(toks) && toks[i+1].kind == tIdent && toks[i+2].punct(":"):
			j := i + 3
			for j < len(toks) && !toks[j].punct("=") && !toks[j].punct(";") {
				j++
			}
			k := j
			for k < len(toks) && !toks[k].punct(";") {
				if toks[k].punct("(") || toks[k].punct("[") || toks[k].punct("{") {
					end, err := matching(toks, k)
					if err != nil {
						return nil, fmt.Errorf("%s: %v", path, err)
					}
					k = end
				}
				k++
			}
			if j < len(toks) && toks[j].punct("=") {
				f.consts[modKey(append(cur(), toks[i+1].text))] = toks[j+1 : k]
			}
			i = k
		case t.is(tIdent, "use") && !prevPath:
			j := i + 1
			for j < len(toks) && !toks[j].punct(";") {
				j++
			}
			m := modKey(cur())
			if f.uses[m] == nil {
				f.uses[m] = map[string][]string{}
			}
			readUse(toks[i+1:j], f.uses[m], func(p []string) { f.globs[m] = append(f.globs[m], p) })
			i = j
		}
		pending = nil
	}
	return f, nil
}

// fnBody returns the body of `fn name(...) ... { body }` in toks.
func fnBody(toks []token, name string) ([]token, error) {
	for i := 0; i+1 < len(toks); i++ {
		if toks[i].is(tIdent, "fn") && toks[i+1].is(tIdent, name) {
			j := i + 2
			for j < len(toks) && !toks[j].punct("{") {
				if toks[j].punct("(") {
					end, err := matching(toks, j)
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
			end, err := matching(toks, j)
			if err != nil {
				return nil, err
			}
			return toks[j+1 : end], nil
		}
	}
	return nil, fmt.Errorf("no fn %s", name)
}

// readUse records the names a use tree imports (name -> full path) and
// passes each glob import's path to glob.
func readUse(toks []token, out map[string][]string, glob func([]string)) {
	var walk func(prefix []string, toks []token)
	walk = func(prefix []string, toks []token) {
		var cur []string
		for i := 0; i < len(toks); i++ {
			t := toks[i]
			switch {
			case t.kind == tIdent && t.text == "as" && i+1 < len(toks):
				if len(cur) > 0 {
					out[toks[i+1].text] = append(append([]string{}, prefix...), cur...)
				}
				cur = nil
				i++
			case t.kind == tIdent:
				cur = append(cur, t.text)
			case t.punct("*"):
				glob(append(append([]string{}, prefix...), cur...))
				cur = nil
			case t.punct("{"):
				end, err := matching(toks, i)
				if err != nil {
					return
				}
				for _, part := range splitTop(toks[i+1 : end]) {
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

// rty is a parsed Rust type (copied from hack/gen-standin-args).
type rty struct {
	path []string // e.g. ["std", "collections", "BTreeMap"]; ["()"] for a tuple
	args []rty
	text string
}

func (t rty) name() string { return t.path[len(t.path)-1] }

func parseType(toks []token) (rty, error) {
	t := rty{text: render(toks)}
	if len(toks) == 0 {
		return t, fmt.Errorf("empty type")
	}
	if toks[0].punct("(") || toks[0].punct("&") || toks[0].punct("[") {
		return t, fmt.Errorf("type %s is not modelled", t.text)
	}
	i := 0
	for i < len(toks) {
		if toks[i].kind == tIdent {
			t.path = append(t.path, toks[i].text)
			i++
		} else if toks[i].punct(":") {
			i++
		} else {
			break
		}
	}
	if len(t.path) == 0 {
		return t, fmt.Errorf("cannot read type %s", t.text)
	}
	if i < len(toks) {
		if !toks[i].punct("<") || !toks[len(toks)-1].punct(">") {
			return t, fmt.Errorf("cannot read type %s", t.text)
		}
		for _, p := range splitTop(toks[i+1 : len(toks)-1]) {
			a, err := parseType(p)
			if err != nil {
				return t, err
			}
			t.args = append(t.args, a)
		}
	}
	return t, nil
}
