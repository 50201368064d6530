package conversion

import (
	"encoding/json"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// referenceConvert is the conversion as first written: deep copies of the
// whole object and a diff of the whole original against the whole way
// back. Convert must give the same bytes; it does less work by copying
// and comparing only the fields a conversion can change.
func referenceConvert(obj map[string]any, apiVersion string) (map[string]any, error) {
	kind, _ := obj["kind"].(string)
	if kind != Kind {
		return nil, fmt.Errorf("kind %q cannot be converted", kind)
	}
	from, _ := obj["apiVersion"].(string)
	if err := checkVersion(from); err != nil {
		return nil, err
	}
	if err := checkVersion(apiVersion); err != nil {
		return nil, err
	}
	if err := checkShape(obj); err != nil {
		return nil, err
	}
	out := runtime.DeepCopyJSON(obj)
	switch {
	case from == apiVersion:
		return out, nil
	case apiVersion == V1:
		v1Carry := takeCarry(out, v1CarryAnnotation)
		original := runtime.DeepCopyJSON(out)
		converted := plainToV1(out, &rolloutHash{})
		if len(v1Carry) > 0 {
			if err := restore(converted, v1Carry); err != nil {
				return nil, err
			}
		}
		back := plainToV1alpha1(runtime.DeepCopyJSON(converted), &rolloutHash{})
		putCarry(converted, v1alpha1CarryAnnotation, referenceDiff(original, back))
		return converted, nil
	default:
		alphaCarry := takeCarry(out, v1alpha1CarryAnnotation)
		original := runtime.DeepCopyJSON(out)
		converted := plainToV1alpha1(out, &rolloutHash{})
		if err := restore(converted, alphaCarry); err != nil {
			return nil, err
		}
		back := plainToV1(runtime.DeepCopyJSON(converted), &rolloutHash{})
		putCarry(converted, v1CarryAnnotation, referenceDiff(original, back))
		return converted, nil
	}
}

func referenceDiff(want, got map[string]any) []carried {
	var out []carried
	diffInto(&out, nil, want, got)
	sortCarried(out)
	return out
}

// Convert and the reference agree, byte for byte, on generated objects of
// both versions, whole and partial, with hand-made carry annotations too;
// and Convert leaves its input as it was.
func TestConvertMatchesTheReference(t *testing.T) {
	objects := 0
	for seed := range 10_500 {
		data := make([]byte, 256)
		state := uint64(seed)*0x9E3779B97F4A7C15 + 1
		for i := range data {
			state ^= state << 13
			state ^= state >> 7
			state ^= state << 17
			data[i] = byte(state)
		}
		for _, foreign := range []bool{false, true} {
			g := &objectGenerator{data: data, foreignCarry: foreign}
			var obj map[string]any
			if seed%2 == 0 {
				obj = g.v1()
			} else {
				obj = g.v1alpha1()
			}
			before, _ := json.Marshal(obj)
			for _, to := range []string{V1, V1Alpha1} {
				want, wantErr := referenceConvert(runtime.DeepCopyJSON(obj), to)
				got, gotErr := Convert(obj, to)
				if (wantErr != nil) != (gotErr != nil) {
					t.Fatalf("%s to %s: error %v, reference %v", before, to, gotErr, wantErr)
				}
				w, _ := json.Marshal(want)
				g, _ := json.Marshal(got)
				if string(w) != string(g) {
					t.Fatalf("%s to %s:\n got %s\nwant %s", before, to, g, w)
				}
				if after, _ := json.Marshal(obj); string(after) != string(before) {
					t.Fatalf("Convert modified its input:\nbefore %s\n after %s", before, after)
				}
			}
			objects++
		}
	}
	if objects < 20_000 {
		t.Fatalf("only %d objects compared", objects)
	}
}
