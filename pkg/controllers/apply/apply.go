// Package apply writes objects with server-side apply under one field
// manager, and skips the write when the live object already holds exactly
// what would be applied, so a reconcile that changes nothing writes nothing.
package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// FieldManager owns every field the controllers write. It is upstream
// orchestratord's, so that after a switch from upstream this operator's
// applies replace upstream's field sets instead of sharing them: a field
// upstream set and this operator does not is removed, not left behind.
const FieldManager = "orchestratord.materialize.cloud"

// Options are the apply options of every write: conflicts are forced
// because the operator is the authority over the fields it manages.
func Options() metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
}

// Object applies desired unless live (nil when the object does not exist)
// already matches it. extract returns the part of live owned by
// FieldManager (client-go's Extract* functions); when nil, the check is that
// every field of desired has the same value in live, which suits objects
// whose set of fields does not shrink. It reports whether it wrote.
func Object[T any, AC any](ctx context.Context, live T, exists bool, desired AC,
	extract func(T, string) (AC, error),
	write func(context.Context, AC, metav1.ApplyOptions) (T, error),
) (bool, error) {
	return apply(ctx, live, exists, desired, extract, true, write)
}

// Status is Object for the status subresource of an existing object:
// owned returns the part of live's status FieldManager writes. An object
// rebuilt from the cache has its digest only of the main resource's
// fields, so the check always extracts the status.
func Status[T any, AC any](ctx context.Context, live T, desired AC,
	owned func(T, string) (AC, error),
	write func(context.Context, AC, metav1.ApplyOptions) (T, error),
) (bool, error) {
	return apply(ctx, live, true, desired, owned, false, write)
}

func apply[T any, AC any](ctx context.Context, live T, exists bool, desired AC,
	extract func(T, string) (AC, error), mainResource bool,
	write func(context.Context, AC, metav1.ApplyOptions) (T, error),
) (bool, error) {
	if exists {
		same, err := matches(live, desired, extract, mainResource)
		if err != nil {
			return false, err
		}
		if same {
			return false, nil
		}
	}
	if _, err := write(ctx, desired, Options()); err != nil {
		return false, err
	}
	return true, nil
}

// OwnedDigestAnnotation marks an object rebuilt from a cached stub
// (controller.Stub, read through a controller.Lister), or a Balancer or
// Console as the cache holds it: an object without managedFields whose
// annotation holds the Digest of the fields FieldManager owned in the
// whole object's main resource, as the extract function of its kind
// (client-go's Extract, or controller.ExtractBalancer and ExtractConsole)
// returns them: the only extract Object may be given with such an object.
// It exists only in the controllers' memory and is never written.
const OwnedDigestAnnotation = "orchestratord.materialize.cloud/cached-owned-fields-digest"

// Digest fingerprints an apply configuration for the no-op check: two
// digests of configurations of one type are equal when their JSON is. The
// desired configuration and the one extracted from the live object are
// always of one Go type, whose encoding is already canonical (fields in
// declaration order, map keys sorted, each number in its field's type), so
// it is hashed as encoded: decoding and encoding again, which the no-op
// check of every child in a resync did, took a third of a resync's CPU.
func Digest(ac any) (string, error) {
	raw, err := json.Marshal(ac)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// OwnedDigest is the Digest of the fields of live that FieldManager owns.
func OwnedDigest[T any, AC any](live T, extract func(T, string) (AC, error)) (string, error) {
	owned, err := extract(live, FieldManager)
	if err != nil {
		return "", fmt.Errorf("extracting owned fields: %w", err)
	}
	return Digest(owned)
}

func matches[T any, AC any](live T, desired AC, extract func(T, string) (AC, error), mainResource bool) (bool, error) {
	if extract != nil && mainResource {
		if digest, stub := CachedDigest(live); stub {
			want, err := Digest(desired)
			return want == digest, err
		}
	}
	want, err := asJSON(desired)
	if err != nil {
		return false, err
	}
	if extract != nil {
		owned, err := extract(live, FieldManager)
		if err != nil {
			return false, fmt.Errorf("extracting owned fields: %w", err)
		}
		got, err := asJSON(owned)
		if err != nil {
			return false, err
		}
		return reflect.DeepEqual(got, want), nil
	}
	got, err := asJSON(live)
	if err != nil {
		return false, err
	}
	// Objects from informer caches carry no apiVersion and kind.
	if m, ok := want.(map[string]any); ok {
		delete(m, "apiVersion")
		delete(m, "kind")
	}
	return Subset(want, got), nil
}

// CachedDigest returns the owned-fields digest of a cached stub, or of a
// Balancer or Console as the cache holds it. A whole
// object (a write's result, a GET) is none, even if someone wrote the
// annotation on it (and emptied its managedFields): the API server gives
// every object a creation timestamp, which a stub never has.
func CachedDigest(obj any) (string, bool) {
	o, err := meta.Accessor(obj)
	if err != nil || len(o.GetManagedFields()) > 0 || !o.GetCreationTimestamp().Time.IsZero() {
		return "", false
	}
	digest, ok := o.GetAnnotations()[OwnedDigestAnnotation]
	return digest, ok
}

func asJSON(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(raw, &out)
}

// Subset tells whether every value in want is present and equal in got;
// lists must be equal as a whole.
func Subset(want, got any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return reflect.DeepEqual(want, got)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, w := range wm {
		g, present := gm[k]
		if !present || !Subset(w, g) {
			return false
		}
	}
	return true
}

// ExtractDeduced returns the fields of live owned by manager (its main
// resource, not a subresource) as an apply configuration, for objects
// without a generated Extract function (this project's custom resources).
// The schema is deduced from the object: maps are merged by key and lists
// are atomic, which is how their CRDs declare them. newAC builds the empty
// apply configuration with live's name and namespace, as the generated
// Extract functions do.
func ExtractDeduced[T runtime.Object, AC any](newAC func(name, namespace string) AC) func(T, string) (AC, error) {
	return func(live T, manager string) (AC, error) {
		var zero AC
		accessor, err := meta.Accessor(live)
		if err != nil {
			return zero, err
		}
		// Extraction replaces the whole apply configuration: the type,
		// name and namespace (not managed fields) are put back after it.
		identity := newAC(accessor.GetName(), accessor.GetNamespace())
		owned := newAC(accessor.GetName(), accessor.GetNamespace())
		if err := managedfields.ExtractInto(live, typed.DeducedParseableType, manager, owned, ""); err != nil {
			return zero, err
		}
		merged, err := asJSON(owned)
		if err != nil {
			return zero, err
		}
		id, err := asJSON(identity)
		if err != nil {
			return zero, err
		}
		m, ok := merged.(map[string]any)
		if !ok {
			m = map[string]any{}
		}
		idm := id.(map[string]any)
		m["apiVersion"], m["kind"] = idm["apiVersion"], idm["kind"]
		md, _ := m["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
		}
		for k, v := range idm["metadata"].(map[string]any) {
			md[k] = v
		}
		m["metadata"] = md
		raw, err := json.Marshal(m)
		if err != nil {
			return zero, err
		}
		out := newAC(accessor.GetName(), accessor.GetNamespace())
		return out, json.Unmarshal(raw, out)
	}
}

// ConditionApplyConfiguration is c as an apply configuration; every field is
// set, so it compares equal to the same condition read back from the API
// server.
func ConditionApplyConfiguration(c metav1.Condition) *metav1ac.ConditionApplyConfiguration {
	return metav1ac.Condition().
		WithType(c.Type).WithStatus(c.Status).WithObservedGeneration(c.ObservedGeneration).
		WithLastTransitionTime(c.LastTransitionTime).WithReason(c.Reason).WithMessage(c.Message)
}
