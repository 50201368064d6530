package main

import (
	"fmt"
	"path"
	"strings"
)

// Enough of Cargo.toml to decide #[cfg(feature = "...")] on a field: the
// program's own default features and the features its direct dependencies
// are built with. Cargo unifies features over the whole dependency graph, so
// a feature not enabled that way might still be enabled by another crate:
// that case is an error asking for a -feature override.

type manifest struct {
	dir      string
	name     string
	features map[string][]string
	deps     map[string]dependency
}

type dependency struct {
	pkg             string // package name (the key unless renamed)
	path            string // crate directory, relative to the repository
	workspace       bool
	defaultFeatures bool
	features        []string
}

func (g *gen) manifest(dir string) (*manifest, error) {
	b, err := g.up.read(dir + "/Cargo.toml")
	if err != nil {
		return nil, err
	}
	m := &manifest{dir: dir, features: map[string][]string{}, deps: map[string]dependency{}}
	section := ""
	for _, entry := range tomlEntries(string(b)) {
		if strings.HasPrefix(entry, "[") {
			section = strings.Trim(entry, "[] ")
			continue
		}
		key, value, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("%s/Cargo.toml: cannot read %q", dir, entry)
		}
		key = strings.Trim(strings.TrimSpace(key), `"`)
		value = strings.TrimSpace(value)
		switch section {
		case "package":
			if key == "name" {
				m.name = strings.Trim(value, `"`)
			}
		case "features":
			m.features[key] = tomlStrings(value)
		case "dependencies":
			d := dependency{pkg: key, defaultFeatures: true}
			if k, sub, ok := strings.Cut(key, "."); ok {
				// name.workspace = true
				if sub != "workspace" {
					return nil, fmt.Errorf("%s/Cargo.toml: cannot read dependency %q", dir, entry)
				}
				d.pkg, d.workspace = k, true
				key = k
			} else if strings.HasPrefix(value, "{") {
				for k, v := range tomlTable(value) {
					switch k {
					case "path":
						d.path = path.Clean(path.Join(dir, strings.Trim(v, `"`)))
					case "package":
						d.pkg = strings.Trim(v, `"`)
					case "workspace":
						d.workspace = v == "true"
					case "default-features", "default_features":
						d.defaultFeatures = v != "false"
					case "features":
						d.features = tomlStrings(v)
					}
				}
			}
			m.deps[key] = d
		}
	}
	return m, nil
}

// tomlEntries splits a TOML file into section headers and key = value
// entries, joining values that span lines and dropping comments.
func tomlEntries(s string) []string {
	var out []string
	var cur strings.Builder
	depth := 0
	for _, line := range strings.Split(s, "\n") {
		inStr := false
		for i, c := range line {
			if c == '"' {
				inStr = !inStr
			}
			if c == '#' && !inStr {
				line = line[:i]
				break
			}
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if depth == 0 && strings.HasPrefix(line, "[") {
			out = append(out, line)
			continue
		}
		cur.WriteString(line + " ")
		depth += strings.Count(line, "[") + strings.Count(line, "{") - strings.Count(line, "]") - strings.Count(line, "}")
		if depth <= 0 {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
			depth = 0
		}
	}
	return out
}

// tomlStrings reads ["a", "b"].
func tomlStrings(v string) []string {
	var out []string
	for _, p := range strings.Split(strings.Trim(strings.TrimSpace(v), "[]"), ",") {
		if p = strings.Trim(strings.TrimSpace(p), `"`); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// tomlTable reads { k = v, k2 = [..] }.
func tomlTable(v string) map[string]string {
	out := map[string]string{}
	body := strings.TrimSpace(v)
	body = strings.TrimSuffix(strings.TrimPrefix(body, "{"), "}")
	depth, start := 0, 0
	var parts []string
	for i, c := range body {
		switch c {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, body[start:i])
				start = i + 1
			}
		}
	}
	parts = append(parts, body[start:])
	for _, p := range parts {
		if k, val, ok := strings.Cut(p, "="); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
	}
	return out
}

// closure expands feature names within one crate.
func closure(m *manifest, start []string) map[string]bool {
	seen := map[string]bool{}
	stack := append([]string{}, start...)
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[f] {
			continue
		}
		seen[f] = true
		if strings.Contains(f, "/") || strings.HasPrefix(f, "dep:") {
			continue
		}
		stack = append(stack, m.features[f]...)
	}
	return seen
}

// featureEnabled decides #[cfg(feature = feature)] in file for the program
// being generated.
func (g *gen) featureEnabled(file, feature string) (bool, error) {
	crate, err := g.up.crateDir(file)
	if err != nil {
		return false, err
	}
	if on, ok := g.features[crate+":"+feature]; ok {
		return on, nil
	}
	undecided := fmt.Errorf("cannot decide whether feature %q of %s is enabled when building %s; pass -feature %s:%s=on (or =off)", feature, crate, g.binCrate, crate, feature)
	bin, err := g.manifest(g.binCrate)
	if err != nil {
		return false, err
	}
	binFeatures := closure(bin, []string{"default"})
	if crate == g.binCrate {
		return binFeatures[feature], nil
	}
	cm, err := g.manifest(crate)
	if err != nil {
		return false, err
	}
	g.used(crate+"/Cargo.toml", "features")
	g.used(g.binCrate+"/Cargo.toml", "features")
	for key, d := range bin.deps {
		if d.workspace {
			if d.path, d.defaultFeatures, err = g.workspaceDep(d.pkg); err != nil {
				return false, err
			}
		}
		if d.path != crate {
			continue
		}
		on := closure(cm, d.features)[feature]
		if d.defaultFeatures && closure(cm, []string{"default"})[feature] {
			on = true
		}
		for f := range binFeatures {
			dep, feat, ok := strings.Cut(f, "/")
			if ok && strings.TrimSuffix(dep, "?") == key && closure(cm, []string{feat})[feature] {
				on = true
			}
		}
		if on {
			return true, nil
		}
		return false, undecided
	}
	return false, undecided
}

// workspaceDep reads [workspace.dependencies] of the root Cargo.toml.
func (g *gen) workspaceDep(pkg string) (string, bool, error) {
	b, err := g.up.read("Cargo.toml")
	if err != nil {
		return "", false, err
	}
	section := ""
	for _, entry := range tomlEntries(string(b)) {
		if strings.HasPrefix(entry, "[") {
			section = strings.Trim(entry, "[] ")
			continue
		}
		key, value, _ := strings.Cut(entry, "=")
		if section != "workspace.dependencies" || strings.TrimSpace(key) != pkg {
			continue
		}
		t := tomlTable(value)
		p := ""
		if v, ok := t["path"]; ok {
			p = path.Clean(strings.Trim(v, `"`))
		}
		return p, t["default-features"] != "false", nil
	}
	return "", false, fmt.Errorf("workspace dependency %s not found", pkg)
}
