package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"

	"github.com/materializeinc/orchestratord/hack/internal/rustsrc"
)

// This file applies clap_derive 4.x's rules (clap_derive/src/item.rs and
// derives/args.rs) to the structs read by hack/internal/rustsrc. Anything it does not
// understand is an error naming the struct and field: a guess could make the
// stand-in accept what the real program refuses.

// gen holds what is shared while generating one program's table.
type gen struct {
	up       *rustsrc.Source
	binCrate string                     // crate directory of the program
	features map[string]bool            // -feature overrides, "crate-dir:feature"
	sources  []string                   // upstream files used, for the header
	enums    map[string][]*rustsrc.Item // ValueEnum-deriving enums by name
	manual   map[string]string          // types with a hand-written ValueEnum or ValueParserFactory impl -> which
	// history reads an older release only for its argument names: the
	// value parser models are not checked against it (the stand-in models
	// the newest sources) and warnings are not repeated.
	history bool
}

// items returns the struct and enum definitions of file named name (all of
// them if name is "").
func (g *gen) items(file, name string) ([]*rustsrc.Item, error) {
	f, err := g.up.File(file)
	if err != nil {
		return nil, err
	}
	var out []*rustsrc.Item
	for _, it := range f.Items {
		if name == "" || it.Name == name {
			out = append(out, it)
		}
	}
	return out, nil
}

func (g *gen) used(file, what string) {
	s := file + " (" + what + ")"
	for _, x := range g.sources {
		if x == s {
			return
		}
	}
	g.sources = append(g.sources, s)
}

// warnOut receives warnings; the history's are discarded.
var warnOut io.Writer = os.Stderr

func warnf(format string, a ...any) {
	fmt.Fprintf(warnOut, "gen-standin-args: warning: "+format+"\n", a...)
}

// indexValueEnums finds every enum deriving clap::ValueEnum and every type
// with a hand-written ValueEnum or ValueParserFactory impl: clap's
// value_parser!(T) picks such types up whether or not a field says
// value_enum.
func (g *gen) indexValueEnums() error {
	g.enums = map[string][]*rustsrc.Item{}
	g.manual = map[string]string{}
	for _, word := range []string{"ValueEnum", "ValueParserFactory"} {
		files, err := g.up.FilesContaining(word)
		if err != nil {
			return err
		}
		for _, f := range files {
			toks, err := g.up.Tokens(f)
			if err != nil {
				return err
			}
			for i := 0; i+3 < len(toks); i++ {
				// impl[<..>] path::ValueEnum for Name
				if toks[i].Is(rustsrc.Ident, word) && toks[i+1].Is(rustsrc.Ident, "for") && toks[i+2].Kind == rustsrc.Ident {
					g.manual[toks[i+2].Text] = word
				}
			}
			if word != "ValueEnum" {
				continue
			}
			items, err := g.items(f, "")
			if err != nil {
				return err
			}
			for _, it := range items {
				if it.Kind == "enum" && rustsrc.Derives(it.Attrs, "ValueEnum") {
					g.enums[it.Name] = append(g.enums[it.Name], it)
				}
			}
		}
	}
	return nil
}

// findDef finds the definition of a struct or enum named by a field type,
// as seen from file ctx.
func (g *gen) findDef(kind string, typePath []string, ctx string) (*rustsrc.Item, error) {
	name := typePath[len(typePath)-1]
	files, err := g.up.FilesContaining(name)
	if err != nil {
		return nil, err
	}
	var cands []*rustsrc.Item
	for _, f := range files {
		items, err := g.items(f, name)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if it.Kind == kind {
				cands = append(cands, it)
			}
		}
	}
	return g.pick(kind, typePath, ctx, cands)
}

// pick chooses among same-named definitions by the crate the context file
// imports the name from.
func (g *gen) pick(kind string, typePath []string, ctx string, cands []*rustsrc.Item) (*rustsrc.Item, error) {
	name := typePath[len(typePath)-1]
	if len(cands) == 1 {
		return cands[0], nil
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("no definition of %s %s found under src/", kind, name)
	}
	full := typePath
	if len(full) == 1 {
		uses, err := g.uses(ctx)
		if err != nil {
			return nil, err
		}
		if p, ok := uses[name]; ok {
			full = p
		}
	}
	ctxCrate, err := g.up.CrateDir(ctx)
	if err != nil {
		return nil, err
	}
	want := ctxCrate
	if len(full) > 1 && full[0] != "crate" && full[0] != "self" && full[0] != "super" {
		want = ""
		for _, c := range cands {
			dir, err := g.up.CrateDir(c.File)
			if err != nil {
				return nil, err
			}
			pkg, err := g.packageName(dir)
			if err != nil {
				return nil, err
			}
			if strings.ReplaceAll(pkg, "-", "_") == full[0] {
				want = dir
			}
		}
	}
	var in []*rustsrc.Item
	for _, c := range cands {
		if dir, _ := g.up.CrateDir(c.File); dir == want {
			in = append(in, c)
		}
	}
	if len(in) != 1 {
		var where []string
		for _, c := range cands {
			where = append(where, fmt.Sprintf("%s:%d", c.File, c.Line))
		}
		return nil, fmt.Errorf("cannot tell which %s %s %s means: %s", kind, name, ctx, strings.Join(where, ", "))
	}
	return in[0], nil
}

// uses maps the names a file imports to their paths (every use
// declaration of the file, whatever module it is in; glob imports are not
// followed).
func (g *gen) uses(file string) (map[string][]string, error) {
	toks, err := g.up.Tokens(file)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for i := 0; i < len(toks); i++ {
		if toks[i].Is(rustsrc.Ident, "use") {
			j := i + 1
			for j < len(toks) && !toks[j].IsPunct(";") {
				j++
			}
			rustsrc.ReadUse(toks[i+1:j], out, func([]string) {})
			i = j
		}
	}
	return out, nil
}

// rval is a parsed attribute value.
type rval struct {
	kind  string // str, char, bool, num, list, tuple, path, call, other
	s     string // str, char, bool, num: the value; path, call: the path
	items []rval // list, tuple, call
	toks  []rustsrc.Token
}

func parseVal(toks []rustsrc.Token) rval {
	v := rval{kind: "other", toks: toks}
	if len(toks) > 0 && toks[0].IsPunct("&") {
		toks = toks[1:]
	}
	if len(toks) == 1 {
		t := toks[0]
		switch {
		case t.Kind == rustsrc.Str:
			return rval{kind: "str", s: t.Text, toks: toks}
		case t.Kind == rustsrc.Char:
			return rval{kind: "char", s: t.Text, toks: toks}
		case t.Kind == rustsrc.Num:
			return rval{kind: "num", s: t.Text, toks: toks}
		case t.Is(rustsrc.Ident, "true"), t.Is(rustsrc.Ident, "false"):
			return rval{kind: "bool", s: t.Text, toks: toks}
		}
	}
	if len(toks) >= 2 && (toks[0].IsPunct("[") || toks[0].IsPunct("(")) {
		if end, err := rustsrc.Matching(toks, 0); err == nil && end == len(toks)-1 {
			kind := "list"
			if toks[0].IsPunct("(") {
				kind = "tuple"
			}
			v = rval{kind: kind, toks: toks}
			for _, p := range rustsrc.SplitTop(toks[1:end]) {
				if len(p) > 0 {
					v.items = append(v.items, parseVal(p))
				}
			}
			return v
		}
	}
	// A path, or a call of one.
	i := 0
	var p []string
	for i < len(toks) {
		if toks[i].Kind == rustsrc.Ident {
			p = append(p, toks[i].Text)
			i++
		} else if i+1 < len(toks) && toks[i].IsPunct(":") && toks[i+1].IsPunct(":") {
			i += 2
		} else {
			break
		}
	}
	if len(p) == 0 {
		return v
	}
	if i == len(toks) {
		return rval{kind: "path", s: strings.Join(p, "::"), toks: toks}
	}
	if toks[i].IsPunct("(") {
		if end, err := rustsrc.Matching(toks, i); err == nil && end == len(toks)-1 {
			c := rval{kind: "call", s: strings.Join(p, "::"), toks: toks}
			for _, part := range rustsrc.SplitTop(toks[i+1 : end]) {
				if len(part) > 0 {
					c.items = append(c.items, parseVal(part))
				}
			}
			return c
		}
	}
	return v
}

// attrItem is one comma-separated entry of #[clap(...)]: `key`,
// `key = value` or `key(args)`.
type attrItem struct {
	key   string
	form  string // bare, eq, call
	value []rustsrc.Token
	args  [][]rustsrc.Token
}

func attrItems(a rustsrc.Attr) ([]attrItem, error) {
	var out []attrItem
	for _, part := range rustsrc.SplitTop(a.Args) {
		if len(part) == 0 {
			continue
		}
		if part[0].Kind != rustsrc.Ident {
			return nil, fmt.Errorf("cannot read %q in %s", rustsrc.Render(part), a.Rendered)
		}
		it := attrItem{key: part[0].Text}
		switch {
		case len(part) == 1:
			it.form = "bare"
		case part[1].IsPunct("="):
			it.form = "eq"
			it.value = part[2:]
		case part[1].IsPunct("("):
			end, err := rustsrc.Matching(part, 1)
			if err != nil || end != len(part)-1 {
				return nil, fmt.Errorf("cannot read %q in %s", rustsrc.Render(part), a.Rendered)
			}
			it.form = "call"
			for _, x := range rustsrc.SplitTop(part[2:end]) {
				if len(x) > 0 {
					it.args = append(it.args, x)
				}
			}
		default:
			return nil, fmt.Errorf("cannot read %q in %s", rustsrc.Render(part), a.Rendered)
		}
		out = append(out, it)
	}
	return out, nil
}

// clapAttr reports whether an attribute is one clap_derive reads on a field
// or container: arg, clap and structopt (deprecated spellings), command,
// value and group.
func clapAttr(name string) bool {
	switch name {
	case "arg", "clap", "structopt", "command", "value", "group":
		return true
	}
	return false
}

// ignoredAttr is an attribute that cannot change the command line.
func ignoredAttr(name string) bool {
	if strings.HasPrefix(name, "rustfmt::") || strings.HasPrefix(name, "clippy::") {
		return true
	}
	switch name {
	case "doc", "derive", "derivative", "serde", "allow", "expect", "warn", "deny", "default", "must_use", "deprecated", "non_exhaustive", "repr":
		return true
	}
	return false
}

// cfgEnabled evaluates #[cfg(...)] attributes of something in file.
func (g *gen) cfgEnabled(attrs []rustsrc.Attr, file, what string) (bool, error) {
	for _, a := range attrs {
		switch {
		case a.Name == "cfg":
			on, err := g.evalCfg(a.Args, file)
			if err != nil {
				return false, fmt.Errorf("%s: %s: %v", what, a.Rendered, err)
			}
			if !on {
				return false, nil
			}
		case a.Name == "cfg_attr":
			return false, fmt.Errorf("%s: %s is not supported", what, a.Rendered)
		}
	}
	return true, nil
}

func (g *gen) evalCfg(toks []rustsrc.Token, file string) (bool, error) {
	switch {
	case len(toks) == 3 && toks[0].Is(rustsrc.Ident, "feature") && toks[1].IsPunct("=") && toks[2].Kind == rustsrc.Str:
		return g.featureEnabled(file, toks[2].Text)
	case len(toks) == 1 && toks[0].Is(rustsrc.Ident, "test"):
		return false, nil // not in the program's build
	case len(toks) > 2 && toks[0].Kind == rustsrc.Ident && toks[1].IsPunct("("):
		end, err := rustsrc.Matching(toks, 1)
		if err != nil || end != len(toks)-1 {
			break
		}
		var vals []bool
		for _, p := range rustsrc.SplitTop(toks[2:end]) {
			if len(p) == 0 {
				continue
			}
			v, err := g.evalCfg(p, file)
			if err != nil {
				return false, err
			}
			vals = append(vals, v)
		}
		switch toks[0].Text {
		case "not":
			if len(vals) == 1 {
				return !vals[0], nil
			}
		case "all":
			for _, v := range vals {
				if !v {
					return false, nil
				}
			}
			return true, nil
		case "any":
			for _, v := range vals {
				if v {
					return true, nil
				}
			}
			return false, nil
		}
	}
	return false, fmt.Errorf("cannot evaluate cfg(%s)", rustsrc.Render(toks))
}

// kebab and screaming apply heck's kebab-case and SCREAMING_SNAKE_CASE to a
// snake_case Rust field name.
func kebab(name string) (string, error) {
	words, err := snakeWords(name)
	return strings.Join(words, "-"), err
}

func screaming(name string) (string, error) {
	words, err := snakeWords(name)
	return strings.ToUpper(strings.Join(words, "_")), err
}

func snakeWords(name string) ([]string, error) {
	var words []string
	for _, w := range strings.Split(strings.TrimPrefix(name, "r#"), "_") {
		if w == "" {
			continue
		}
		for _, c := range w {
			if unicode.IsUpper(c) {
				return nil, fmt.Errorf("field name %q is not snake_case; its clap name is not derived here", name)
			}
		}
		words = append(words, w)
	}
	return words, nil
}

// variantKebab applies heck's kebab-case to a CamelCase variant name.
func variantKebab(name string) (string, error) {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if !unicode.IsLetter(c) {
			return "", fmt.Errorf("variant name %q: only letters are handled", name)
		}
		if unicode.IsUpper(c) && i > 0 {
			prevLower := unicode.IsLower(r[i-1])
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if prevLower || (unicode.IsUpper(r[i-1]) && nextLower) {
				b.WriteByte('-')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String(), nil
}

// program is one program's command line: its top-level struct and how
// mz_ore::cli::parse_args is called.
type program struct {
	name      string // binary name
	goVar     string
	out       string
	main      string // upstream path of the file with main()
	strct     string // the clap::Parser struct
	envPrefix string // from CliConfig
	version   bool   // CliConfig.enable_version_flag
}

// command builds the table of a clap::Parser/Args struct used as a command.
func (g *gen) command(it *rustsrc.Item, name, envPrefix string, top bool) (*Command, error) {
	cmd := &Command{Name: name, Origin: fmt.Sprintf("%s: %s", it.File, it.Name)}
	hasVersion := false
	if err := g.containerAttrs(it, func(key string) error {
		switch key {
		case "version":
			hasVersion = true
		case "name", "about", "long_about", "long_version", "author", "next_line_help", "help_template", "term_width", "max_term_width", "disable_colored_help":
		default:
			return fmt.Errorf("command attribute %q is not handled", key)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	cmd.Version = hasVersion
	if err := g.structArgs(it, cmd, envPrefix, top); err != nil {
		return nil, err
	}
	return cmd, nil
}

// containerAttrs checks a struct's derive and passes its clap attribute
// keys to f.
func (g *gen) containerAttrs(it *rustsrc.Item, f func(key string) error) error {
	if it.Kind != "struct" || it.Shape != "named" || it.Generic {
		return fmt.Errorf("%s %s (%s:%d): only plain structs with named fields are handled", it.Kind, it.Name, it.File, it.Line)
	}
	if !rustsrc.Derives(it.Attrs, "Parser") && !rustsrc.Derives(it.Attrs, "Args") {
		return fmt.Errorf("struct %s (%s:%d) does not derive clap::Parser or clap::Args", it.Name, it.File, it.Line)
	}
	for _, a := range it.Attrs {
		switch {
		case clapAttr(a.Name):
			items, err := attrItems(a)
			if err != nil {
				return fmt.Errorf("struct %s: %v", it.Name, err)
			}
			for _, x := range items {
				if a.Name == "group" {
					return fmt.Errorf("struct %s: %s is not handled", it.Name, a.Rendered)
				}
				if x.key == "rename_all" || x.key == "rename_all_env" {
					return fmt.Errorf("struct %s: %s is not handled", it.Name, a.Rendered)
				}
				if err := f(x.key); err != nil {
					return fmt.Errorf("struct %s (%s:%d): %v", it.Name, it.File, it.Line, err)
				}
			}
		case a.Name == "cfg" || a.Name == "cfg_attr":
			return fmt.Errorf("struct %s: %s is not handled", it.Name, a.Rendered)
		case ignoredAttr(a.Name):
		default:
			return fmt.Errorf("struct %s: attribute %s is not handled", it.Name, a.Rendered)
		}
	}
	return nil
}

// structArgs appends a struct's arguments (following flatten and
// subcommand fields) to cmd, in clap's order.
func (g *gen) structArgs(it *rustsrc.Item, cmd *Command, envPrefix string, top bool) error {
	g.used(it.File, it.Name)
	for _, f := range it.Fields {
		where := fmt.Sprintf("%s.%s (%s:%d)", it.Name, f.Name, it.File, f.Line)
		var items []attrItem
		kind := "arg"
		for _, a := range f.Attrs {
			switch {
			case clapAttr(a.Name):
				if a.Name == "value" || a.Name == "group" {
					return fmt.Errorf("%s: %s is not handled", where, a.Rendered)
				}
				xs, err := attrItems(a)
				if err != nil {
					return fmt.Errorf("%s: %v", where, err)
				}
				for _, x := range xs {
					switch {
					case x.key == "flatten" && x.form == "bare":
						kind = "flatten"
					case x.key == "subcommand" && x.form == "bare":
						kind = "subcommand"
					case x.key == "skip":
						kind = "skip"
					case x.key == "from_global" || x.key == "external_subcommand":
						return fmt.Errorf("%s: %s is not handled", where, x.key)
					default:
						items = append(items, x)
					}
				}
			case a.Name == "cfg" || a.Name == "cfg_attr" || ignoredAttr(a.Name):
			default:
				return fmt.Errorf("%s: attribute %s is not handled", where, a.Rendered)
			}
		}
		if kind == "skip" {
			continue
		}
		on, err := g.cfgEnabled(f.Attrs, it.File, where)
		if err != nil {
			return err
		}
		if !on {
			continue
		}
		typ, err := rustsrc.ParseType(f.Type)
		if err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
		switch kind {
		case "flatten":
			if len(items) > 0 || typ.Name() == "Option" {
				return fmt.Errorf("%s: flatten with other attributes or an Option is not handled", where)
			}
			def, err := g.findDef("struct", typ.Path, it.File)
			if err != nil {
				return fmt.Errorf("%s: %v", where, err)
			}
			if err := g.containerAttrs(def, func(key string) error {
				switch key {
				case "about", "long_about", "next_help_heading", "next_display_order":
					return nil
				}
				return fmt.Errorf("attribute %q on a flattened struct is not handled", key)
			}); err != nil {
				return err
			}
			if err := g.structArgs(def, cmd, envPrefix, top); err != nil {
				return err
			}
		case "subcommand":
			if err := g.subcommands(cmd, typ, items, it.File, where); err != nil {
				return err
			}
		default:
			a, err := g.arg(f, items, typ, it.File, where)
			if err != nil {
				return err
			}
			if a.Env != "" && top {
				// mz_ore::cli::parse_args prefixes the env of the top-level
				// command's arguments (command.get_arguments()) only.
				a.Env = envPrefix + a.Env
			}
			cmd.Args = append(cmd.Args, a)
		}
	}
	return nil
}

func (g *gen) subcommands(cmd *Command, typ rustsrc.Type, items []attrItem, file, where string) error {
	if len(items) > 0 || len(cmd.Subcommands) > 0 {
		return fmt.Errorf("%s: subcommand field with other attributes, or two of them, is not handled", where)
	}
	if typ.Name() == "Option" {
		return fmt.Errorf("%s: an optional subcommand is not handled", where)
	}
	// clap derive: a non-Option subcommand field sets
	// subcommand_required(true) and arg_required_else_help(true).
	cmd.SubcommandRequired = true
	cmd.ArgRequiredElseHelp = true
	def, err := g.findDef("enum", typ.Path, file)
	if err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	g.used(def.File, def.Name)
	if !rustsrc.Derives(def.Attrs, "Subcommand") {
		return fmt.Errorf("%s: enum %s does not derive clap::Subcommand", where, def.Name)
	}
	for _, a := range def.Attrs {
		if clapAttr(a.Name) || a.Name == "cfg" || a.Name == "cfg_attr" {
			return fmt.Errorf("enum %s: %s is not handled", def.Name, a.Rendered)
		}
	}
	for _, v := range def.Variants {
		vwhere := fmt.Sprintf("%s::%s (%s:%d)", def.Name, v.Name, def.File, v.Line)
		on, err := g.cfgEnabled(v.Attrs, def.File, vwhere)
		if err != nil {
			return err
		}
		if !on {
			continue
		}
		name, err := variantKebab(v.Name)
		if err != nil {
			return fmt.Errorf("%s: %v", vwhere, err)
		}
		for _, a := range v.Attrs {
			switch {
			case clapAttr(a.Name):
				xs, err := attrItems(a)
				if err != nil {
					return fmt.Errorf("%s: %v", vwhere, err)
				}
				for _, x := range xs {
					switch {
					case x.key == "name" && x.form == "eq" && parseVal(x.value).kind == "str":
						name = parseVal(x.value).s
					case x.key == "about" || x.key == "long_about":
					default:
						return fmt.Errorf("%s: %s is not handled", vwhere, a.Rendered)
					}
				}
			case a.Name == "cfg" || ignoredAttr(a.Name):
			default:
				return fmt.Errorf("%s: attribute %s is not handled", vwhere, a.Rendered)
			}
		}
		if v.Fields || len(v.Tuple) != 1 {
			return fmt.Errorf("%s: only variants holding one Args struct are handled", vwhere)
		}
		styp, err := rustsrc.ParseType(v.Tuple[0])
		if err != nil {
			return fmt.Errorf("%s: %v", vwhere, err)
		}
		sdef, err := g.findDef("struct", styp.Path, def.File)
		if err != nil {
			return fmt.Errorf("%s: %v", vwhere, err)
		}
		sub, err := g.command(sdef, name, "", false)
		if err != nil {
			return err
		}
		if sub.Version {
			return fmt.Errorf("%s: a subcommand with its own version is not handled", vwhere)
		}
		cmd.Subcommands = append(cmd.Subcommands, sub)
	}
	return nil
}

// arg builds one argument from a field, following clap_derive: attribute
// items are applied in order, after the implicit settings derived from the
// field's name and type.
func (g *gen) arg(f rustsrc.Field, items []attrItem, typ rustsrc.Type, file, where string) (*Arg, error) {
	fail := func(format string, a ...any) (*Arg, error) {
		return nil, fmt.Errorf("%s: %s", where, fmt.Sprintf(format, a...))
	}
	a := &Arg{ID: strings.TrimPrefix(f.Name, "r#"), RustType: typ.Text, Origin: where}
	name, assigned := a.ID, false
	cased := func(conv func(string) (string, error)) (string, error) {
		if assigned {
			return name, nil
		}
		return conv(name)
	}

	// The field type decides the implicit action (clap_derive's
	// default_action) and whether the argument is required.
	ty := "other"
	inner := typ
	switch typ.Name() {
	case "Option":
		ty = "option"
		if len(typ.Args) != 1 {
			return fail("cannot read type %s", typ.Text)
		}
		inner = typ.Args[0]
		switch inner.Name() {
		case "Option":
			return fail("Option<Option<_>> is not handled")
		case "Vec":
			ty = "vec"
			if len(inner.Args) != 1 || inner.Args[0].Name() == "Vec" {
				return fail("cannot read type %s", typ.Text)
			}
			inner = inner.Args[0]
		}
	case "Vec":
		ty = "vec"
		if len(typ.Args) != 1 || typ.Args[0].Name() == "Vec" {
			return fail("type %s is not handled", typ.Text)
		}
		inner = typ.Args[0]
	case "()":
		if len(typ.Args) == 0 {
			return fail("type %s is not handled", typ.Text)
		}
	}
	isBool := len(typ.Path) == 1 && typ.Path[0] == "bool"

	var (
		action        string
		valueParser   []rustsrc.Token
		valueEnum     bool
		hasDefault    bool // a default_value method (clap_derive's find_default_method)
		requiredSet   bool
		required      bool
		valueName     string
		defaultValueT *attrItem
	)
	str1 := func(x attrItem, args []rval) (string, error) {
		if len(args) != 1 || args[0].kind != "str" {
			return "", fmt.Errorf("%s: %s wants one string literal", where, x.key)
		}
		return args[0].s, nil
	}
	strs := func(x attrItem, args []rval) ([]string, error) {
		if len(args) != 1 || args[0].kind != "list" {
			return nil, fmt.Errorf("%s: %s wants a list of string literals", where, x.key)
		}
		var out []string
		for _, v := range args[0].items {
			if v.kind != "str" {
				return nil, fmt.Errorf("%s: %s wants a list of string literals", where, x.key)
			}
			out = append(out, v.s)
		}
		return out, nil
	}
	boolLit := func(x attrItem, args []rval) (bool, error) {
		if len(args) != 1 || args[0].kind != "bool" {
			return false, fmt.Errorf("%s: %s wants true or false", where, x.key)
		}
		return args[0].s == "true", nil
	}
	pair := func(x attrItem, v rval) (Cond, error) {
		if v.kind != "tuple" || len(v.items) != 2 || v.items[0].kind != "str" || v.items[1].kind != "str" {
			return Cond{}, fmt.Errorf("%s: %s wants (\"arg\", \"value\") pairs", where, x.key)
		}
		return Cond{Arg: v.items[0].s, Value: v.items[1].s}, nil
	}
	defaultIf := func(x attrItem, vs []rval) (DefaultIf, error) {
		bad := fmt.Errorf("%s: cannot read %s", where, x.key)
		if len(vs) != 3 || vs[0].kind != "str" {
			return DefaultIf{}, bad
		}
		d := DefaultIf{Arg: vs[0].s}
		switch {
		case vs[1].kind == "str":
			d.Equals = vs[1].s
		case vs[1].kind == "path" && strings.HasSuffix(vs[1].s, "ArgPredicate::IsPresent"):
			d.Present = true
		default:
			return d, bad
		}
		switch {
		case vs[2].kind == "str":
			d.Value = vs[2].s
		case vs[2].kind == "call" && vs[2].s == "Some" && len(vs[2].items) == 1 && vs[2].items[0].kind == "str":
			d.Value = vs[2].items[0].s
		case vs[2].kind == "path" && vs[2].s == "None":
			d.NoValue = true
		default:
			return d, bad
		}
		return d, nil
	}

	for _, x := range items {
		var args []rval
		switch x.form {
		case "eq":
			args = []rval{parseVal(x.value)}
		case "call":
			for _, t := range x.args {
				args = append(args, parseVal(t))
			}
		}
		// Bare keys and the magic `key = value` forms first
		// (clap_derive's MagicAttrName).
		if x.form == "bare" {
			var err error
			switch x.key {
			case "long":
				a.Long, err = cased(kebab)
			case "short":
				a.Short = []rune(name)[0]
			case "env":
				a.Env, err = cased(screaming)
			case "value_enum":
				valueEnum = true
			case "verbatim_doc_comment", "long_help", "action", "value_parser":
				// No effect on parsing (bare action/value_parser are the
				// defaults).
			case "default_value_t":
				x := x
				defaultValueT = &x
				hasDefault = true
			default:
				return fail("attribute %s is not handled", x.key)
			}
			if err != nil {
				return fail("%v", err)
			}
			continue
		}
		if x.form == "eq" {
			switch x.key {
			case "id", "name":
				s, err := str1(x, args)
				if err != nil {
					return nil, err
				}
				name, assigned = s, true
				a.ID = s
				continue
			case "default_value_t":
				x := x
				defaultValueT = &x
				hasDefault = true
				continue
			case "default_values_t", "default_value_os_t", "default_values_os_t", "rename_all", "rename_all_env":
				return fail("attribute %s is not handled", x.key)
			}
		}
		// Everything else is a builder method, Arg::key(args).
		var err error
		switch x.key {
		case "long":
			a.Long, err = str1(x, args)
		case "short":
			if len(args) != 1 || args[0].kind != "char" {
				return fail("short wants a char literal")
			}
			a.Short = []rune(args[0].s)[0]
		case "env":
			a.Env, err = str1(x, args)
		case "alias", "visible_alias":
			var s string
			s, err = str1(x, args)
			a.Aliases = append(a.Aliases, s)
		case "aliases", "visible_aliases":
			var s []string
			s, err = strs(x, args)
			a.Aliases = append(a.Aliases, s...)
		case "value_name":
			valueName, err = str1(x, args)
		case "help", "long_help", "display_order", "help_heading", "hide_default_value", "hide_possible_values",
			"hide_env", "hide_env_values", "hide_short_help", "hide_long_help", "value_hint", "next_line_help":
			// Help output only.
		case "hide":
			a.Hidden, err = boolLit(x, args)
		case "required":
			requiredSet = true
			required, err = boolLit(x, args)
		case "default_value", "default_value_os":
			if len(args) != 1 {
				return fail("cannot read %s", x.key)
			}
			var s string
			s, err = g.constString(args[0], where)
			a.Default = []string{s}
			hasDefault = true
		case "default_values":
			a.Default, err = strs(x, args)
		case "default_value_if":
			var d DefaultIf
			d, err = defaultIf(x, args)
			a.DefaultIf = append(a.DefaultIf, d)
		case "default_value_ifs":
			if len(args) != 1 || args[0].kind != "list" {
				return fail("cannot read %s", x.key)
			}
			for _, v := range args[0].items {
				if v.kind != "tuple" {
					return fail("cannot read %s", x.key)
				}
				d, err := defaultIf(x, v.items)
				if err != nil {
					return nil, err
				}
				a.DefaultIf = append(a.DefaultIf, d)
			}
		case "required_if_eq":
			if len(args) != 2 || args[0].kind != "str" || args[1].kind != "str" {
				return fail("cannot read %s", x.key)
			}
			a.RequiredIfEq = append(a.RequiredIfEq, Cond{Arg: args[0].s, Value: args[1].s})
		case "required_if_eq_any", "required_if_eq_all":
			if len(args) != 1 || args[0].kind != "list" {
				return fail("cannot read %s", x.key)
			}
			for _, v := range args[0].items {
				c, err := pair(x, v)
				if err != nil {
					return nil, err
				}
				if x.key == "required_if_eq_any" {
					a.RequiredIfEq = append(a.RequiredIfEq, c)
				} else {
					a.RequiredIfEqAll = append(a.RequiredIfEqAll, c)
				}
			}
		case "required_unless_present":
			var s string
			s, err = str1(x, args)
			a.RequiredUnlessPresent = append(a.RequiredUnlessPresent, s)
		case "required_unless_present_any":
			var s []string
			s, err = strs(x, args)
			a.RequiredUnlessPresent = append(a.RequiredUnlessPresent, s...)
		case "required_unless_present_all":
			var s []string
			s, err = strs(x, args)
			a.RequiredUnlessPresentAll = append(a.RequiredUnlessPresentAll, s...)
		case "requires":
			var s string
			s, err = str1(x, args)
			a.Requires = append(a.Requires, s)
		case "requires_all":
			var s []string
			s, err = strs(x, args)
			a.Requires = append(a.Requires, s...)
		case "conflicts_with":
			var s string
			s, err = str1(x, args)
			a.ConflictsWith = append(a.ConflictsWith, s)
		case "conflicts_with_all":
			var s []string
			s, err = strs(x, args)
			a.ConflictsWith = append(a.ConflictsWith, s...)
		case "value_delimiter":
			if len(args) != 1 || args[0].kind != "char" {
				return fail("value_delimiter wants a char literal")
			}
			a.Delimiter = []rune(args[0].s)[0]
		case "use_value_delimiter":
			// Deprecated in clap 4 but still there: true means ','.
			var on bool
			on, err = boolLit(x, args)
			if on && a.Delimiter == 0 {
				a.Delimiter = ','
			} else if !on {
				a.Delimiter = 0
			}
		case "action":
			if len(args) != 1 || args[0].kind != "path" {
				return fail("cannot read action")
			}
			action = args[0].s[strings.LastIndex(args[0].s, ":")+1:]
		case "value_parser":
			if x.form != "eq" {
				return fail("value_parser(...) is not handled")
			}
			valueParser = x.value
		default:
			return fail("attribute %s is not handled", x.key)
		}
		if err != nil {
			return nil, err
		}
	}

	if a.Long == "" && a.Short == 0 {
		return fail("positional arguments are not handled")
	}

	// Action: explicit, else from the type.
	switch action {
	case "":
		switch {
		case ty == "vec":
			a.Action = Append
		case ty == "option":
			a.Action = Set
		case isBool:
			a.Action = SetTrue
		default:
			a.Action = Set
		}
	case "Set":
		a.Action = Set
	case "Append":
		a.Action = Append
	case "SetTrue":
		a.Action = SetTrue
	case "SetFalse":
		a.Action = SetFalse
	default:
		return fail("action %s is not handled", action)
	}
	takesValue := a.Action == Set || a.Action == Append

	// Required: clap_derive's `.required(!has_default && action.takes_values())`
	// for a plain type; an explicit `required` comes later and wins.
	a.Required = ty == "other" && !hasDefault && takesValue
	if requiredSet {
		a.Required = required
	}

	if takesValue {
		a.ValueName = valueName
		if a.ValueName == "" {
			var err error
			if a.ValueName, err = cased(screaming); err != nil {
				return fail("%v", err)
			}
		}
	}

	// The value parser: explicit, else clap's value_parser!(inner type).
	var err error
	if valueParser != nil {
		a.Parser, err = g.explicitParser(valueParser, file, where)
	} else {
		a.Parser, err = g.typeParser(inner, file, where)
	}
	if err != nil {
		return nil, err
	}
	if !takesValue {
		// Flags parse "true"/"false" (from the environment) whatever the
		// field type.
		a.Parser = Parser{Kind: Bool}
	}
	if valueEnum && a.Parser.Kind != Enum {
		// value_enum only changes how default_value_t is rendered; the
		// parser is still value_parser!(T).
		warnf("%s: value_enum on %s, which is not a ValueEnum: clap parses it as %s", where, inner.Text, inner.Text)
	}
	if defaultValueT != nil {
		s, err := g.defaultValueT(*defaultValueT, typ, ty, a.Parser, file, where)
		if err != nil {
			return nil, err
		}
		a.Default = []string{s}
	}
	return a, nil
}

// constString turns a default_value expression into its string: a literal,
// or CONST.to_string() of a literal constant.
func (g *gen) constString(v rval, where string) (string, error) {
	switch v.kind {
	case "str", "num", "bool", "char":
		return literal(v), nil
	}
	t := v.toks
	if n := len(t); n >= 4 && t[n-4].IsPunct(".") && t[n-3].Is(rustsrc.Ident, "to_string") && t[n-2].IsPunct("(") && t[n-1].IsPunct(")") {
		p := parseVal(t[:n-4])
		if p.kind == "path" {
			return g.resolveConst(p.s[strings.LastIndex(p.s, ":")+1:], where)
		}
		if p.kind != "other" {
			return literal(p), nil
		}
	}
	return "", fmt.Errorf("%s: cannot evaluate default %s", where, rustsrc.Render(v.toks))
}

func literal(v rval) string {
	if v.kind == "num" && !strings.HasPrefix(v.s, "0x") && !strings.HasPrefix(v.s, "0o") && !strings.HasPrefix(v.s, "0b") {
		// Drop digit separators and a type suffix: 1_000u32 -> 1000.
		s := strings.ReplaceAll(v.s, "_", "")
		if i := strings.IndexFunc(s, unicode.IsLetter); i > 0 {
			s = s[:i]
		}
		return s
	}
	return v.s
}

// resolveConst finds `const NAME: T = <literal>;` under src/.
func (g *gen) resolveConst(name, where string) (string, error) {
	files, err := g.up.FilesContaining(name)
	if err != nil {
		return "", err
	}
	var vals []string
	for _, f := range files {
		toks, err := g.up.Tokens(f)
		if err != nil {
			return "", err
		}
		for i := 0; i+3 < len(toks); i++ {
			if !toks[i].Is(rustsrc.Ident, "const") || !toks[i+1].Is(rustsrc.Ident, name) || !toks[i+2].IsPunct(":") {
				continue
			}
			j := i + 3
			for j < len(toks) && !toks[j].IsPunct("=") && !toks[j].IsPunct(";") {
				j++
			}
			k := j + 1
			for k < len(toks) && !toks[k].IsPunct(";") {
				k++
			}
			if j >= len(toks) || !toks[j].IsPunct("=") || k >= len(toks) {
				continue
			}
			v := parseVal(toks[j+1 : k])
			if v.kind != "num" && v.kind != "str" && v.kind != "bool" {
				return "", fmt.Errorf("%s: const %s (%s:%d) is not a literal", where, name, f, toks[i].Line)
			}
			vals = append(vals, literal(v))
			g.used(f, "const "+name)
		}
	}
	if len(vals) == 0 {
		return "", fmt.Errorf("%s: const %s not found", where, name)
	}
	for _, v := range vals[1:] {
		if v != vals[0] {
			return "", fmt.Errorf("%s: const %s has several definitions with different values", where, name)
		}
	}
	return vals[0], nil
}

// intTypes are clap's ValueParserFactory integer types (RangedI64 or
// RangedU64ValueParser) and the FromStr-only usize/isize.
var intTypes = map[string]*IntRange{
	"u8":    {Bounded: true, Min: "0", Max: "255"},
	"i8":    {Bounded: true, Min: "-128", Max: "127"},
	"u16":   {Bounded: true, Min: "0", Max: "65535"},
	"i16":   {Bounded: true, Min: "-32768", Max: "32767"},
	"u32":   {Bounded: true, Min: "0", Max: "4294967295"},
	"i32":   {Bounded: true, Min: "-2147483648", Max: "2147483647"},
	"i64":   {},
	"u64":   {Unsigned: true},
	"isize": {},               // FromStr; 64-bit targets
	"usize": {Unsigned: true}, // FromStr; 64-bit targets
}

// typeParser is clap's value_parser!(T) for a field's inner type.
func (g *gen) typeParser(t rustsrc.Type, file, where string) (Parser, error) {
	n := t.Name()
	if len(t.Args) == 0 && len(t.Path) == 1 {
		switch n {
		case "String", "OsString":
			return Parser{Kind: String}, nil
		case "PathBuf":
			return Parser{Kind: Path}, nil
		case "bool":
			return Parser{Kind: Bool}, nil
		case "u128", "i128":
			return Parser{}, fmt.Errorf("%s: type %s is not handled", where, n)
		}
		if r, ok := intTypes[n]; ok {
			r := *r
			return Parser{Kind: Int, Int: &r}, nil
		}
	}
	if n == "PathBuf" && len(t.Args) == 0 {
		return Parser{Kind: Path}, nil
	}
	if cands, ok := g.enums[n]; ok && len(t.Args) == 0 {
		def, err := g.pick("enum", t.Path, file, cands)
		if err != nil {
			return Parser{}, fmt.Errorf("%s: %v", where, err)
		}
		values, err := g.enumValues(def)
		if err != nil {
			return Parser{}, err
		}
		return Parser{Kind: Enum, Values: values}, nil
	}
	p := Parser{Kind: Unchecked, Expr: "FromStr for " + t.Text}
	switch g.manual[n] {
	case "ValueEnum":
		return Parser{}, fmt.Errorf("%s: %s has a hand-written ValueEnum impl, which is not handled", where, n)
	case "ValueParserFactory":
		// Its own parser (e.g. mz_ore's SensitiveUrlParser).
		p.Expr = "ValueParserFactory for " + t.Text
	}
	// Unchecked unless package clap models the type (valueparsers.go).
	key, err := g.typeKey(t, file)
	if err != nil {
		return p, err
	}
	return g.modelled(p, key, where)
}

// explicitParser reads `value_parser = ...`.
func (g *gen) explicitParser(toks []rustsrc.Token, file, where string) (Parser, error) {
	v := parseVal(toks)
	if v.kind == "list" {
		// A list of strings is a PossibleValuesParser.
		p := Parser{Kind: Enum, Expr: rustsrc.Render(toks)}
		for _, x := range v.items {
			if x.kind != "str" {
				return p, fmt.Errorf("%s: value_parser %s is not handled", where, rustsrc.Render(toks))
			}
			p.Values = append(p.Values, PossibleValue{Name: x.s})
		}
		return p, nil
	}
	// value_parser!(T) optionally followed by .range(...).
	for i := 0; i+3 < len(toks); i++ {
		if !toks[i].Is(rustsrc.Ident, "value_parser") || !toks[i+1].IsPunct("!") || !toks[i+2].IsPunct("(") {
			continue
		}
		end, err := rustsrc.Matching(toks, i+2)
		if err != nil {
			break
		}
		if i > 0 && !(i >= 3 && toks[i-1].IsPunct(":") && toks[i-2].IsPunct(":") && toks[i-3].Is(rustsrc.Ident, "clap") && i == 3) {
			break
		}
		t, err := rustsrc.ParseType(toks[i+3 : end])
		if err != nil {
			break
		}
		p, err := g.typeParser(t, file, where)
		if err != nil {
			return p, err
		}
		rest := toks[end+1:]
		if len(rest) == 0 {
			return p, nil
		}
		if p.Kind != Int || len(rest) < 4 || !rest[0].IsPunct(".") || !rest[1].Is(rustsrc.Ident, "range") || !rest[2].IsPunct("(") {
			break
		}
		rend, err := rustsrc.Matching(rest, 2)
		if err != nil || rend != len(rest)-1 {
			break
		}
		lo, hi, ok := rangeBounds(rest[3:rend])
		if !ok {
			break
		}
		r := *p.Int
		r.Bounded = true
		if lo != "" {
			r.Min = lo
		}
		if hi != "" {
			r.Max = hi
		}
		if r.Min == "" || r.Max == "" {
			break
		}
		p.Int = &r
		p.Expr = rustsrc.Render(toks)
		return p, nil
	}
	if v.kind == "path" || (len(toks) > 0 && toks[0].Kind == rustsrc.Ident && !strings.Contains(rustsrc.Render(toks), "(")) {
		// A function or a parser constant: Unchecked unless package clap
		// models it (valueparsers.go).
		p := Parser{Kind: Unchecked, Expr: rustsrc.Render(toks)}
		key, ok, err := g.exprKey(toks, file)
		if err != nil || !ok {
			return p, err
		}
		return g.modelled(p, key, where)
	}
	return Parser{}, fmt.Errorf("%s: value_parser %s is not handled", where, rustsrc.Render(toks))
}

// rangeBounds reads a..=b, a..b, a.. or ..=b of integer literals.
func rangeBounds(toks []rustsrc.Token) (lo, hi string, ok bool) {
	i := 0
	num := func() (string, bool) {
		neg := false
		if i < len(toks) && toks[i].IsPunct("-") {
			neg = true
			i++
		}
		if i < len(toks) && toks[i].Kind == rustsrc.Num {
			s := literal(rval{kind: "num", s: toks[i].Text})
			i++
			if neg {
				s = "-" + s
			}
			return s, true
		}
		return "", false
	}
	lo, _ = num()
	if i+1 >= len(toks) || !toks[i].IsPunct(".") || !toks[i+1].IsPunct(".") {
		return "", "", false
	}
	i += 2
	inclusive := i < len(toks) && toks[i].IsPunct("=")
	if inclusive {
		i++
	}
	if i == len(toks) {
		return lo, "", !inclusive
	}
	hi, ok = num()
	if !ok || i != len(toks) {
		return "", "", false
	}
	if !inclusive {
		// a..b: clap reports it as a..=b-1 via Bound::Excluded formatting
		// ("a..b"); keep it exact by rejecting it.
		return "", "", false
	}
	return lo, hi, true
}

// enumValues lists a ValueEnum's possible values (clap_derive value_enum.rs:
// kebab-case variant names unless renamed; skipped variants omitted).
func (g *gen) enumValues(def *rustsrc.Item) ([]PossibleValue, error) {
	g.used(def.File, def.Name)
	for _, a := range def.Attrs {
		if clapAttr(a.Name) {
			return nil, fmt.Errorf("enum %s (%s:%d): %s is not handled", def.Name, def.File, def.Line, a.Rendered)
		}
		if a.Name == "cfg" || a.Name == "cfg_attr" {
			return nil, fmt.Errorf("enum %s: %s is not handled", def.Name, a.Rendered)
		}
	}
	var out []PossibleValue
	for _, v := range def.Variants {
		where := fmt.Sprintf("%s::%s (%s:%d)", def.Name, v.Name, def.File, v.Line)
		on, err := g.cfgEnabled(v.Attrs, def.File, where)
		if err != nil {
			return nil, err
		}
		if !on {
			continue
		}
		if v.Fields || len(v.Tuple) > 0 {
			return nil, fmt.Errorf("%s: ValueEnum variants with data are not handled", where)
		}
		name, err := variantKebab(v.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		pv := PossibleValue{Name: name}
		skip := false
		for _, a := range v.Attrs {
			switch {
			case a.Name == "value" || a.Name == "clap":
				xs, err := attrItems(a)
				if err != nil {
					return nil, fmt.Errorf("%s: %v", where, err)
				}
				for _, x := range xs {
					val := parseVal(x.value)
					switch {
					case x.key == "skip" && x.form == "bare":
						skip = true
					case x.key == "name" && x.form == "eq" && val.kind == "str":
						pv.Name = val.s
					case x.key == "alias" && x.form == "eq" && val.kind == "str":
						pv.Aliases = append(pv.Aliases, val.s)
					case x.key == "hide" && x.form == "eq" && val.kind == "bool":
						pv.Hidden = val.s == "true"
					case x.key == "help":
					default:
						return nil, fmt.Errorf("%s: %s is not handled", where, a.Rendered)
					}
				}
			case a.Name == "cfg" || ignoredAttr(a.Name):
			default:
				return nil, fmt.Errorf("%s: attribute %s is not handled", where, a.Rendered)
			}
		}
		if !skip {
			out = append(out, pv)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("enum %s has no values", def.Name)
	}
	return out, nil
}

// defaultValueT renders default_value_t: Display of the value, or the
// possible-value name for a ValueEnum.
func (g *gen) defaultValueT(x attrItem, typ rustsrc.Type, ty string, p Parser, file, where string) (string, error) {
	if ty != "other" {
		return "", fmt.Errorf("%s: default_value_t on %s is not handled", where, typ.Text)
	}
	if x.form == "eq" {
		v := parseVal(x.value)
		switch v.kind {
		case "str", "num", "bool", "char":
			return literal(v), nil
		case "path":
			if p.Kind == Enum && strings.Contains(v.s, "::") {
				return variantKebab(v.s[strings.LastIndex(v.s, ":")+1:])
			}
		}
		return "", fmt.Errorf("%s: cannot evaluate default_value_t = %s", where, rustsrc.Render(x.value))
	}
	// <T as Default>::default()
	switch {
	case typ.Text == "bool":
		return "false", nil
	case typ.Text == "String":
		return "", nil
	case p.Kind == Int:
		return "0", nil
	case p.Kind == Enum:
		cands := g.enums[typ.Name()]
		def, err := g.pick("enum", typ.Path, file, cands)
		if err != nil {
			return "", fmt.Errorf("%s: %v", where, err)
		}
		if !rustsrc.Derives(def.Attrs, "Default") {
			return "", fmt.Errorf("%s: default_value_t needs %s's Default, which is not derived", where, def.Name)
		}
		for _, v := range def.Variants {
			for _, a := range v.Attrs {
				if a.Name == "default" {
					vals, err := g.enumValues(def)
					if err != nil {
						return "", err
					}
					name, err := variantKebab(v.Name)
					if err != nil {
						return "", err
					}
					for _, pv := range vals {
						if pv.Name == name {
							return name, nil
						}
					}
					return "", fmt.Errorf("%s: default variant %s is renamed or skipped, which is not handled", where, v.Name)
				}
			}
		}
		return "", fmt.Errorf("%s: %s has no #[default] variant", where, def.Name)
	}
	return "", fmt.Errorf("%s: cannot evaluate Default for %s", where, typ.Text)
}

// packageName reads [package] name from a crate's Cargo.toml.
func (g *gen) packageName(dir string) (string, error) {
	m, err := g.up.Manifest(dir)
	if err != nil {
		return "", err
	}
	return m.Name, nil
}
