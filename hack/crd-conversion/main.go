// Command crd-conversion adds the conversion webhook stanza to a generated CRD
// manifest, which controller-gen cannot express. The Service it names is the
// chart's default; the chart and the tests point it at the real webhook.
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
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
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	spec, ok := crd["spec"].(map[string]any)
	if !ok {
		return fmt.Errorf("%s: no spec", path)
	}
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
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}
