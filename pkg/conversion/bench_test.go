package conversion

import (
	"testing"

	"github.com/materializeinc/orchestratord/test/fixture"
)

// go test -bench . -benchmem ./pkg/conversion
func BenchmarkConvert(b *testing.B) {
	alpha, err := decodeValue(fixture.V1alpha1Materialize(0))
	if err != nil {
		b.Fatal(err)
	}
	v1obj, err := Convert(alpha.(map[string]any), V1)
	if err != nil {
		b.Fatal(err)
	}
	for name, tc := range map[string]struct {
		obj map[string]any
		to  string
	}{"v1alpha1-to-v1": {alpha.(map[string]any), V1}, "v1-to-v1alpha1": {v1obj, V1Alpha1}} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Convert(tc.obj, tc.to); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
