package conversion

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Upstream's conversion derives fields (requestRollout, requestedRolloutHash,
// lastCompletedRolloutRequest, …) only for an object its typed reader
// accepts whole: serde into its Materialize of that version, where metadata
// and spec are required and a present status must have every non-Option
// field. These checks follow its types (docs/migrating-from-orchestratord.md);
// the differential test in test/upstream holds them to serde's behaviour.

// readsV1alpha1 reports whether upstream reads obj as a whole v1alpha1
// Materialize, but for the spec fields v1 shares, which the rollout hash
// reads (a spec it cannot read has no hash).
func readsV1alpha1(obj map[string]any) bool { return readV1alpha1(obj) == nil }

func readV1alpha1(obj map[string]any) error {
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return errors.New("spec: required, an object")
	}
	if err := readMetadata(obj); err != nil {
		return err
	}
	r := &serdeWriter{path: make([]string, 0, 8), comma: make([]bool, 0, 8)}
	r.object(func() {
		r.field("spec")
		r.object(func() {
			r.defaulted(spec, "requestRollout", nilUUID, r.uuid)
			r.defaulted(spec, "forcePromote", "", r.string)
			r.defaulted(spec, "inPlaceRollout", false, r.bool)
			r.option(spec, "environmentdIamRoleArn", r.string)
		})
		r.endField()
		r.statusV1alpha1(obj["status"])
	})
	return r.err
}

// readsV1 reports whether upstream reads obj as a whole v1 Materialize, but
// for the spec, which the rollout hash reads.
func readsV1(obj map[string]any) bool { return readV1(obj) == nil }

func readV1(obj map[string]any) error {
	if _, ok := obj["spec"].(map[string]any); !ok {
		return errors.New("spec: required, an object")
	}
	if err := readMetadata(obj); err != nil {
		return err
	}
	r := &serdeWriter{path: make([]string, 0, 8), comma: make([]bool, 0, 8)}
	r.object(func() { r.statusV1(obj["status"]) })
	return r.err
}

// UpstreamReads returns why upstream orchestratord's typed reader would
// refuse obj, a whole Materialize of its apiVersion as the API server
// returns it, or nil: an object it refuses is one upstream cannot reconcile
// (docs/migrating-from-orchestratord.md, "What upstream finds").
func UpstreamReads(obj map[string]any) error {
	var err error
	switch v, _ := obj["apiVersion"].(string); v {
	case V1Alpha1:
		err = readV1alpha1(obj)
	case V1:
		err = readV1(obj)
	default:
		return fmt.Errorf("apiVersion %q is not a Materialize version", echo(v))
	}
	if err != nil {
		return err
	}
	_, err = UpstreamSpecJSON(obj["spec"].(map[string]any))
	return err
}

// readMetadata: kube's derived resource types require metadata, a
// k8s-openapi ObjectMeta, which reads each field it knows by its type.
func readMetadata(obj map[string]any) error {
	meta, ok := obj["metadata"]
	if !ok || meta == nil {
		return errors.New("metadata: required")
	}
	r := &serdeWriter{root: "metadata.", path: make([]string, 0, 8), comma: make([]bool, 0, 8)}
	r.objectMeta(meta)
	return r.err
}

// objectMeta is k8s-openapi's ObjectMeta: every field optional, null as
// absent, unknown fields ignored.
func (w *serdeWriter) objectMeta(v any) {
	w.omitting(v,
		structField{"annotations", false, w.stringMap},
		structField{"creationTimestamp", false, w.time},
		structField{"deletionGracePeriodSeconds", false, w.int64},
		structField{"deletionTimestamp", false, w.time},
		structField{"finalizers", false, w.strings},
		structField{"generateName", false, w.string},
		structField{"generation", false, w.int64},
		structField{"labels", false, w.stringMap},
		structField{"managedFields", false, w.list(w.managedFieldsEntry)},
		structField{"name", false, w.string},
		structField{"namespace", false, w.string},
		structField{"ownerReferences", false, w.list(w.ownerReference)},
		structField{"resourceVersion", false, w.string},
		structField{"selfLink", false, w.string},
		structField{"uid", false, w.string})
}

func (w *serdeWriter) managedFieldsEntry(v any) {
	w.omitting(v,
		structField{"apiVersion", false, w.string},
		structField{"fieldsType", false, w.string},
		structField{"fieldsV1", false, func(any) {}}, // any JSON value
		structField{"manager", false, w.string},
		structField{"operation", false, w.string},
		structField{"subresource", false, w.string},
		structField{"time", false, w.time})
}

func (w *serdeWriter) ownerReference(v any) {
	w.omitting(v,
		structField{"apiVersion", true, w.string},
		structField{"blockOwnerDeletion", false, w.bool},
		structField{"controller", false, w.bool},
		structField{"kind", true, w.string},
		structField{"name", true, w.string},
		structField{"uid", true, w.string})
}

// statusV1alpha1 reads v1alpha1's MaterializeStatus: an Option, so null or
// absent is fine.
func (w *serdeWriter) statusV1alpha1(v any) {
	w.status(v, func(st map[string]any) {
		w.requiredField(st, "resourceId", w.string)
		w.requiredField(st, "activeGeneration", w.uint64)
		w.requiredField(st, "lastCompletedRolloutRequest", w.uuid)
		w.option(st, "lastCompletedRolloutEnvironmentdImageRef", w.string)
		w.requiredField(st, "resourcesHash", w.string)
		w.option(st, "lastCompletedRolloutHash", w.string)
		w.requiredField(st, "conditions", w.list(w.condition))
	})
}

// statusV1 reads v1's MaterializeStatus.
func (w *serdeWriter) statusV1(v any) {
	w.status(v, func(st map[string]any) {
		w.requiredField(st, "resourceId", w.string)
		w.requiredField(st, "activeGeneration", w.uint64)
		w.option(st, "lastCompletedRolloutEnvironmentdImageRef", w.string)
		w.option(st, "lastCompletedRolloutHash", w.string)
		w.option(st, "requestedRolloutHash", w.string)
		w.requiredField(st, "conditions", w.list(w.condition))
	})
}

func (w *serdeWriter) status(v any, read func(map[string]any)) {
	w.field("status")
	defer w.endField()
	if v == nil {
		return
	}
	st, ok := v.(map[string]any)
	if !ok {
		w.fail("must be an object")
		return
	}
	w.object(func() { read(st) })
}

// requiredField reads a field serde requires: neither absent nor null.
func (w *serdeWriter) requiredField(obj map[string]any, key string, read func(any)) {
	w.field(key)
	defer w.endField()
	if obj[key] == nil {
		w.fail("required")
		return
	}
	read(obj[key])
}

// uint64 is a u64 as serde_json reads one: a non-negative integer ("-0"
// is zero), never a fraction or an exponent.
func (w *serdeWriter) uint64(v any) {
	n, ok := v.(json.Number)
	if !ok {
		w.int64(v) // a value built in Go, not decoded: as i64
		return
	}
	s := string(n)
	if strings.HasPrefix(s, "-") {
		if i, err := strconv.ParseInt(s, 10, 64); err != nil || i != 0 {
			w.fail("must be a non-negative integer")
			return
		}
		s = "0"
	}
	if _, err := strconv.ParseUint(s, 10, 64); err != nil {
		w.fail("must be a non-negative integer")
		return
	}
	w.separate()
	w.buf = append(w.buf, s...)
}

// condition is k8s-openapi's meta/v1 Condition: a missing required string is
// read as "", but lastTransitionTime, a Time, has no default: it must be
// there, an RFC 3339 timestamp. observedGeneration is an Option<i64>.
func (w *serdeWriter) condition(v any) {
	if c, ok := v.(map[string]any); ok && c["lastTransitionTime"] == nil {
		w.fail("lastTransitionTime: required")
		return
	}
	w.omitting(v,
		structField{"lastTransitionTime", true, w.time},
		structField{"message", true, w.string},
		structField{"observedGeneration", false, w.int64},
		structField{"reason", true, w.string},
		structField{"status", true, w.string},
		structField{"type", true, w.string})
}

// time reads a k8s-openapi Time: an RFC 3339 timestamp.
func (w *serdeWriter) time(v any) {
	s, ok := v.(string)
	if !ok {
		w.fail("must be a timestamp string")
		return
	}
	if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
		w.fail("must be an RFC 3339 timestamp")
		return
	}
	w.string(s)
}
