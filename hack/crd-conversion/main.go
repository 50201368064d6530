// Command crd-conversion adds the conversion webhook stanza to a generated CRD
// manifest, which controller-gen cannot express. The Service it names is the
// chart's default; the chart and the tests point it at the real webhook.
//
// It also drops the schema default of EnvVar's fileKeyRef.optional, which
// k8s.io/api declares and upstream's CRD does not have: the API server
// applies defaults to stored objects as it reads them, so the default would
// change the specs (and rollout hashes) of Materializes upstream wrote.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/materializeinc/orchestratord/hack/internal/crdfile"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crd-conversion CRD_FILE")
		os.Exit(2)
	}
	if err := addConversion(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crd-conversion:", err)
		os.Exit(1)
	}
}

func addConversion(path string) error {
	return crdfile.Edit(path, func(crd map[string]any) error {
		spec, ok := crd["spec"].(map[string]any)
		if !ok {
			return errors.New("no spec")
		}
		dropFileKeyRefOptionalDefault(spec)
		spec["conversion"] = map[string]any{
			"strategy": "Webhook",
			"webhook": map[string]any{
				"conversionReviewVersions": []string{"v1"},
				"clientConfig": map[string]any{
					"service": map[string]any{
						"namespace": "orchestratord",
						"name":      "orchestratord-webhook",
						"path":      "/convert",
						"port":      443,
					},
				},
			},
		}
		return nil
	})
}

// dropFileKeyRefOptionalDefault removes "default" from every
// fileKeyRef.properties.optional schema under node.
func dropFileKeyRefOptionalDefault(node any) {
	switch n := node.(type) {
	case map[string]any:
		if props, ok := n["properties"].(map[string]any); ok {
			if ref, ok := props["fileKeyRef"].(map[string]any); ok {
				if refProps, ok := ref["properties"].(map[string]any); ok {
					if optional, ok := refProps["optional"].(map[string]any); ok {
						delete(optional, "default")
					}
				}
			}
		}
		for _, v := range n {
			dropFileKeyRefOptionalDefault(v)
		}
	case []any:
		for _, v := range n {
			dropFileKeyRefOptionalDefault(v)
		}
	}
}
