package conversion

import (
	"encoding/json"
	"fmt"
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
