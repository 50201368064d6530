// Package conversion converts Materialize objects between v1alpha1 and v1
// (docs/conversion.md). It works on decoded JSON rather than Go types so that
// partial objects, which server-side apply sends, convert field by field:
// nothing is invented that the input lacked, and unknown fields pass through.
//
// Each direction is a plain conversion plus a carry: what the target version
// cannot express is recorded in a conversion.materialize.cloud/ annotation
// and restored on the way back, so v1alpha1 -> v1 -> v1alpha1 and
// v1 -> v1alpha1 -> v1 are both the identity.
package conversion

import (
	"fmt"
	"maps"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize"
	v1 "github.com/materializeinc/orchestratord/pkg/apis/materialize/v1"
	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/boundedtext"
	"github.com/materializeinc/orchestratord/pkg/mzuuid"
)

// API versions and the kind this package converts.
var (
	V1Alpha1 = v1alpha1.SchemeGroupVersion.String()
	V1       = v1.SchemeGroupVersion.String()
)

const (
	// Kind is the only kind with more than one version.
	Kind = "Materialize"
	// IAMRoleAnnotation is where v1 keeps v1alpha1's environmentdIamRoleArn.
	IAMRoleAnnotation = "eks.amazonaws.com/role-arn"
	nilUUID           = "00000000-0000-0000-0000-000000000000"
	reasonPromoting   = "Promoting"
)

// Convert returns obj converted to apiVersion. obj is not modified; the
// result shares the subtrees the conversion does not change with obj, so
// neither may be modified afterwards (the webhook encodes the result and
// drops both). Objects already at apiVersion come back as they are.
func Convert(obj map[string]any, apiVersion string) (map[string]any, error) {
	return convertTo(obj, apiVersion, false, nil)
}

// ConvertOwned is Convert for an object its caller drops once it has the
// result, calling ignored (when not nil) with the name of a carry
// annotation it did not trust and why (docs/conversion.md). obj may be
// converted in place: the webhook's decoded objects are, which saves a
// copy of the maps a conversion changes. On an error obj is as it was:
// every error comes before a write, or (restoring a carry) on a copy.
func ConvertOwned(obj map[string]any, apiVersion string, ignored func(annotation, reason string)) (map[string]any, error) {
	return convertTo(obj, apiVersion, true, ignored)
}

func convertTo(obj map[string]any, apiVersion string, owned bool, ignored func(annotation, reason string)) (map[string]any, error) {
	kind, _ := obj["kind"].(string)
	if kind != Kind {
		return nil, fmt.Errorf("kind %q cannot be converted: only %s has more than one version", echo(kind), Kind)
	}
	from, _ := obj["apiVersion"].(string)
	if err := checkVersion(from); err != nil {
		return nil, fmt.Errorf("object apiVersion: %w", err)
	}
	if err := checkVersion(apiVersion); err != nil {
		return nil, fmt.Errorf("desired apiVersion: %w", err)
	}
	if err := checkShape(obj); err != nil {
		return nil, err
	}
	if from == apiVersion {
		return obj, nil
	}
	obj = withoutNullSections(obj)
	if ignored == nil {
		ignored = func(string, string) {}
	}
	switch {
	case apiVersion == V1:
		return toV1(obj, owned, ignored)
	default:
		return toV1alpha1(obj, owned, ignored)
	}
}

// maxEchoBytes bounds what of an object's own text an error repeats (a
// kind, an apiVersion, a key): the object comes from a client, and its
// strings may be megabytes of invalid UTF-8.
const maxEchoBytes = 256

func echo(s string) string { return boundedtext.Cut(s, maxEchoBytes) }

func checkVersion(apiVersion string) error {
	if apiVersion != V1Alpha1 && apiVersion != V1 {
		return fmt.Errorf("%q is not a %s version (want %s or %s)", echo(apiVersion), materialize.GroupName, V1Alpha1, V1)
	}
	return nil
}

// withoutNullSections drops a null metadata, spec or status, as upstream's
// conversion does (each is an Option it skips when None). The API server
// never sends one; obj itself is left alone.
func withoutNullSections(obj map[string]any) map[string]any {
	var out map[string]any
	for _, section := range []string{"metadata", "spec", "status"} {
		if v, ok := obj[section]; ok && v == nil {
			if out == nil {
				out = maps.Clone(obj)
			}
			delete(out, section)
		}
	}
	if out == nil {
		return obj
	}
	return out
}

// checkShape rejects objects whose top-level sections are not objects; such
// input cannot have come from the API server.
func checkShape(obj map[string]any) error {
	for _, field := range []string{"metadata", "spec", "status"} {
		if v, ok := obj[field]; ok && v != nil {
			if _, isMap := v.(map[string]any); !isMap {
				return fmt.Errorf("%s: must be an object, got %T", field, v)
			}
		}
	}
	if annotations, ok := lookup(obj, []string{"metadata", "annotations"}); ok && annotations != nil {
		m, isMap := annotations.(map[string]any)
		if !isMap {
			return fmt.Errorf("metadata.annotations: must be an object, got %T", annotations)
		}
		for k, v := range m {
			if _, isString := v.(string); !isString {
				return fmt.Errorf("metadata.annotations[%s]: must be a string, got %T", echo(k), v)
			}
		}
	}
	return nil
}

// Both directions change only the fields a conversion can change
// (touched) and the maps on the way to them: every other subtree is
// shared, read only, by the input, the result and the way back, so where
// they can differ is known in advance and the carry compares only there,
// against a snapshot of the original taken first. Convert works on a copy
// of those maps. An owned object without the carry annotation its
// conversion reads is converted in place: where the conversion changes a
// map, the result still holds that same map when the diff runs, so the
// diff goes down into it through the snapshot rather than reading it
// whole; only a carried path could make such a map read whole, and an
// object with that carry is copied. Reference tests (reference_test.go)
// hold both to the whole-object copy and diff, byte for byte.

func toV1(obj map[string]any, owned bool, ignored func(annotation, reason string)) (map[string]any, error) {
	v1Carry, why := readCarry(obj, v1CarryAnnotation)
	if why != "" {
		ignored(v1CarryAnnotation, why)
	}
	changed := touched(v1Carry)
	out, d := start(obj, changed, v1CarryAnnotation, owned)
	m := &memo{}
	out = plainToV1(out, m)
	if len(v1Carry) > 0 {
		if err := restore(out, v1Carry); err != nil {
			d.recycle()
			return nil, fmt.Errorf("restoring %s: %w", v1CarryAnnotation, err)
		}
		m.forgetHash() // restored fields may feed the hash
	}
	// What v1 cannot hold is what the plain way back would not reproduce.
	// The way back hashes the same v1 spec, so the hash is reused: this is
	// the path of every read from storage.
	if leftOut := carryWayBack(out, v1alpha1CarryAnnotation, changed, d, func(o map[string]any) { plainToV1alpha1(o, m) }); leftOut != "" {
		ignored(v1alpha1CarryAnnotation, leftOut)
	}
	return out, nil
}

func toV1alpha1(obj map[string]any, owned bool, ignored func(annotation, reason string)) (map[string]any, error) {
	alphaCarry, why := readCarry(obj, v1alpha1CarryAnnotation)
	if why != "" {
		ignored(v1alpha1CarryAnnotation, why)
	}
	changed := touched(alphaCarry)
	out, d := start(obj, changed, v1alpha1CarryAnnotation, owned)
	m := &memo{}
	out = plainToV1alpha1(out, m)
	if err := restore(out, alphaCarry); err != nil {
		d.recycle()
		return nil, fmt.Errorf("restoring %s: %w", v1alpha1CarryAnnotation, err)
	}
	m.forgetHash() // the way back hashes the v1 spec it derives
	if leftOut := carryWayBack(out, v1CarryAnnotation, changed, d, func(o map[string]any) { plainToV1(o, m) }); leftOut != "" {
		ignored(v1CarryAnnotation, leftOut)
	}
	return out, nil
}

// start returns what a conversion works on, without the named carry
// annotation: obj itself when it is owned and has none, otherwise a copy
// of the maps on the way to changed; and a differ holding the snapshot of
// the original.
func start(obj map[string]any, changed *fieldPaths, key string, owned bool) (out map[string]any, d *differ) {
	original, copied := withoutCarry(obj, changed, key)
	d = differs.Get().(*differ)
	d.snapshot(original, changed)
	if owned && !copied {
		return original, d
	}
	return copyPaths(original, changed), d
}

// withoutCarry is obj without the named carry annotation: obj itself when
// it has none, which is every object never written at the other version,
// or a copy of the maps on the way to changed (copied).
func withoutCarry(obj map[string]any, changed *fieldPaths, key string) (original map[string]any, copied bool) {
	if _, ok := lookup(obj, []string{"metadata", "annotations", key}); !ok {
		return obj, false
	}
	original = copyPaths(obj, changed)
	dropCarry(original, key)
	return original, true
}

// plainToV1 applies the v1alpha1 -> v1 rules of docs/conversion.md in place.
func plainToV1(obj map[string]any, m *memo) map[string]any {
	// Derived fields only for an object upstream's types read whole: a
	// partial one (server-side apply converts each manager's fields) gets
	// nothing it did not have, and neither operator derives from a status
	// it cannot read.
	whole := readV1alpha1(obj, m) == nil
	obj["apiVersion"] = V1
	spec, _ := obj["spec"].(map[string]any)
	status, _ := obj["status"].(map[string]any)

	requestRollout, _ := lookupString(obj, "spec", "requestRollout")
	lastCompletedRequest, _ := lookupString(obj, "status", "lastCompletedRolloutRequest")
	if spec != nil {
		delete(spec, "requestRollout")
		delete(spec, "inPlaceRollout")
		if role, ok := spec["environmentdIamRoleArn"]; ok {
			delete(spec, "environmentdIamRoleArn")
			mergeIAMRole(spec, role)
		}
		// "" and the nil UUID (as written, not as parsed) mean "not
		// promoting" at v1alpha1; v1 leaves the field out. null stays null.
		if promote, ok := spec["forcePromote"].(string); ok && (promote == "" || promote == nilUUID) {
			delete(spec, "forcePromote")
		}
	}
	if status != nil {
		delete(status, "lastCompletedRolloutRequest")
		delete(status, "resourcesHash")
		delete(status, "observedGeneration")
		if hash, ok := m.rolloutHash(obj); ok && whole {
			var boxed any = hash // one interface for both fields
			// A field of the other version's name, unknown here, passes
			// through as upstream's does and wins over the derived value.
			if _, passed := status["requestedRolloutHash"]; !passed {
				if !isPromoting(status) {
					status["requestedRolloutHash"] = boxed
				}
			}
			// A whole object's UUIDs parse; they are compared as values.
			last, request := mzuuid.Value(lastCompletedRequest), mzuuid.Value(requestRollout)
			inProgress := last == nilUUID || last != request
			// Upstream reads null as None: derived like an absent one, and
			// dropped when there is nothing to derive.
			if status["lastCompletedRolloutHash"] == nil {
				if inProgress {
					delete(status, "lastCompletedRolloutHash")
				} else {
					status["lastCompletedRolloutHash"] = boxed
				}
			}
		}
	}
	return obj
}

// mergeIAMRole puts v1alpha1's environmentdIamRoleArn into v1's
// serviceAccountAnnotations, as upstream does: any non-null value, the empty
// string included; an annotation already there wins, and annotations that
// are not an object are left as they are.
func mergeIAMRole(spec map[string]any, role any) {
	if role == nil {
		return
	}
	switch annotations := spec["serviceAccountAnnotations"].(type) {
	case nil:
		spec["serviceAccountAnnotations"] = map[string]any{IAMRoleAnnotation: role}
	case map[string]any:
		if _, exists := annotations[IAMRoleAnnotation]; !exists {
			set(spec, []string{"serviceAccountAnnotations", IAMRoleAnnotation}, role)
		}
	}
}

// plainToV1alpha1 applies the v1 -> v1alpha1 rules of docs/conversion.md in place.
func plainToV1alpha1(obj map[string]any, m *memo) map[string]any {
	var hashed string
	whole := readV1(obj, m) == nil
	if whole {
		hashed, whole = m.rolloutHash(obj)
	}
	obj["apiVersion"] = V1Alpha1
	spec, _ := obj["spec"].(map[string]any)
	status, _ := obj["status"].(map[string]any)
	// A field of the other version's name, unknown here, passes through
	// as upstream's does and wins over the derived value.
	var request any // RolloutRequest(hashed), once computed and boxed
	if _, passed := spec["requestRollout"]; spec != nil && whole && !passed {
		request = RolloutRequest(hashed)
		spec["requestRollout"] = request
	}
	if status != nil {
		delete(status, "requestedRolloutHash")
		// Upstream's v1alpha1 status requires both: a whole object gets
		// them as upstream writes them, so upstream can read it back.
		if _, passed := status["lastCompletedRolloutRequest"]; whole && !passed {
			status["lastCompletedRolloutRequest"] = nilUUID
			if last, ok := status["lastCompletedRolloutHash"].(string); ok {
				// The last rollout is mostly the one requested: its request
				// is the one just derived.
				if last != hashed || request == nil {
					request = RolloutRequest(last)
				}
				status["lastCompletedRolloutRequest"] = request
			}
		}
		if _, passed := status["resourcesHash"]; whole && !passed {
			status["resourcesHash"] = ""
		}
	}
	return obj
}

// memo is what a conversion and its check of the way back read of the
// same object, once: whether upstream reads its metadata, which neither
// way changes, and the rollout hash of its v1 spec while the spec is the
// same.
type memo struct {
	metadataRead bool
	metadataErr  error

	hashed, whole bool
	hash          string
}

func (m *memo) rolloutHash(obj map[string]any) (string, bool) {
	if !m.hashed {
		m.hash, m.whole = rolloutHashOf(obj)
		m.hashed = true
	}
	return m.hash, m.whole
}

// forgetHash is called when the v1 spec may have changed.
func (m *memo) forgetHash() { m.hashed, m.whole, m.hash = false, false, "" }

// rolloutHashOf computes the rollout hash of a v1 object, and whether the
// object is whole enough to have one: a spec upstream's types can read
// (RolloutHash), which a partial object sent by server-side apply is not.
func rolloutHashOf(obj map[string]any) (string, bool) {
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return "", false
	}
	force, forced := lookupString(obj, "metadata", "annotations", ForceRolloutAnnotation)
	hash, err := hashSpec(spec, force, forced)
	if err != nil {
		return "", false
	}
	return hash, true
}

// isPromoting is upstream's is_promoting: any condition whose reason is
// Promoting, whatever its type.
func isPromoting(status map[string]any) bool {
	conditions, _ := status["conditions"].([]any)
	for _, c := range conditions {
		c, _ := c.(map[string]any)
		if c["reason"] == reasonPromoting {
			return true
		}
	}
	return false
}
