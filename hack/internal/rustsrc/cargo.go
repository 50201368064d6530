package rustsrc

import (
	"fmt"
	"path"
	"strings"
)

// Enough of Cargo's files: a package's Cargo.toml (its name, version,
// features and dependencies), the workspace's dependency table, and the
// packages Cargo.lock locks.

// Manifest is what Manifest reads of a package's Cargo.toml.
type Manifest struct {
	Dir      string // the package directory, relative to the repository
	Name     string
	Version  string              // "" when inherited from the workspace
	Features map[string][]string // [features]
	Deps     map[string]Dependency
}

// Dependency is an entry of [dependencies], by the name the package uses.
type Dependency struct {
	Package         string // package name (the key unless renamed)
	Path            string // crate directory, relative to the repository
	Workspace       bool   // inherited from [workspace.dependencies]
	DefaultFeatures bool
	Features        []string
}

// Manifest reads dir/Cargo.toml.
func (u *Source) Manifest(dir string) (*Manifest, error) {
	b, err := u.Read(dir + "/Cargo.toml")
	if err != nil {
		return nil, err
	}
	m := &Manifest{Dir: dir, Features: map[string][]string{}, Deps: map[string]Dependency{}}
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
			switch key {
			case "name":
				m.Name = strings.Trim(value, `"`)
			case "version":
				m.Version = strings.Trim(value, `"`)
			}
		case "features":
			m.Features[key] = tomlStrings(value)
		case "dependencies":
			d := Dependency{Package: key, DefaultFeatures: true}
			if k, sub, ok := strings.Cut(key, "."); ok {
				// name.workspace = true
				if sub != "workspace" {
					return nil, fmt.Errorf("%s/Cargo.toml: cannot read dependency %q", dir, entry)
				}
				d.Package, d.Workspace = k, true
				key = k
			} else if strings.HasPrefix(value, "{") {
				for k, v := range tomlTable(value) {
					switch k {
					case "path":
						d.Path = path.Clean(path.Join(dir, strings.Trim(v, `"`)))
					case "package":
						d.Package = strings.Trim(v, `"`)
					case "workspace":
						d.Workspace = v == "true"
					case "default-features", "default_features":
						d.DefaultFeatures = v != "false"
					case "features":
						d.Features = tomlStrings(v)
					}
				}
			}
			m.Deps[key] = d
		}
	}
	return m, nil
}

// WorkspaceDependency reads pkg's entry of [workspace.dependencies] in the
// root Cargo.toml: its crate directory ("" if not a path dependency) and
// whether it is built with default features.
func (u *Source) WorkspaceDependency(pkg string) (string, bool, error) {
	b, err := u.Read("Cargo.toml")
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

// LockedPackage is a [[package]] of Cargo.lock.
type LockedPackage struct {
	Name, Version string
	// Dependencies as Cargo.lock lists them: "name", or "name version"
	// (and " (source)") where that is needed to tell which one.
	Dependencies []string
}

// Locked reads the packages Cargo.lock locks, in its order.
func (u *Source) Locked() ([]LockedPackage, error) {
	b, err := u.Read("Cargo.lock")
	if err != nil {
		return nil, err
	}
	var out []LockedPackage
	var cur *LockedPackage
	for _, entry := range tomlEntries(string(b)) {
		if strings.HasPrefix(entry, "[") {
			cur = nil
			if entry == "[[package]]" {
				out = append(out, LockedPackage{})
				cur = &out[len(out)-1]
			}
			continue
		}
		key, value, _ := strings.Cut(entry, "=")
		if cur == nil {
			continue
		}
		switch strings.TrimSpace(key) {
		case "name":
			cur.Name = strings.Trim(strings.TrimSpace(value), `"`)
		case "version":
			cur.Version = strings.Trim(strings.TrimSpace(value), `"`)
		case "dependencies":
			cur.Dependencies = tomlStrings(value)
		}
	}
	return out, nil
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
