package conversion

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
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
		converted := plainToV1(out, &memo{})
		if len(v1Carry) > 0 {
			if err := restore(converted, v1Carry); err != nil {
				return nil, err
			}
		}
		back := plainToV1alpha1(runtime.DeepCopyJSON(converted), &memo{})
		putCarry(converted, v1alpha1CarryAnnotation, referenceDiff(original, back), false)
		return converted, nil
	default:
		alphaCarry := takeCarry(out, v1alpha1CarryAnnotation)
		original := runtime.DeepCopyJSON(out)
		converted := plainToV1alpha1(out, &memo{})
		if err := restore(converted, alphaCarry); err != nil {
			return nil, err
		}
		back := plainToV1(runtime.DeepCopyJSON(converted), &memo{})
		putCarry(converted, v1CarryAnnotation, referenceDiff(original, back), false)
		return converted, nil
	}
}

// takeCarry removes the named carry annotation and returns its fields.
func takeCarry(obj map[string]any, key string) []carried {
	fields, _ := readCarry(obj, key)
	dropCarry(obj, key)
	return fields
}

func referenceDiff(want, got map[string]any) []carried {
	var out []carried
	referenceDiffInto(&out, nil, want, got)
	sortCarried(out)
	return out
}

func referenceDiffInto(out *[]carried, path []string, want, got map[string]any) {
	keys := map[string]struct{}{}
	for k := range want {
		keys[k] = struct{}{}
	}
	for k := range got {
		keys[k] = struct{}{}
	}
	for k := range keys {
		p := append(append([]string(nil), path...), k)
		w, wok := want[k]
		g, gok := got[k]
		wm, wIsMap := w.(map[string]any)
		gm, gIsMap := g.(map[string]any)
		// serviceAccountAnnotations is compared whole, its values each as
		// one value (differ.into).
		wholeValue := len(p) == 3 && p[0] == "spec" && p[1] == "serviceAccountAnnotations"
		switch {
		case wok && gok && wIsMap && gIsMap && !wholeValue:
			referenceDiffInto(out, p, wm, gm)
		case wok != gok || !reflect.DeepEqual(w, g):
			*out = append(*out, carried{Path: p, Value: rawOrNil(w, wok), Derived: rawOrNil(g, gok)})
		}
	}
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
			if seed%3 == 0 {
				addCarriedPaths(obj, seed)
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
				owned, ownedErr := ConvertOwned(runtime.DeepCopyJSON(obj), to, nil)
				if o, _ := json.Marshal(owned); (ownedErr != nil) != (wantErr != nil) || string(o) != string(w) {
					t.Fatalf("%s to %s, owned:\n got %s (%v)\nwant %s", before, to, o, ownedErr, w)
				}
			}
			objects++
		}
	}
	if objects < 20_000 {
		t.Fatalf("only %d objects compared", objects)
	}
}

// carriedPathPool are paths a hand-made carry annotation may name: prefixes
// of fields the conversion changes, fields it never touches, and the top.
var carriedPathPool = [][]string{
	{"spec"}, {"spec", "podLabels", "l"}, {"kind"}, {"metadata", "labels"}, {"status"},
	{"spec", "environmentdExtraEnv"}, {"spec", "requestRollout"}, {"x", "y"}, {"spec", "serviceAccountAnnotations"},
}

// addCarriedPaths puts on obj the carry annotation its conversion reads,
// naming paths from the pool; for some the derived value is what the plain
// conversion gives there, so that restore applies them.
func addCarriedPaths(obj map[string]any, seed int) {
	key, plain := v1CarryAnnotation, func(o map[string]any) map[string]any { return plainToV1(o, &memo{}) }
	if obj["apiVersion"] == V1 {
		key, plain = v1alpha1CarryAnnotation, func(o map[string]any) map[string]any { return plainToV1alpha1(o, &memo{}) }
	}
	bare := runtime.DeepCopyJSON(obj)
	takeCarry(bare, key)
	converted := plain(bare)
	values := []json.RawMessage{json.RawMessage(`{"a":"b"}`), json.RawMessage(`"v"`), nil}
	var fields []carried
	for i := range 1 + seed%3 {
		path := carriedPathPool[(seed/3+i*5)%len(carriedPathPool)]
		f := carried{Path: path, Value: values[(seed+i)%len(values)]}
		if (seed/7+i)%2 == 0 {
			cur, ok := lookup(converted, path)
			f.Derived = rawOrNil(cur, ok)
		} else {
			f.Derived = json.RawMessage(`"stale"`)
		}
		fields = append(fields, f)
	}
	raw, _ := json.Marshal(fields)
	set(obj, []string{"metadata", "annotations", key}, string(raw))
}

// The way back runs on the converted object itself (carryWayBack) and is
// undone: what it creates, sets or deletes must leave no trace, even where
// the generated objects rarely go. A v1 object whose carry restores the
// IAM role has no serviceAccountAnnotations for it: the way back creates
// them, or adds the role to those there are.
func TestWayBackLeavesNoTrace(t *testing.T) {
	carry := `[{"path":["spec","environmentdIamRoleArn"],"value":"arn:aws:iam::1:role/r"},` +
		`{"path":["status","resourcesHash"],"value":"h","derived":""}]`
	for name, sa := range map[string]string{
		"none": ``, "null": `,"serviceAccountAnnotations":null`,
		"others": `,"serviceAccountAnnotations":{"a":"b"}`,
	} {
		obj := mustDecode(t, `{"apiVersion":"materialize.cloud/v1","kind":"Materialize",
			"metadata":{"name":"m","annotations":{"conversion.materialize.cloud/v1alpha1":`+strconv.Quote(carry)+`}},
			"spec":{"environmentdImageRef":"materialize/environmentd:v26.1.0","backendSecretName":"b"`+sa+`},
			"status":{"resourceId":"r","activeGeneration":1,"conditions":[],"lastCompletedRolloutHash":"x"}}`)
		before, _ := json.Marshal(obj)
		want, err := referenceConvert(runtime.DeepCopyJSON(obj), V1Alpha1)
		if err != nil {
			t.Fatal(err)
		}
		got := convert(t, obj, V1Alpha1)
		w, _ := json.Marshal(want)
		g, _ := json.Marshal(got)
		if string(w) != string(g) {
			t.Errorf("%s:\n got %s\nwant %s", name, g, w)
		}
		if after, _ := json.Marshal(obj); string(after) != string(before) {
			t.Errorf("%s: Convert modified its input:\nbefore %s\n after %s", name, before, after)
		}
		owned, err := ConvertOwned(runtime.DeepCopyJSON(obj), V1Alpha1, nil)
		if o, _ := json.Marshal(owned); err != nil || string(o) != string(w) {
			t.Errorf("%s, owned:\n got %s (%v)\nwant %s", name, o, err, w)
		}
		if _, ok := got["spec"].(map[string]any)["environmentdIamRoleArn"]; !ok {
			t.Errorf("%s: the carry did not restore the role, so the way back made nothing to undo: %s", name, g)
		}
	}
}

// inPlaceShapes are objects in the shapes that reach the maps a conversion
// writes into: a v1 object with v1alpha1's role field (the way back merges
// it into serviceAccountAnnotations, or creates them), annotations of every
// kind, null sections, leaves that are objects, the other direction's
// carry; and one whose own carry restores serviceAccountAnnotations whole
// while the role merges into them, which ConvertOwned must copy.
var inPlaceShapes = func() []string {
	const image = `"environmentdImageRef":"materialize/environmentd:v26.1.0","backendSecretName":"b"`
	const status = `"status":{"resourceId":"r","activeGeneration":1,"conditions":[],"lastCompletedRolloutHash":"x"}`
	var out []string
	for _, version := range []string{V1, V1Alpha1} {
		for _, sa := range []string{``, `,"serviceAccountAnnotations":null`, `,"serviceAccountAnnotations":{"a":"b"}`,
			`,"serviceAccountAnnotations":"not an object"`, `,"serviceAccountAnnotations":{"` + IAMRoleAnnotation + `":"arn:old"}`} {
			for _, role := range []string{``, `,"environmentdIamRoleArn":"arn:aws:iam::1:role/r"`, `,"environmentdIamRoleArn":{"an":"object"}`} {
				out = append(out, `{"apiVersion":"`+version+`","kind":"Materialize","metadata":{"name":"m"},"spec":{`+image+sa+role+`},`+status+`}`)
			}
		}
		for _, odd := range []string{
			`"metadata":null,"spec":{` + image + `},"status":null`,
			`"metadata":{"name":"m","annotations":null},"spec":{` + image + `}`,
			`"metadata":{"name":"m"},"spec":{` + image + `,"requestRollout":{"a":1},"forcePromote":{"b":2},"inPlaceRollout":{"c":3}},"status":{"resourcesHash":{"d":4},"lastCompletedRolloutRequest":["e"],"requestedRolloutHash":{"f":5}}`,
			`"metadata":{"name":"m","annotations":{"` + v1CarryAnnotation + `":"[{\"path\":[\"spec\",\"requestRollout\"],\"value\":\"v\"}]","` + v1alpha1CarryAnnotation + `":"[{\"path\":[\"spec\",\"inPlaceRollout\"],\"value\":true}]"}},"spec":{` + image + `},` + status,
		} {
			out = append(out, `{"apiVersion":"`+version+`","kind":"Materialize",`+odd+`}`)
		}
	}
	return append(out, `{"apiVersion":"`+V1Alpha1+`","kind":"Materialize","metadata":{"name":"m","annotations":{"`+v1CarryAnnotation+
		`":"[{\"path\":[\"spec\",\"serviceAccountAnnotations\"],\"value\":{\"a\":\"b\"},\"derived\":{\"`+IAMRoleAnnotation+`\":\"arn:r\"}}]"}},`+
		`"spec":{`+image+`,"environmentdIamRoleArn":"arn:r","serviceAccountAnnotations":{}},`+status+`}`)
}()

// In place, every such object converts to the bytes Convert and the
// reference give, in both directions.
func TestInPlaceMatchesTheReference(t *testing.T) {
	for _, src := range inPlaceShapes {
		for _, to := range []string{V1, V1Alpha1} {
			obj := mustDecode(t, src)
			// The reference predates the dropping of null sections, which
			// an object already at the version keeps.
			ref := runtime.DeepCopyJSON(obj)
			if ref["apiVersion"] != to {
				ref = withoutNullSections(ref)
			}
			want, wantErr := referenceConvert(ref, to)
			copied, copiedErr := Convert(obj, to)
			owned, ownedErr := ConvertOwned(runtime.DeepCopyJSON(obj), to, nil)
			w, _ := json.Marshal(want)
			c, _ := json.Marshal(copied)
			o, _ := json.Marshal(owned)
			if (wantErr != nil) != (ownedErr != nil) || (copiedErr != nil) != (ownedErr != nil) || string(o) != string(w) || string(c) != string(w) {
				t.Errorf("%s to %s:\n   owned %s (%v)\n  copied %s (%v)\nreference %s (%v)", src, to, o, ownedErr, c, copiedErr, w, wantErr)
			}
		}
	}
}
