// Package hostile holds the inputs a tenant or a network client can send the
// webhook that cost it the most, shared by its tests and benchmarks.
package hostile

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/materializeinc/orchestratord/pkg/conversion"
	"github.com/materializeinc/orchestratord/pkg/jsonvalue"
	"github.com/materializeinc/orchestratord/test/fixture"
)

// Reviews are ConversionReviews of about size bytes, by name: realistic
// objects, the smallest objects the API server stores, and the shapes a
// tenant can write whose decoded form costs the most per byte (an array
// of empty strings, a map of one-letter labels), as a LIST of many
// tenants' objects would bring them.
func Reviews(size int) map[string]string {
	reviewTo := func(desired string, object func(i int) string) string {
		var b bytes.Buffer
		b.WriteString(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"` + desired + `","objects":[`)
		for i := 0; b.Len() < size; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(object(i))
		}
		b.WriteString("]}}")
		return b.String()
	}
	review := func(object func(i int) string) string { return reviewTo("materialize.cloud/v1", object) }
	small := func(i int, spec string) string {
		return fmt.Sprintf(`{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize","metadata":{"name":"m%d","namespace":"n","uid":"0b0b0b0b-1111-4222-8333-%012d","resourceVersion":"%d","generation":1},"spec":{"environmentdImageRef":"e:v26.1.0","backendSecretName":"b"%s}}`, i, i, i, spec)
	}
	// Objects of about 64 KiB, as a tenant may write many.
	const elements = 64 << 10 / 3
	emptyStrings := `,"environmentdExtraArgs":[""` + strings.Repeat(`,""`, elements) + `]`
	var labels strings.Builder
	for i := range 64 << 10 / 12 {
		if i > 0 {
			labels.WriteByte(',')
		}
		fmt.Fprintf(&labels, `"%x":""`, i)
	}
	envEntries := `,"environmentdExtraEnv":[{"name":"a"}` + strings.Repeat(`,{"name":"a"}`, 64<<10/13) + `]`
	// Each '<' is written back as \u003c: six bytes for one.
	escaped := `,"environmentdExtraArgs":["` + strings.Repeat("<", 64<<10) + `"]`
	// A role v1 moves into the ServiceAccount's annotations, which the way
	// back carries twice (its value, and the map derived from it), escaped
	// once more inside the annotation: a carry of about 14 KiB per object.
	carriedRole := `,"environmentdIamRoleArn":"` + strings.Repeat("<", 1000) + `"`
	return map[string]string{
		"realistic": review(func(i int) string { return string(fixture.V1alpha1Materialize(i)) }),
		"realistic-to-v1alpha1": reviewTo("materialize.cloud/v1alpha1", func(i int) string {
			obj, err := jsonvalue.Decode(fixture.V1alpha1Materialize(i))
			if err != nil {
				panic(err)
			}
			v1, err := conversion.Convert(obj.(map[string]any), conversion.V1)
			if err != nil {
				panic(err)
			}
			out, err := jsonvalue.Append(nil, v1)
			if err != nil {
				panic(err)
			}
			return string(out)
		}),
		"one-member-maps": review(func(i int) string { return small(i, envEntries) }),
		"small-objects":   review(func(i int) string { return small(i, "") }),
		"html-escaped":    review(func(i int) string { return small(i, escaped) }),
		"carried-role":    review(func(i int) string { return small(i, carriedRole) }),
		"empty-strings":   review(func(i int) string { return small(i, emptyStrings) }),
		"labels": review(func(i int) string {
			return strings.Replace(small(i, ""), `"generation":1`, `"generation":1,"labels":{`+labels.String()+`}`, 1)
		}),
	}
}
