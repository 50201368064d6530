package conversion

import (
	"encoding/json"
	"strings"
	"testing"
)

func mustDecode(t *testing.T, s string) map[string]any {
	t.Helper()
	v, err := decodeValue([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string]any)
}

func convert(t *testing.T, obj map[string]any, to string) map[string]any {
	t.Helper()
	out, err := Convert(obj, to)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func get(obj map[string]any, path ...string) any {
	v, _ := lookup(obj, path)
	return v
}

func has(obj map[string]any, path ...string) bool {
	_, ok := lookup(obj, path)
	return ok
}

const alphaWhole = `{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize",
 "metadata":{"name":"mz","namespace":"ns"},
 "spec":{"environmentdImageRef":"mz:v1","backendSecretName":"b","requestRollout":"6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00",
   "environmentdIamRoleArn":"arn:role","forcePromote":"00000000-0000-0000-0000-000000000000","inPlaceRollout":false},
 "status":{"resourceId":"abc","activeGeneration":3,"lastCompletedRolloutRequest":"6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00",
   "resourcesHash":"r","observedGeneration":4,"conditions":[]}}`

func TestV1alpha1ToV1FollowsTheSpecRules(t *testing.T) {
	in := mustDecode(t, alphaWhole)
	out := convert(t, in, V1)

	if got := get(out, "spec", "serviceAccountAnnotations", IAMRoleAnnotation); got != "arn:role" {
		t.Errorf("environmentdIamRoleArn not moved into the service account annotation: %v", got)
	}
	for _, gone := range [][]string{{"spec", "environmentdIamRoleArn"}, {"spec", "requestRollout"}, {"spec", "inPlaceRollout"},
		{"spec", "forcePromote"}, {"status", "lastCompletedRolloutRequest"}, {"status", "resourcesHash"}, {"status", "observedGeneration"}} {
		if has(out, gone...) {
			t.Errorf("%s must not appear in v1", strings.Join(gone, "."))
		}
	}
	hash, whole := rolloutHashOf(out)
	if !whole {
		t.Fatal("whole object not recognised as whole")
	}
	if got := get(out, "status", "requestedRolloutHash"); got != hash {
		t.Errorf("requestedRolloutHash = %v, want the computed hash %s", got, hash)
	}
	// The last completed request equals requestRollout: no rollout in
	// progress, so the last completed hash is the current one.
	if got := get(out, "status", "lastCompletedRolloutHash"); got != hash {
		t.Errorf("lastCompletedRolloutHash = %v, want %s", got, hash)
	}
	if in["apiVersion"] != V1Alpha1 {
		t.Error("Convert modified its input")
	}
}

func TestV1alpha1ToV1DuringRolloutAndPromotion(t *testing.T) {
	in := mustDecode(t, alphaWhole)
	set(in, []string{"status", "lastCompletedRolloutRequest"}, "0b0b0b0b-1111-4222-8333-444444444444")
	set(in, []string{"status", "conditions"}, []any{map[string]any{"type": "UpToDate", "status": "False", "reason": "Promoting"}})
	out := convert(t, in, V1)
	if has(out, "status", "lastCompletedRolloutHash") {
		t.Error("a rollout is in progress: lastCompletedRolloutHash must stay absent")
	}
	if has(out, "status", "requestedRolloutHash") {
		t.Error("promoting: requestedRolloutHash must stay absent")
	}

	set(in, []string{"status", "lastCompletedRolloutHash"}, "kept")
	if got := get(convert(t, in, V1), "status", "lastCompletedRolloutHash"); got != "kept" {
		t.Errorf("lastCompletedRolloutHash from status must be kept, got %v", got)
	}
}

func TestExistingRoleAnnotationWins(t *testing.T) {
	in := mustDecode(t, alphaWhole)
	set(in, []string{"spec", "serviceAccountAnnotations", IAMRoleAnnotation}, "arn:existing")
	out := convert(t, in, V1)
	if got := get(out, "spec", "serviceAccountAnnotations", IAMRoleAnnotation); got != "arn:existing" {
		t.Errorf("existing annotation overwritten: %v", got)
	}
}

func TestNonEmptyForcePromoteIsKept(t *testing.T) {
	in := mustDecode(t, alphaWhole)
	set(in, []string{"spec", "forcePromote"}, "0b0b0b0b-1111-4222-8333-444444444444")
	if got := get(convert(t, in, V1), "spec", "forcePromote"); got != "0b0b0b0b-1111-4222-8333-444444444444" {
		t.Errorf("forcePromote = %v", got)
	}
}

const v1Whole = `{"apiVersion":"materialize.cloud/v1","kind":"Materialize",
 "metadata":{"name":"mz","namespace":"ns","annotations":{"materialize.cloud/force-rollout":"1"}},
 "spec":{"environmentdImageRef":"mz:v2","backendSecretName":"b","balancerdReplicas":2},
 "status":{"resourceId":"abc","activeGeneration":1,"lastCompletedRolloutHash":"h-old","requestedRolloutHash":"whatever","conditions":[]}}`

func TestV1ToV1alpha1DerivesRequestsFromHashes(t *testing.T) {
	in := mustDecode(t, v1Whole)
	out := convert(t, in, V1Alpha1)
	hash, _ := rolloutHashOf(in)
	if got := get(out, "spec", "requestRollout"); got != RolloutRequest(hash) {
		t.Errorf("requestRollout = %v, want UUIDv5 of the rollout hash %s", got, RolloutRequest(hash))
	}
	if got := get(out, "status", "lastCompletedRolloutRequest"); got != RolloutRequest("h-old") {
		t.Errorf("lastCompletedRolloutRequest = %v, want UUIDv5(h-old)", got)
	}
	if has(out, "status", "requestedRolloutHash") {
		t.Error("requestedRolloutHash has no place in v1alpha1")
	}

	// Re-applying the same v1 spec maps to the same request: no rollout.
	again := convert(t, mustDecode(t, v1Whole), V1Alpha1)
	if get(again, "spec", "requestRollout") != get(out, "spec", "requestRollout") {
		t.Error("an unchanged v1 spec must map to an unchanged requestRollout")
	}
	// Fields outside the hash do not change the request either...
	replicas := mustDecode(t, v1Whole)
	set(replicas, []string{"spec", "balancerdReplicas"}, json.Number("5"))
	if get(convert(t, replicas, V1Alpha1), "spec", "requestRollout") != get(out, "spec", "requestRollout") {
		t.Error("balancerdReplicas must not be part of the rollout hash")
	}
	// ...but the image and the force-rollout annotation do.
	image := mustDecode(t, v1Whole)
	set(image, []string{"spec", "environmentdImageRef"}, "mz:v3")
	force := mustDecode(t, v1Whole)
	set(force, []string{"metadata", "annotations", ForceRolloutAnnotation}, "2")
	for name, obj := range map[string]map[string]any{"image": image, "force-rollout annotation": force} {
		if get(convert(t, obj, V1Alpha1), "spec", "requestRollout") == get(out, "spec", "requestRollout") {
			t.Errorf("changing the %s must request a rollout", name)
		}
	}
}

func TestEditThroughV1RequestsARolloutDespiteCarriedRequest(t *testing.T) {
	stored := mustDecode(t, alphaWhole)
	asV1 := convert(t, stored, V1)
	set(asV1, []string{"spec", "environmentdImageRef"}, "mz:v2")
	back := convert(t, asV1, V1Alpha1)
	if get(back, "spec", "requestRollout") == get(stored, "spec", "requestRollout") {
		t.Fatal("a spec change made through v1 was undone by the carried requestRollout")
	}
	hash, _ := rolloutHashOf(asV1)
	if get(back, "spec", "requestRollout") != RolloutRequest(hash) {
		t.Errorf("requestRollout should be derived from the new hash")
	}
}

func TestPartialObjectsGetNothingInvented(t *testing.T) {
	// What server-side apply sends: just the fields a manager owns.
	partial := mustDecode(t, `{"apiVersion":"materialize.cloud/v1","kind":"Materialize","metadata":{"name":"mz"},
	  "spec":{"environmentdExtraEnv":[{"name":"A","value":"1"}]}}`)
	out := convert(t, partial, V1Alpha1)
	if has(out, "spec", "requestRollout") || has(out, "status") || has(out, "metadata", "annotations") {
		t.Errorf("partial object grew fields: %s", mustJSON(out))
	}
	alpha := mustDecode(t, `{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize","metadata":{"name":"mz"},
	  "status":{"conditions":[]}}`)
	out = convert(t, alpha, V1)
	if has(out, "status", "requestedRolloutHash") || has(out, "status", "lastCompletedRolloutHash") || has(out, "spec") {
		t.Errorf("partial object grew fields: %s", mustJSON(out))
	}
}

func TestSameVersionPassesThrough(t *testing.T) {
	for _, src := range []string{alphaWhole, v1Whole} {
		in := mustDecode(t, src)
		out := convert(t, in, in["apiVersion"].(string))
		if mustJSON(out) != mustJSON(in) {
			t.Errorf("same-version conversion changed the object:\n%s\n%s", mustJSON(in), mustJSON(out))
		}
	}
}

func TestBadInputIsAnErrorNamingTheProblem(t *testing.T) {
	cases := map[string]struct {
		obj, to, want string
	}{
		"wrong kind":           {`{"apiVersion":"materialize.cloud/v1alpha1","kind":"Balancer"}`, V1, `kind "Balancer"`},
		"unknown from version": {`{"apiVersion":"materialize.cloud/v2","kind":"Materialize"}`, V1, `object apiVersion: "materialize.cloud/v2"`},
		"unknown to version":   {`{"apiVersion":"materialize.cloud/v1","kind":"Materialize"}`, "materialize.cloud/v9", `desired apiVersion`},
		"spec not an object":   {`{"apiVersion":"materialize.cloud/v1","kind":"Materialize","spec":[1]}`, V1Alpha1, "spec: must be an object"},
		"annotation not text":  {`{"apiVersion":"materialize.cloud/v1","kind":"Materialize","metadata":{"annotations":{"a":1}}}`, V1Alpha1, "metadata.annotations[a]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Convert(mustDecode(t, tc.obj), tc.to)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// Upstream parity (docs/migrating-from-orchestratord.md): what upstream's
// conversion derives, and when.

func TestEmptyIAMRoleBecomesAnEmptyAnnotation(t *testing.T) {
	in := mustDecode(t, alphaWhole)
	set(in, []string{"spec", "environmentdIamRoleArn"}, "")
	out := convert(t, in, V1)
	if got, ok := lookup(out, []string{"spec", "serviceAccountAnnotations", IAMRoleAnnotation}); !ok || got != "" {
		t.Errorf("role-arn annotation = %v (present %v), want \"\" as upstream writes it", got, ok)
	}
	// null is no role at all.
	set(in, []string{"spec", "environmentdIamRoleArn"}, nil)
	if has(convert(t, in, V1), "spec", "serviceAccountAnnotations") {
		t.Error("a null environmentdIamRoleArn must not create serviceAccountAnnotations")
	}
	// Annotations that are not an object are left alone, as upstream does.
	set(in, []string{"spec", "environmentdIamRoleArn"}, "arn:role")
	set(in, []string{"spec", "serviceAccountAnnotations"}, "not-a-map")
	if got := get(convert(t, in, V1), "spec", "serviceAccountAnnotations"); got != "not-a-map" {
		t.Errorf("serviceAccountAnnotations = %v", got)
	}
}

func TestRolloutRequestsCompareAsUUIDs(t *testing.T) {
	for _, spelling := range []string{
		"6F1F4A8E-3C2B-4E4F-9A7E-0C4B8D2E1F00",
		"6f1f4a8e3c2b4e4f9a7e0c4b8d2e1f00",
		"{6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00}",
		"urn:uuid:6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00",
	} {
		in := mustDecode(t, alphaWhole)
		set(in, []string{"spec", "requestRollout"}, spelling)
		out := convert(t, in, V1)
		hash, _ := rolloutHashOf(out)
		if got := get(out, "status", "lastCompletedRolloutHash"); got != hash {
			t.Errorf("requestRollout %s is the completed request: lastCompletedRolloutHash = %v, want %s", spelling, got, hash)
		}
	}
	// The nil UUID, however spelled, is never a completed request.
	in := mustDecode(t, alphaWhole)
	set(in, []string{"spec", "requestRollout"}, "00000000000000000000000000000000")
	set(in, []string{"status", "lastCompletedRolloutRequest"}, nilUUID)
	if has(convert(t, in, V1), "status", "lastCompletedRolloutHash") {
		t.Error("a nil last completed request must leave lastCompletedRolloutHash absent")
	}
}

func TestV1ToV1alpha1WritesTheStatusUpstreamRequires(t *testing.T) {
	in := mustDecode(t, v1Whole)
	remove(in, []string{"status", "lastCompletedRolloutHash"})
	out := convert(t, in, V1Alpha1)
	if got := get(out, "status", "lastCompletedRolloutRequest"); got != nilUUID {
		t.Errorf("lastCompletedRolloutRequest = %v, want the nil UUID", got)
	}
	if got, ok := lookup(out, []string{"status", "resourcesHash"}); !ok || got != "" {
		t.Errorf("resourcesHash = %v (present %v), want \"\"", got, ok)
	}
	// An empty last completed hash is still a hash: upstream maps it too.
	set(in, []string{"status", "lastCompletedRolloutHash"}, "")
	if got := get(convert(t, in, V1Alpha1), "status", "lastCompletedRolloutRequest"); got != RolloutRequest("") {
		t.Errorf("lastCompletedRolloutRequest = %v, want UUIDv5(\"\")", got)
	}
}

func TestNoDerivedFieldsForWhatUpstreamCannotRead(t *testing.T) {
	cases := map[string]struct {
		doc  string
		path []string
		v    any
		drop bool
	}{
		"v1alpha1 status without conditions":    {alphaWhole, []string{"status", "conditions"}, nil, true},
		"v1alpha1 status without resourcesHash": {alphaWhole, []string{"status", "resourcesHash"}, nil, true},
		"v1alpha1 negative activeGeneration":    {alphaWhole, []string{"status", "activeGeneration"}, json.Number("-1"), false},
		"v1alpha1 fractional activeGeneration":  {alphaWhole, []string{"status", "activeGeneration"}, json.Number("1.0"), false},
		"v1alpha1 null forcePromote":            {alphaWhole, []string{"spec", "forcePromote"}, nil, false},
		"v1alpha1 malformed requestRollout":     {alphaWhole, []string{"spec", "requestRollout"}, "not-a-uuid", false},
		"v1alpha1 without metadata":             {alphaWhole, []string{"metadata"}, nil, true},
		"v1alpha1 string balancerdReplicas":     {alphaWhole, []string{"spec", "balancerdReplicas"}, "2", false},
		"v1 status without activeGeneration":    {v1Whole, []string{"status", "activeGeneration"}, nil, true},
		"v1 condition with a bad time":          {v1Whole, []string{"status", "conditions"}, []any{map[string]any{"type": "UpToDate", "lastTransitionTime": "yesterday"}}, false},
		"v1 numeric forcePromote":               {v1Whole, []string{"spec", "forcePromote"}, json.Number("1"), false},
		"v1 consoleReplicas beyond i32":         {v1Whole, []string{"spec", "consoleReplicas"}, json.Number("2147483648"), false},
	}
	for name, c := range cases {
		in := mustDecode(t, c.doc)
		if c.drop {
			remove(in, c.path)
		} else {
			set(in, c.path, c.v)
		}
		if c.doc == alphaWhole {
			out := convert(t, in, V1)
			if has(out, "status", "requestedRolloutHash") || has(out, "status", "lastCompletedRolloutHash") {
				t.Errorf("%s: derived fields added to what upstream cannot read: %v", name, out["status"])
			}
			continue
		}
		out := convert(t, in, V1Alpha1)
		if has(out, "spec", "requestRollout") || has(out, "status", "lastCompletedRolloutRequest") || has(out, "status", "resourcesHash") {
			t.Errorf("%s: derived fields added to what upstream cannot read: spec %v status %v", name, out["spec"], out["status"])
		}
	}
}

func TestPromotingIsAnyConditionWithReasonPromoting(t *testing.T) {
	in := mustDecode(t, alphaWhole)
	set(in, []string{"status", "conditions"}, []any{map[string]any{"type": "Other", "status": "Unknown", "reason": "Promoting",
		"message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}})
	if has(convert(t, in, V1), "status", "requestedRolloutHash") {
		t.Error("upstream's is_promoting looks at every condition's reason: requestedRolloutHash must stay absent")
	}
}

func TestUpstreamReadsSaysWhy(t *testing.T) {
	if err := UpstreamReads(mustDecode(t, alphaWhole)); err != nil {
		t.Errorf("a whole v1alpha1 object: %v", err)
	}
	in := mustDecode(t, alphaWhole)
	remove(in, []string{"status", "lastCompletedRolloutRequest"})
	if err := UpstreamReads(in); err == nil || !strings.Contains(err.Error(), "status.lastCompletedRolloutRequest: required") {
		t.Errorf("missing lastCompletedRolloutRequest: %v", err)
	}
	in = mustDecode(t, v1Whole)
	set(in, []string{"spec", "requestRollout"}, "x") // unknown at v1: ignored
	if err := UpstreamReads(in); err != nil {
		t.Errorf("a whole v1 object: %v", err)
	}
	remove(in, []string{"spec", "backendSecretName"})
	if err := UpstreamReads(in); err == nil || !strings.Contains(err.Error(), "spec.backendSecretName: required") {
		t.Errorf("missing backendSecretName: %v", err)
	}
}

// A v1 client that changes the spec writes back the status it read; the API
// server keeps the stored status (the status subresource), so the echoed
// requestedRolloutHash, the old spec's, must not come back: read at v1 the
// Materialize shows the new spec's hash, which promotes it when set as
// forcePromote (docs/upgrading.md). Earlier versions carried the echo in
// an annotation; such an entry is ignored.
func TestEchoedRequestedRolloutHashIsNotCarried(t *testing.T) {
	stored := mustDecode(t, `{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize","metadata":{"name":"mz","namespace":"ns"},
 "spec":{"environmentdImageRef":"materialize/environmentd:v26.1.0","backendSecretName":"b","requestRollout":"00000000-0000-0000-0000-000000000000"},
 "status":{"resourceId":"abc","activeGeneration":1,"lastCompletedRolloutRequest":"00000000-0000-0000-0000-000000000000","resourcesHash":"","conditions":[]}}`)
	// The stored object's request is the UUIDv5 of its hash, and completed.
	read := convert(t, stored, V1)
	oldHash := get(read, "status", "requestedRolloutHash").(string)
	set(stored, []string{"spec", "requestRollout"}, RolloutRequest(oldHash))
	set(stored, []string{"status", "lastCompletedRolloutRequest"}, RolloutRequest(oldHash))
	read = convert(t, stored, V1)

	// kubectl patch: the spec changes, the status is echoed.
	set(read, []string{"spec", "forceRollout"}, "6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00")
	written := convert(t, read, V1Alpha1)
	written["status"] = stored["status"] // the API server keeps the stored status
	back := convert(t, written, V1)
	newHash, _ := get(back, "status", "requestedRolloutHash").(string)
	if newHash == "" || newHash == oldHash {
		t.Fatalf("requestedRolloutHash after a forced rollout at v1 = %q, want the new spec's (not the echoed %q)", newHash, oldHash)
	}
	if get(written, "spec", "requestRollout") != RolloutRequest(newHash) {
		t.Errorf("the stored request %v is not the UUIDv5 of the hash v1 shows, %s", get(written, "spec", "requestRollout"), newHash)
	}

	// An annotation an earlier version wrote with the echo is ignored.
	set(written, []string{"metadata", "annotations", v1CarryAnnotation},
		`[{"path":["status","requestedRolloutHash"],"value":"`+oldHash+`","derived":"`+newHash+`"}]`)
	if got := get(convert(t, written, V1), "status", "requestedRolloutHash"); got != newHash {
		t.Errorf("with an old carry of the echo, requestedRolloutHash = %v, want %s", got, newHash)
	}
}
