package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
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

var lockPackage = regexp.MustCompile(`(?s)\[\[package\]\]\s*\nname = "([^"]+)"\s*\nversion = "([^"]+)"(.*?)(?:\n\n|\z)`)

// checkCrates reads the versions of the modelled crates that
// mz-cloud-resources builds with from Cargo.lock.
func checkCrates(up *upstream) (map[string]string, error) {
	b, err := up.read("Cargo.lock")
	if err != nil {
		return nil, err
	}
	all := map[string][]string{}
	var cloudDeps string
	for _, m := range lockPackage.FindAllStringSubmatch(string(b), -1) {
		all[m[1]] = append(all[m[1]], m[2])
		if m[1] == "mz-cloud-resources" {
			cloudDeps = m[3]
		}
	}
	if cloudDeps == "" {
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
				re := regexp.MustCompile(`"schemars ([0-9][^"]*)"`)
				if m := re.FindStringSubmatch(cloudDeps); m != nil {
					want = m[1]
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
