package materialize

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite testdata/*.yaml from the current rendering")

// The generation objects for one spec, at the last image of each listeners
// schema, pinned in testdata and compared with upstream's generation.rs in
// docs/environmentd.md. A change to what environmentd is given shows up as
// a diff here first.
func TestGoldenGenerations(t *testing.T) {
	for _, c := range []struct{ file, image string }{
		{"generation-v26.5.0.yaml", "materialize/environmentd:v26.5.0"},
		{"generation-v26.35.0.yaml", "materialize/environmentd:v26.35.0"},
	} {
		t.Run(c.file, func(t *testing.T) {
			mz := testMaterialize(c.image, v1alpha1.AuthenticatorPassword)
			g := testEnv(mz).generation(2)
			var out []byte
			for _, obj := range []any{g.statefulSet, g.listeners, g.service, g.persistPubSub} {
				raw, err := yaml.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				out = append(append(out, "---\n"...), raw...)
			}
			path := filepath.Join("testdata", c.file)
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if string(want) != string(out) {
				t.Errorf("%s differs from the rendering; review the change and rerun with -update:\n%s", path, out)
			}
		})
	}
}
