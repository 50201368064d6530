package conversion

import (
	"strings"
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

// The worst carry annotation a tenant can write: as large as is read
// (16 KiB) and refused only once parsed. docs/benchmarks.md has the figures.
func BenchmarkConvertTamperedCarry(b *testing.B) {
	alpha, err := decodeValue(fixture.V1alpha1Materialize(0))
	if err != nil {
		b.Fatal(err)
	}
	v1obj, err := Convert(alpha.(map[string]any), V1)
	if err != nil {
		b.Fatal(err)
	}
	entry := `{"path":["spec","requestRollout"],"value":"6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00"},`
	carry := "[" + strings.Repeat(entry, (maxCarryBytes-2)/len(entry))
	carry = carry[:len(carry)-1] + "]"
	set(v1obj, []string{"metadata", "annotations", v1alpha1CarryAnnotation}, carry)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Convert(v1obj, V1Alpha1); err != nil {
			b.Fatal(err)
		}
	}
}
