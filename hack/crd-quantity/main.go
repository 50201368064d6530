// Command crd-quantity gives every quantity in generated CRD manifests
// crds.QuantityPattern, in place of the pattern controller-gen writes for a
// resource.Quantity, and crds.QuantityMaxLength, and every map of them
// crds.QuantityMaxResources: controller-gen's pattern
// admits strings Kubernetes cannot parse ("1e1.5") or takes for ever to
// ("1e-100000000"), which the API server would store and a Go client
// reading the object would fail or hang on. The stricter schema refuses
// them when the object is written, naming the field. (A CEL isQuantity
// rule would refuse the first kind only, and its estimated cost on maps
// and lists of quantities exceeds the budget of the oldest API servers the
// chart supports.)
package main

import (
	"fmt"
	"os"

	"github.com/materializeinc/orchestratord/hack/internal/crdfile"
	"github.com/materializeinc/orchestratord/pkg/crds"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crd-quantity CRD_FILE...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := tightenQuantities(path); err != nil {
			fmt.Fprintln(os.Stderr, "crd-quantity:", err)
			os.Exit(1)
		}
	}
}

func tightenQuantities(path string) error {
	return crdfile.Edit(path, func(crd map[string]any) error {
		if tightenPatterns(crd) == 0 {
			// controller-gen wrote another pattern, or the CRD lost its
			// quantities: either way this command no longer does its job.
			return fmt.Errorf("no quantity with controller-gen's pattern %s", crds.GeneratedQuantityPattern)
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
