// Package crdfile edits a generated CRD manifest in place, for the
// commands that add what controller-gen cannot express.
package crdfile

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// Edit reads the CRD manifest at path as generic YAML, lets edit change it,
// and writes it back as a YAML document.
func Edit(path string, edit func(crd map[string]any) error) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := edit(crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}
