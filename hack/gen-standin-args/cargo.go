package main

import (
	"fmt"
	"strings"

	"github.com/materializeinc/orchestratord/hack/internal/rustsrc"
)

// Enough of Cargo's feature rules to decide #[cfg(feature = "...")] on a
// field: the program's own default features and the features its direct
// dependencies are built with (manifests read by rustsrc). Cargo unifies
// features over the whole dependency graph, so a feature not enabled that
// way might still be enabled by another crate: that case is an error asking
// for a -feature override.

// closure expands feature names within one crate.
func closure(m *rustsrc.Manifest, start []string) map[string]bool {
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
		stack = append(stack, m.Features[f]...)
	}
	return seen
}

// featureEnabled decides #[cfg(feature = feature)] in file for the program
// being generated.
func (g *gen) featureEnabled(file, feature string) (bool, error) {
	crate, err := g.up.CrateDir(file)
	if err != nil {
		return false, err
	}
	if on, ok := g.features[crate+":"+feature]; ok {
		return on, nil
	}
	undecided := fmt.Errorf("cannot decide whether feature %q of %s is enabled when building %s; pass -feature %s:%s=on (or =off)", feature, crate, g.binCrate, crate, feature)
	bin, err := g.up.Manifest(g.binCrate)
	if err != nil {
		return false, err
	}
	binFeatures := closure(bin, []string{"default"})
	if crate == g.binCrate {
		return binFeatures[feature], nil
	}
	cm, err := g.up.Manifest(crate)
	if err != nil {
		return false, err
	}
	g.used(crate+"/Cargo.toml", "features")
	g.used(g.binCrate+"/Cargo.toml", "features")
	for key, d := range bin.Deps {
		if d.Workspace {
			if d.Path, d.DefaultFeatures, err = g.up.WorkspaceDependency(d.Package); err != nil {
				return false, err
			}
		}
		if d.Path != crate {
			continue
		}
		on := closure(cm, d.Features)[feature]
		if d.DefaultFeatures && closure(cm, []string{"default"})[feature] {
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
