package rustsrc

import "fmt"

// Type is a parsed Rust type: a path with generic arguments, or a tuple.
type Type struct {
	Path []string // e.g. ["std", "path", "PathBuf"]; ["()"] for a tuple
	Args []Type   // generic arguments; a tuple's elements
	Text string   // as written, rendered by Render
}

// Name is the last segment of the type's path.
func (t Type) Name() string { return t.Path[len(t.Path)-1] }

// ParseType reads a path type (std::collections::BTreeMap<String, u8>) or a
// tuple of them; references, slices, arrays, trait objects and the like
// are an error.
func ParseType(toks []Token) (Type, error) {
	t := Type{Text: Render(toks)}
	if len(toks) == 0 {
		return t, fmt.Errorf("empty type")
	}
	if toks[0].IsPunct("(") {
		end, err := Matching(toks, 0)
		if err != nil || end != len(toks)-1 {
			return t, fmt.Errorf("cannot read type %s", t.Text)
		}
		t.Path = []string{"()"}
		for _, p := range SplitTop(toks[1:end]) {
			if len(p) == 0 {
				continue
			}
			a, err := ParseType(p)
			if err != nil {
				return t, err
			}
			t.Args = append(t.Args, a)
		}
		return t, nil
	}
	i := 0
	for i < len(toks) {
		if toks[i].Kind == Ident {
			t.Path = append(t.Path, toks[i].Text)
			i++
		} else if toks[i].IsPunct(":") {
			i++
		} else {
			break
		}
	}
	if len(t.Path) == 0 {
		return t, fmt.Errorf("cannot read type %s", t.Text)
	}
	if i < len(toks) {
		if !toks[i].IsPunct("<") || !toks[len(toks)-1].IsPunct(">") {
			return t, fmt.Errorf("cannot read type %s", t.Text)
		}
		for _, p := range SplitTop(toks[i+1 : len(toks)-1]) {
			a, err := ParseType(p)
			if err != nil {
				return t, err
			}
			t.Args = append(t.Args, a)
		}
	}
	return t, nil
}
