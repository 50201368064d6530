package conversion

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// A carry annotation is written by whoever may write the Materialize: it
// may restore only the fields a conversion drops, with their types; any
// other annotation is ignored whole, reported, and dropped from the result.
func TestTamperedCarryIsIgnored(t *testing.T) {
	huge := make([]map[string]any, 6000)
	for i := range huge {
		huge[i] = map[string]any{"path": []string{"spec", fmt.Sprintf("f%d", i)}, "value": "x"}
	}
	hugeJSON, _ := json.Marshal(huge)
	cases := map[string]string{
		"apiVersion":            `[{"path":["apiVersion"],"value":"v9"}]`,
		"kind":                  `[{"path":["kind"],"value":"Secret"}]`,
		"name":                  `[{"path":["metadata","name"],"value":"other"}]`,
		"namespace":             `[{"path":["metadata","namespace"],"value":"kube-system"}]`,
		"arbitrary spec field":  `[{"path":["spec","notAField"],"value":{"a":1}}]`,
		"type change":           `[{"path":["spec","requestRollout"],"value":{"nested":true}}]`,
		"derived of wrong type": `[{"path":["spec","inPlaceRollout"],"value":true,"derived":"yes"}]`,
		"dotted path":           `[{"path":["spec","serviceAccountAnnotations.eks","amazonaws.com/role-arn"],"value":"x"}]`,
		"twice":                 `[{"path":["spec","requestRollout"],"value":"a"},{"path":["spec","requestRollout"],"value":"b"}]`,
		"not JSON":              `[{"path":`,
		"huge":                  string(hugeJSON),
	}
	for name, carry := range cases {
		in := mustDecode(t, v1Whole)
		plain := convert(t, mustDecode(t, v1Whole), V1Alpha1)
		set(in, []string{"metadata", "annotations", v1alpha1CarryAnnotation}, carry)
		var reported []string
		out, err := ConvertOwned(in, V1Alpha1, func(annotation, reason string) { reported = append(reported, annotation+": "+reason) })
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(reported) != 1 || !strings.HasPrefix(reported[0], v1alpha1CarryAnnotation+": ") {
			t.Errorf("%s: reported %q, want the annotation ignored once", name, reported)
		}
		a, _ := json.Marshal(out)
		b, _ := json.Marshal(plain)
		if string(a) != string(b) {
			t.Errorf("%s: the tampered annotation changed the result:\n got  %s\n want %s", name, a, b)
		}
	}
}

// A carry annotation that fits is still trusted: the round trip restores it.
func TestFittingCarryIsRestored(t *testing.T) {
	in := mustDecode(t, alphaWhole)
	set(in, []string{"spec", "inPlaceRollout"}, true)
	var reported []string
	mid, err := ConvertOwned(in, V1, func(a, r string) { reported = append(reported, r) })
	if err != nil {
		t.Fatal(err)
	}
	back, err := ConvertOwned(mid, V1Alpha1, func(a, r string) { reported = append(reported, r) })
	if err != nil {
		t.Fatal(err)
	}
	if get(back, "spec", "inPlaceRollout") != true || len(reported) != 0 {
		t.Errorf("inPlaceRollout %v, reported %v", get(back, "spec", "inPlaceRollout"), reported)
	}
}

// A carry that would take the object's annotations past the API server's
// 256 KiB, or be larger than the way back reads, is left out and reported:
// the API server would refuse the whole conversion (every read of the
// object at the other version, and every LIST page it is on).
func TestOversizedCarryIsLeftOut(t *testing.T) {
	full := func(in map[string]any) {
		// Annotations a tenant may write: just under the API server's bound.
		annotations, _ := lookupMap(in, "metadata", "annotations")
		room := maxAnnotationBytes - annotationBytes(annotations, "") - len("big") - 20
		set(in, []string{"metadata", "annotations", "big"}, strings.Repeat("a", room))
	}
	longRole := func(in map[string]any) {
		set(in, []string{"spec", "environmentdIamRoleArn"}, strings.Repeat("<", 3000))
	}
	for name, tc := range map[string]struct {
		to     string
		in     string
		mutate func(map[string]any)
		key    string
	}{
		"annotations full":  {V1, alphaWhole, full, v1alpha1CarryAnnotation},
		"carry over 16 KiB": {V1, alphaWhole, longRole, v1alpha1CarryAnnotation},
	} {
		in := mustDecode(t, tc.in)
		tc.mutate(in)
		var reported []string
		out, err := ConvertOwned(in, tc.to, func(annotation, reason string) { reported = append(reported, annotation+": "+reason) })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		annotations, _ := lookupMap(out, "metadata", "annotations")
		if _, ok := annotations[tc.key]; ok {
			t.Errorf("%s: carry written, %d bytes", name, len(annotations[tc.key].(string)))
		}
		if n := annotationBytes(annotations, ""); n > maxAnnotationBytes {
			t.Errorf("%s: annotations of %d bytes, more than the API server admits", name, n)
		}
		if len(reported) != 1 || !strings.HasPrefix(reported[0], tc.key+": left out") {
			t.Errorf("%s: reported %q, want the carry left out once", name, reported)
		}
	}
}

// The diff of a map compared whole costs what the map holds, not the
// square of how deep a hostile client nests a value in it.
func TestDeepValueInACarriedMapIsDiffedOnce(t *testing.T) {
	const depth = 3000
	nested := strings.Repeat(`{"a":`, depth) + `"x"` + strings.Repeat(`}`, depth)
	in := mustDecode(t, `{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize","metadata":{"name":"mz","namespace":"ns"},
 "spec":{"environmentdImageRef":"mz:v1","backendSecretName":"b","serviceAccountAnnotations":{"eks.amazonaws.com/role-arn":`+nested+`,"other":`+nested+`}}}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := Convert(in, V1); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	// Copying the path at every level took 16·depth²/2 bytes a value.
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 1<<20 {
		t.Errorf("%d bytes allocated for values nested %d deep", allocated, depth)
	}
}
