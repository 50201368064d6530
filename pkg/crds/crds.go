// Package crds embeds the generated CustomResourceDefinitions of the
// materialize.cloud API so that programs and tests install exactly what
// `make generate` produced.
package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml
var manifests embed.FS

// MaterializeCRDName is the name of the CRD that carries the conversion webhook.
const MaterializeCRDName = "materializes.materialize.cloud"

// All returns every CRD, sorted by name.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(manifests, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(files))
	for _, name := range files {
		raw, err := manifests.ReadFile(name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// QuantityPattern and QuantityMaxLength are what hack/crd-bounds gives
// every quantity of the CRDs, and QuantityMaxResources every map of them
// (a container's requests or limits). controller-gen's pattern for a
// resource.Quantity (GeneratedQuantityPattern) admits exponents
// resource.ParseQuantity refuses, a decimal one ("1e1.5") or one past
// int64, and strings it takes seconds to forever to read (a million
// digits, the exponent -100000000): the API server would store them, and
// any Go client reading the object would fail or hang. An exponent of at
// most two digits, in a quantity of at most 64 characters, always parses
// and prints in microseconds (one of four digits takes 30 ms to print, on
// every encoding), and a map of at most 32 of them in well under a
// millisecond.
const (
	QuantityPattern      = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]{1,2}))?$`
	QuantityMaxLength    = 64
	QuantityMaxResources = 32
)

// GeneratedQuantityPattern is the pattern controller-gen writes for a
// resource.Quantity (k8s.io/apimachinery's OpenAPI definition).
const GeneratedQuantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

// MaxItems and MaxProperties are what hack/crd-bounds gives every list and
// map of the three kinds' specs that has no bound of its own: the
// conversion webhook budgets its memory by the nodes an object holds, and
// an object of a hundred thousand small items would take a budget every
// tenant shares.
const (
	MaxItems      = 256
	MaxProperties = 128
)
