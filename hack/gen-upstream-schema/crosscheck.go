package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/materializeinc/orchestratord/hack/internal/rustsrc"
)

// Upstream keeps some output of the derive in its tree: the VpcEndpoint
// CRD as kube-derive writes it (src/cloud-resources/src/crd/generated/,
// which upstream's own test keeps equal to the derive), and its docs'
// tables of the Materialize types (doc/user/data/self_managed/, written by
// src/cloud-resources/src/bin/crd_writer.rs from schemars). crossCheck
// compares the derived facts with them: the first must match exactly, the
// second (documentation, which could lag) only warns.

// jsonValidations are the schema keywords compared as validations.
var jsonValidations = []string{
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
	"minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems",
	"minProperties", "maxProperties", "x-kubernetes-validations", "x-kubernetes-list-type",
	"x-kubernetes-list-map-keys", "x-kubernetes-map-type", "x-kubernetes-preserve-unknown-fields",
	"x-kubernetes-embedded-resource",
}

func canonical(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// jsonFacts flattens a JSON openAPIV3Schema as flatten does a derived one,
// not descending below the paths in stop.
func jsonFacts(schema map[string]any, stop map[string]bool) map[string]fact {
	out := map[string]fact{}
	var walk func(p string, s map[string]any, required bool)
	walk = func(p string, s map[string]any, required bool) {
		f := fact{path: p, required: required}
		f.typ, _ = s["type"].(string)
		f.format, _ = s["format"].(string)
		f.intOrString, _ = s["x-kubernetes-int-or-string"].(bool)
		f.nullable, _ = s["nullable"].(bool)
		if d, ok := s["default"]; ok {
			f.def = canonical(d)
		}
		if e, ok := s["enum"].([]any); ok {
			for _, v := range e {
				f.enum = append(f.enum, canonical(v))
			}
		}
		for _, k := range jsonValidations {
			if v, ok := s[k]; ok {
				f.validations = append(f.validations, k+"="+canonical(v))
			}
		}
		if ap, ok := s["additionalProperties"].(bool); ok && !ap {
			f.validations = append(f.validations, "additionalProperties=false")
		}
		out[p] = f
		if stop[p] {
			return
		}
		base := p
		if base == "." {
			base = ""
		}
		req := map[string]bool{}
		if r, ok := s["required"].([]any); ok {
			for _, x := range r {
				if name, ok := x.(string); ok {
					req[name] = true
				}
			}
		}
		if props, ok := s["properties"].(map[string]any); ok {
			for name, v := range props {
				if m, ok := v.(map[string]any); ok {
					walk(base+"."+name, m, req[name])
				}
			}
		}
		if items, ok := s["items"].(map[string]any); ok {
			walk(base+"[]", items, false)
		}
		if values, ok := s["additionalProperties"].(map[string]any); ok {
			walk(base+"{}", values, false)
		}
	}
	walk(".", schema, false)
	return out
}

func describe(f fact) string {
	return fmt.Sprintf("type=%q format=%q int-or-string=%v required=%v nullable=%v default=%s enum=%v validations=%v",
		f.typ, f.format, f.intOrString, f.required, f.nullable, f.def, f.enum, f.validations)
}

func crossCheck(up *rustsrc.Source, crds []*crd) ([]string, error) {
	byName := map[string]*crd{}
	for _, c := range crds {
		byName[c.name+"/"+c.version] = c
	}
	files, err := up.FilesUnder("src/cloud-resources", ".json")
	if err != nil {
		return nil, err
	}
	var checked []string
	for _, p := range files {
		b, err := up.Read(p)
		if err != nil {
			return nil, err
		}
		var doc struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Versions []struct {
					Name   string `json:"name"`
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if json.Unmarshal(b, &doc) != nil || doc.Kind != "CustomResourceDefinition" {
			continue
		}
		for _, v := range doc.Spec.Versions {
			c := byName[doc.Metadata.Name+"/"+v.Name]
			if c == nil {
				return nil, fmt.Errorf("%s: %s %s is not derived from any #[derive(CustomResource)]", p, doc.Metadata.Name, v.Name)
			}
			derived := flatten(c.root)
			stop := map[string]bool{}
			want := map[string]fact{}
			for _, f := range derived {
				want[f.path] = f
				if f.k8s != "" {
					stop[f.path] = true
				}
			}
			got := jsonFacts(v.Schema.OpenAPIV3Schema, stop)
			var errs []string
			for _, f := range derived {
				j, ok := got[f.path]
				if !ok {
					errs = append(errs, fmt.Sprintf("%s: derived, not in the JSON", f.path))
					continue
				}
				if f.k8s != "" {
					j.format, f.format = "", "" // the Kubernetes type's own
					j.validations, f.validations = nil, nil
				}
				j.k8s, j.rust = f.k8s, f.rust
				if describe(f) != describe(j) {
					errs = append(errs, fmt.Sprintf("%s:\n\tderived %s\n\tJSON    %s", f.path, describe(f), describe(j)))
				}
			}
			for q := range got {
				if _, ok := want[q]; !ok {
					errs = append(errs, fmt.Sprintf("%s: in the JSON, not derived", q))
				}
			}
			if len(errs) > 0 {
				sort.Strings(errs)
				return nil, fmt.Errorf("the schema derived for %s %s differs from upstream's %s:\n%s", c.name, c.version, p, strings.Join(errs, "\n"))
			}
			fmt.Fprintf(os.Stderr, "gen-upstream-schema: %s %s matches upstream's %s\n", c.name, c.version, p)
			checked = append(checked, p)
		}
	}
	docs, err := up.FilesUnder("doc/user/data/self_managed", ".json")
	if err != nil {
		return nil, err
	}
	for _, p := range docs {
		base := path.Base(p)
		if !strings.HasPrefix(base, "materialize_crd_descriptions_") {
			continue
		}
		version := strings.TrimSuffix(strings.TrimPrefix(base, "materialize_crd_descriptions_"), ".json")
		c := byName["materializes.materialize.cloud/"+version]
		if c == nil {
			fmt.Fprintf(os.Stderr, "gen-upstream-schema: warning: %s: no Materialize %s derived\n", p, version)
			continue
		}
		n, bad, err := crossCheckDocs(up, p, c)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "gen-upstream-schema: %s %s: %d field tables compared with %s, %d differences\n", c.name, c.version, n, p, bad)
		if n > 0 && bad == 0 {
			checked = append(checked, p)
		}
	}
	if len(checked) == 0 {
		fmt.Fprintln(os.Stderr, "gen-upstream-schema: warning: upstream has no generated CRD or docs table to check the derived schemas against")
	}
	return checked, nil
}

// crossCheckDocs compares the field tables of upstream's docs (type name,
// then per field its name, default and whether it is required) with the
// derived structs of the same name. It returns the number of tables
// compared and of differences, which are warnings.
func crossCheckDocs(up *rustsrc.Source, p string, c *crd) (compared, bad int, err error) {
	b, err := up.Read(p)
	if err != nil {
		return 0, 0, err
	}
	var tables [][2]json.RawMessage
	if err := json.Unmarshal(b, &tables); err != nil {
		return 0, 0, fmt.Errorf("%s: %v", p, err)
	}
	structs := map[string]*node{}
	var walk func(n *node)
	walk = func(n *node) {
		if n.item != nil && n.item.Kind == "struct" {
			structs[n.item.Name] = n
		}
		for _, q := range n.props {
			walk(q.n)
		}
		if n.items != nil {
			walk(n.items)
		}
		if n.values != nil {
			walk(n.values)
		}
	}
	walk(c.root)
	for _, t := range tables {
		var name string
		var fields []struct {
			Name     string          `json:"name"`
			Default  json.RawMessage `json:"default"`
			Required bool            `json:"required"`
		}
		if json.Unmarshal(t[0], &name) != nil || json.Unmarshal(t[1], &fields) != nil {
			return 0, 0, fmt.Errorf("%s: unexpected table format", p)
		}
		n := structs[name]
		if n == nil {
			continue
		}
		compared++
		props := map[string]*prop{}
		for _, q := range n.props {
			props[q.name] = q
		}
		warn := func(format string, a ...any) {
			bad++
			fmt.Fprintf(os.Stderr, "gen-upstream-schema: warning: %s: %s: %s\n", p, name, fmt.Sprintf(format, a...))
		}
		for _, f := range fields {
			q := props[f.Name]
			if q == nil {
				warn("field %s is not derived", f.Name)
				continue
			}
			delete(props, f.Name)
			def := ""
			var v any
			if json.Unmarshal(f.Default, &v) == nil && v != nil {
				def = canonical(v)
			}
			if q.required != f.Required || q.def != def {
				warn("field %s: derived required=%v default=%s; docs required=%v default=%s", f.Name, q.required, q.def, f.Required, def)
			}
		}
		for name := range props {
			warn("derived field %s is not in the docs", name)
		}
	}
	return compared, bad, nil
}
