package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/materializeinc/orchestratord/hack/internal/rustsrc"
)

// modelledCrates are the crate versions whose schema rules schema.go
// restates (schemars' json_schema_impls and schemars_derive, kube-derive's
// CustomResource and kube-core's schema transforms, k8s-openapi's
// JsonSchema impls). Another version in upstream's Cargo.lock fails the
// run: review the rules against its source, then add it here.
var modelledCrates = map[string][]string{
	"schemars":        {"1.2.1"},
	"schemars_derive": {"1.2.1"},
	"kube-derive":     {"3.1.0"},
	"kube-core":       {"3.1.0"},
	"k8s-openapi":     {"0.27.0", "0.27.1"},
}

// checkCrates reads the versions of the modelled crates that
// mz-cloud-resources builds with from Cargo.lock.
func checkCrates(up *rustsrc.Source) (map[string]string, error) {
	locked, err := up.Locked()
	if err != nil {
		return nil, err
	}
	all := map[string][]string{}
	var cloud *rustsrc.LockedPackage
	for i, p := range locked {
		all[p.Name] = append(all[p.Name], p.Version)
		if p.Name == "mz-cloud-resources" {
			cloud = &locked[i]
		}
	}
	if cloud == nil {
		return nil, fmt.Errorf("Cargo.lock has no package mz-cloud-resources")
	}
	out := map[string]string{}
	for name, ok := range modelledCrates {
		vs := all[name]
		if len(vs) > 1 {
			// Several versions: the one mz-cloud-resources (or, for the
			// derive crates, its schemars / kube) depends on.
			want := ""
			if name == "schemars" {
				for _, d := range cloud.Dependencies {
					if v, ok := strings.CutPrefix(d, "schemars "); ok && v != "" && v[0] >= '0' && v[0] <= '9' {
						want = v
						break
					}
				}
			}
			if want == "" {
				return nil, fmt.Errorf("Cargo.lock has %s %s: cannot tell which one the CRDs use", name, strings.Join(vs, ", "))
			}
			vs = []string{want}
		}
		if len(vs) == 0 {
			return nil, fmt.Errorf("Cargo.lock has no %s", name)
		}
		found := false
		for _, v := range ok {
			found = found || v == vs[0]
		}
		if !found {
			return nil, fmt.Errorf("upstream locks %s %s; the rules in schema.go are those of %s %s: review them against its source, then add it to modelledCrates",
				name, vs[0], name, strings.Join(ok, ", "))
		}
		out[name] = vs[0]
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
