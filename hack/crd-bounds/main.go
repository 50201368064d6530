// Command crd-bounds bounds what one custom resource can cost whoever
// reads it, in generated CRD manifests, where controller-gen's schema does
// not:
//
//   - every quantity gets crds.QuantityPattern, in place of the pattern
//     controller-gen writes for a resource.Quantity, and
//     crds.QuantityMaxLength, and every map of them
//     crds.QuantityMaxResources: controller-gen's pattern admits strings
//     Kubernetes cannot parse ("1e1.5") or takes for ever to
//     ("1e-100000000"), which the API server would store and a Go client
//     reading the object would fail or hang on. (A CEL isQuantity rule
//     would refuse the first kind only, and its estimated cost on maps and
//     lists of quantities exceeds the budget of the oldest API servers the
//     chart supports.)
//   - every other list of the spec gets crds.MaxItems and every map
//     crds.MaxProperties: the conversion webhook, which every client's
//     read of a Materialize goes through, budgets its memory by the nodes
//     an object holds, and one object of a hundred thousand small list
//     items would take a budget shared by every tenant.
//
// The schema then refuses such an object when it is written, naming the
// field.
package main

import (
	"fmt"
	"os"

	"github.com/materializeinc/orchestratord/hack/internal/crdfile"
	"github.com/materializeinc/orchestratord/pkg/crds"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crd-bounds CRD_FILE...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := bound(path); err != nil {
			fmt.Fprintln(os.Stderr, "crd-bounds:", err)
			os.Exit(1)
		}
	}
}

func bound(path string) error {
	return crdfile.Edit(path, func(crd map[string]any) error {
		if tightenPatterns(crd) == 0 {
			// controller-gen wrote another pattern, or the CRD lost its
			// quantities: either way this command no longer does its job.
			return fmt.Errorf("no quantity with controller-gen's pattern %s", crds.GeneratedQuantityPattern)
		}
		spec, _ := crd["spec"].(map[string]any)
		versions, _ := spec["versions"].([]any)
		for _, v := range versions {
			version, _ := v.(map[string]any)
			schema, _ := version["schema"].(map[string]any)
			root, _ := schema["openAPIV3Schema"].(map[string]any)
			properties, _ := root["properties"].(map[string]any)
			if objSpec, ok := properties["spec"].(map[string]any); ok {
				boundCollections(objSpec)
			}
		}
		return nil
	})
}

// isQuantity tells controller-gen's schema of a resource.Quantity.
func isQuantity(schema map[string]any) bool {
	intOrString, _ := schema["x-kubernetes-int-or-string"].(bool)
	return intOrString && schema["pattern"] == crds.GeneratedQuantityPattern
}

// tightenPatterns tightens the quantities under node, and bounds the maps
// of them, and returns how many quantities it tightened.
func tightenPatterns(node any) int {
	n := 0
	switch v := node.(type) {
	case map[string]any:
		if values, ok := v["additionalProperties"].(map[string]any); ok && isQuantity(values) {
			v["maxProperties"] = crds.QuantityMaxResources
		}
		if isQuantity(v) {
			v["pattern"] = crds.QuantityPattern
			v["maxLength"] = crds.QuantityMaxLength
			n++
		}
		for _, child := range v {
			n += tightenPatterns(child)
		}
	case []any:
		for _, child := range v {
			n += tightenPatterns(child)
		}
	}
	return n
}

// boundCollections gives every list and map schema under schema that has
// no bound of its own the default one.
func boundCollections(schema map[string]any) {
	if schema["type"] == "array" {
		if _, ok := schema["maxItems"]; !ok {
			schema["maxItems"] = crds.MaxItems
		}
	}
	if _, isMap := schema["additionalProperties"].(map[string]any); isMap {
		if _, ok := schema["maxProperties"]; !ok {
			schema["maxProperties"] = crds.MaxProperties
		}
	}
	if properties, ok := schema["properties"].(map[string]any); ok {
		for _, p := range properties {
			if child, ok := p.(map[string]any); ok {
				boundCollections(child)
			}
		}
	}
	for _, key := range []string{"items", "additionalProperties"} {
		if child, ok := schema[key].(map[string]any); ok {
			boundCollections(child)
		}
	}
}
