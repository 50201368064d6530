package main

import (
	"fmt"
	"path"
	"strings"

	"github.com/materializeinc/orchestratord/hack/internal/rustsrc"
)

// gen reads upstream's sources and derives the schemas.
type gen struct {
	up      *rustsrc.Source
	sources []string // upstream files read, for the header
}

// used records that a file contributed to the facts.
func (g *gen) used(p string) {
	for _, s := range g.sources {
		if s == p {
			return
		}
	}
	g.sources = append(g.sources, p)
}

// scope is a module: a file and an inline module path within it.
type scope struct {
	f   *rustsrc.File
	mod []string
}

func (s scope) String() string {
	if len(s.mod) == 0 {
		return s.f.Path
	}
	return s.f.Path + " (mod " + rustsrc.ModKey(s.mod) + ")"
}

func (s scope) child(name string) scope {
	return scope{s.f, append(append([]string{}, s.mod...), name)}
}

// target is what a type path names.
type target struct {
	it      *rustsrc.Item // a struct or enum read from upstream
	sc      scope         // the module it is defined in
	builtin string
	k8s     *k8sType
}

// prelude are the std types a bare name means when nothing else defines it.
var prelude = map[string]bool{
	"String": true, "bool": true, "str": true, "Option": true, "Vec": true, "Box": true,
	"i8": true, "i16": true, "i32": true, "i64": true, "i128": true, "isize": true,
	"u8": true, "u16": true, "u32": true, "u64": true, "u128": true, "usize": true,
	"f32": true, "f64": true,
}

// stdTypes are the std paths modelled, by last segment.
var stdTypes = map[string]string{
	"std::collections::BTreeMap":   "BTreeMap",
	"alloc::collections::BTreeMap": "BTreeMap",
	"std::collections::HashMap":    "HashMap",
	"std::string::String":          "String",
	"std::vec::Vec":                "Vec",
	"std::option::Option":          "Option",
	"std::boxed::Box":              "Box",
}

// resolve finds what a type path means in scope sc, following Rust 2018
// name resolution as far as the CRD modules need it: items of the module,
// its use declarations (globs: `use super::*`), the prelude, and paths
// through crate::, self::, super::, child modules and workspace crates.
func (g *gen) resolve(p []string, sc scope) (target, error) {
	if len(p) == 1 {
		t, ok, err := g.lookup(p[0], sc, map[string]bool{})
		if err != nil {
			return t, err
		}
		if ok {
			return t, nil
		}
		if prelude[p[0]] {
			return target{builtin: p[0]}, nil
		}
		return t, fmt.Errorf("%s: cannot resolve %s", sc, p[0])
	}
	return g.resolvePath(p, sc)
}

// lookup finds a single name declared or imported in a module.
func (g *gen) lookup(name string, sc scope, seen map[string]bool) (target, bool, error) {
	key := sc.f.Path + "#" + rustsrc.ModKey(sc.mod)
	if seen[key] {
		return target{}, false, nil
	}
	seen[key] = true
	var found []*rustsrc.Item
	for _, it := range sc.f.Items {
		if it.Name == name && rustsrc.ModKey(it.Mod) == rustsrc.ModKey(sc.mod) {
			found = append(found, it)
		}
	}
	if len(found) > 1 {
		return target{}, false, fmt.Errorf("%s: %s is defined %d times", sc, name, len(found))
	}
	if len(found) == 1 {
		return target{it: found[0], sc: sc}, true, nil
	}
	if full, ok := sc.f.Uses[rustsrc.ModKey(sc.mod)][name]; ok {
		t, err := g.resolvePath(full, sc)
		return t, err == nil, err
	}
	for _, glob := range sc.f.Globs[rustsrc.ModKey(sc.mod)] {
		m, err := g.module(glob, sc)
		if err != nil {
			return target{}, false, fmt.Errorf("%s: use %s::*: %v", sc, strings.Join(glob, "::"), err)
		}
		if t, ok, err := g.lookup(name, m, seen); ok || err != nil {
			return t, ok, err
		}
	}
	return target{}, false, nil
}

// resolvePath resolves a path of two or more segments, or a use path.
func (g *gen) resolvePath(p []string, sc scope) (target, error) {
	full := strings.Join(p, "::")
	if s, ok := stdTypes[full]; ok {
		return target{builtin: s}, nil
	}
	switch p[0] {
	case "std", "core", "alloc":
		return target{}, fmt.Errorf("%s: %s is not modelled", sc, full)
	case "k8s_openapi":
		k, ok := k8sTypes[full]
		if !ok {
			return target{}, fmt.Errorf("%s: Kubernetes type %s is not modelled (add it to k8sTypes)", sc, full)
		}
		return target{k8s: &k}, nil
	case "uuid":
		if full == "uuid::Uuid" {
			return target{builtin: "Uuid"}, nil
		}
		return target{}, fmt.Errorf("%s: %s is not modelled", sc, full)
	}
	if len(p) == 1 {
		return g.resolve(p, sc)
	}
	m, err := g.module(p[:len(p)-1], sc)
	if err != nil {
		return target{}, fmt.Errorf("%s: %s: %v", sc, full, err)
	}
	t, ok, err := g.lookup(p[len(p)-1], m, map[string]bool{})
	if err != nil {
		return t, err
	}
	if !ok {
		return t, fmt.Errorf("%s: %s: no %s in %s", sc, full, p[len(p)-1], m)
	}
	return t, nil
}

// module finds the module a path names, seen from sc.
func (g *gen) module(p []string, sc scope) (scope, error) {
	if len(p) == 0 {
		return sc, nil
	}
	var cur scope
	rest := p[1:]
	switch first := p[0]; {
	case first == "crate":
		root, err := g.crateRoot(sc.f.Path)
		if err != nil {
			return scope{}, err
		}
		cur = root
	case first == "self":
		cur = sc
	case first == "super":
		if len(sc.mod) == 0 {
			return scope{}, fmt.Errorf("super:: of a file module is not modelled")
		}
		cur = scope{sc.f, sc.mod[:len(sc.mod)-1]}
	case sc.f.Mods[rustsrc.ModKey(append(append([]string{}, sc.mod...), first))]:
		cur = sc.child(first)
	case sc.f.Uses[rustsrc.ModKey(sc.mod)][first] != nil:
		return g.module(append(append([]string{}, sc.f.Uses[rustsrc.ModKey(sc.mod)][first]...), rest...), sc)
	case strings.HasPrefix(first, "mz_"):
		root, err := g.workspaceCrate(first)
		if err != nil {
			return scope{}, err
		}
		cur = root
	default:
		if m, err := g.fileModule(sc, first); err == nil && len(sc.mod) == 0 {
			cur = m
		} else {
			return scope{}, fmt.Errorf("module %s is not modelled", strings.Join(p, "::"))
		}
	}
	for _, seg := range rest {
		switch {
		case seg == "super" && len(cur.mod) > 0:
			cur = scope{cur.f, cur.mod[:len(cur.mod)-1]}
		case cur.f.Mods[rustsrc.ModKey(append(append([]string{}, cur.mod...), seg))]:
			cur = cur.child(seg)
		case len(cur.mod) == 0:
			m, err := g.fileModule(cur, seg)
			if err != nil {
				return scope{}, err
			}
			cur = m
		default:
			return scope{}, fmt.Errorf("module %s of %s is not modelled", seg, cur)
		}
	}
	return cur, nil
}

// fileModule finds `mod name;` of a file module in name.rs or name/mod.rs.
func (g *gen) fileModule(parent scope, name string) (scope, error) {
	dir := strings.TrimSuffix(parent.f.Path, ".rs")
	switch path.Base(parent.f.Path) {
	case "lib.rs", "main.rs", "mod.rs":
		dir = path.Dir(parent.f.Path)
	}
	for _, p := range []string{dir + "/" + name + ".rs", dir + "/" + name + "/mod.rs"} {
		if g.up.Exists(p) {
			f, err := g.up.File(p)
			if err != nil {
				return scope{}, err
			}
			return scope{f: f}, nil
		}
	}
	return scope{}, fmt.Errorf("no module file for %s::%s", parent, name)
}

func (g *gen) crateRoot(file string) (scope, error) {
	dir, err := g.up.CrateDir(file)
	if err != nil {
		return scope{}, err
	}
	for _, root := range []string{dir + "/src/lib.rs", dir + "/src/main.rs"} {
		if g.up.Exists(root) {
			f, err := g.up.File(root)
			if err != nil {
				return scope{}, err
			}
			return scope{f: f}, nil
		}
	}
	return scope{}, fmt.Errorf("no src/lib.rs or src/main.rs in %s", dir)
}

// workspaceCrate finds the root module of a workspace crate by its Rust
// name (mz_server_core is the package mz-server-core under src/).
func (g *gen) workspaceCrate(name string) (scope, error) {
	pkg := strings.ReplaceAll(name, "_", "-")
	dir := "src/" + strings.TrimPrefix(pkg, "mz-")
	m, err := g.up.Manifest(dir)
	if err != nil {
		return scope{}, fmt.Errorf("crate %s: %v", name, err)
	}
	if m.Name != pkg {
		return scope{}, fmt.Errorf("crate %s: %s/Cargo.toml is not package %s", name, dir, pkg)
	}
	return g.crateRoot(dir + "/Cargo.toml")
}
