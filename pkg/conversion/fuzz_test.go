package conversion

import (
	"encoding/json"
	"maps"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

func roundTrip(t *testing.T, obj map[string]any, via, back string) {
	t.Helper()
	mid, err := Convert(obj, via)
	if err != nil {
		t.Fatalf("to %s: %v\n%s", via, err, mustJSON(obj))
	}
	if mid["apiVersion"] != via {
		t.Fatalf("converted object says apiVersion %v, want %s", mid["apiVersion"], via)
	}
	got, err := Convert(mid, back)
	if err != nil {
		t.Fatalf("back to %s: %v\n%s", back, err, mustJSON(mid))
	}
	want := normalize(obj)
	if back == V1 {
		// status.requestedRolloutHash is always derived (alwaysDerived):
		// what comes back, when anything does, is the rollout hash of the
		// spec that comes back, not what the input held.
		want = withDerivedRequestedHash(want, got)
		if h, ok := lookup(got, []string{"status", "requestedRolloutHash"}); ok {
			spec, _ := got["spec"].(map[string]any)
			annotations := map[string]string{}
			if force, ok := lookup(got, []string{"metadata", "annotations", ForceRolloutAnnotation}); ok {
				annotations[ForceRolloutAnnotation], _ = force.(string)
			}
			if derived, err := RolloutHash(spec, annotations); err != nil || h != derived {
				t.Fatalf("requestedRolloutHash %v after a round trip, want the spec's rollout hash %s (%v):\n%s", h, derived, err, mustJSON(got))
			}
		}
	}
	if !reflect.DeepEqual(want, normalize(got)) {
		t.Fatalf("round trip through %s is not the identity:\nin:  %s\nmid: %s\nout: %s", via, mustJSON(obj), mustJSON(mid), mustJSON(got))
	}
}

// withDerivedRequestedHash is want with status.requestedRolloutHash as
// derived holds it.
func withDerivedRequestedHash(want any, derived map[string]any) any {
	w, ok := want.(map[string]any)
	if !ok {
		return want
	}
	status, ok := w["status"].(map[string]any)
	if !ok {
		return want
	}
	status = maps.Clone(status)
	delete(status, "requestedRolloutHash")
	if h, ok := lookup(derived, []string{"status", "requestedRolloutHash"}); ok {
		status["requestedRolloutHash"] = h
	}
	w = maps.Clone(w)
	w["status"] = status
	return w
}

// normalize compares objects the way their JSON reads.
func normalize(obj map[string]any) any {
	v, err := decodeValue([]byte(mustJSON(obj)))
	if err != nil {
		panic(err)
	}
	return v
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var fuzzSeeds = [][]byte{
	{},
	[]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"),
	[]byte("\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4\xf3\xf2\xf1\xf0mz:v1"),
	[]byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
	[]byte("\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"),
}

// FuzzV1alpha1RoundTrip: v1alpha1 -> v1 -> v1alpha1 is the identity.
func FuzzV1alpha1RoundTrip(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &objectGenerator{data: data}
		roundTrip(t, g.v1alpha1(), V1, V1Alpha1)
	})
}

// FuzzV1RoundTrip: v1 -> v1alpha1 -> v1 is the identity.
func FuzzV1RoundTrip(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &objectGenerator{data: data}
		roundTrip(t, g.v1(), V1Alpha1, V1)
	})
}

// FuzzConvertAnyInput: arbitrary JSON and objects with hand-made conversion
// annotations either convert or fail with an error; nothing panics and a
// converted object always has the requested apiVersion.
func FuzzConvertAnyInput(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize","spec":{"environmentdImageRef":"x","backendSecretName":"y"}}`), false)
	f.Add([]byte(`{"apiVersion":"materialize.cloud/v1","kind":"Materialize","metadata":{"annotations":{"conversion.materialize.cloud/v1alpha1":"[{\"path\":[\"spec\",\"x\",\"y\"],\"value\":1}]"}}}`), true)
	f.Add([]byte(`{"apiVersion":"materialize.cloud/v1","kind":"Materialize","spec":[]}`), false)
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07"), true)
	for _, src := range inPlaceShapes {
		f.Add([]byte(src), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, structured bool) {
		var obj map[string]any
		if structured {
			g := &objectGenerator{data: data, foreignCarry: true}
			if len(data) > 0 && data[0]%2 == 0 {
				obj = g.v1()
			} else {
				obj = g.v1alpha1()
			}
		} else {
			v, err := decodeValue(data)
			if err != nil {
				return
			}
			m, ok := v.(map[string]any)
			if !ok {
				return
			}
			obj = m
		}
		for _, to := range []string{V1, V1Alpha1} {
			out, err := Convert(obj, to)
			if err == nil && out["apiVersion"] != to {
				t.Fatalf("converted to %s but apiVersion is %v", to, out["apiVersion"])
			}
			// In place, an owned copy converts to the same bytes.
			owned, ownedErr := ConvertOwned(runtime.DeepCopyJSON(obj), to, nil)
			a, _ := json.Marshal(out)
			b, _ := json.Marshal(owned)
			if (err != nil) != (ownedErr != nil) || string(a) != string(b) {
				t.Fatalf("to %s: Convert gave %s (%v), ConvertOwned %s (%v)", to, a, err, b, ownedErr)
			}
		}
	})
}
