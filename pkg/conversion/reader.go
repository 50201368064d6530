package conversion

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Upstream's conversion derives fields (requestRollout, requestedRolloutHash,
// lastCompletedRolloutRequest, …) only for an object its typed reader
// accepts whole: serde into its Materialize of that version, where metadata
// and spec are required and a present status must have every non-Option
// field. These checks follow its types (docs/migrating-from-orchestratord.md);
// the differential test in test/upstream holds them to serde's behaviour.

// readV1alpha1 returns why upstream would not read obj as a whole v1alpha1
// Materialize, but for the spec fields v1 shares, which the rollout hash
// reads (a spec it cannot read has no hash). m, when not nil, keeps what
// is read of the metadata for the way back.
func readV1alpha1(obj map[string]any, m *memo) error {
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return errors.New("spec: required, an object")
	}
	return readWith(func(r *serdeWriter) {
		r.metadataOnce(obj, m)
		r.field("spec")
		r.beginObject()
		r.defaulted(spec, "requestRollout", nilUUID, (*serdeWriter).uuid)
		r.defaulted(spec, "forcePromote", "", (*serdeWriter).string)
		r.defaulted(spec, "inPlaceRollout", false, (*serdeWriter).bool)
		r.option(spec, "environmentdIamRoleArn", (*serdeWriter).string)
		r.endObject()
		r.endField()
		r.statusV1alpha1(obj["status"])
	})
}

// readV1 returns why upstream would not read obj as a whole v1
// Materialize, but for the spec, which the rollout hash reads; m as for
// readV1alpha1.
func readV1(obj map[string]any, m *memo) error {
	if _, ok := obj["spec"].(map[string]any); !ok {
		return errors.New("spec: required, an object")
	}
	return readWith(func(r *serdeWriter) {
		r.metadataOnce(obj, m)
		r.statusV1(obj["status"])
	})
}

// UpstreamReads returns why upstream orchestratord's typed reader would
// refuse obj, a whole Materialize of its apiVersion as the API server
// returns it, or nil: an object it refuses is one upstream cannot reconcile
// (docs/migrating-from-orchestratord.md, "What upstream finds").
func UpstreamReads(obj map[string]any) error {
	var err error
	switch v, _ := obj["apiVersion"].(string); v {
	case V1Alpha1:
		err = readV1alpha1(obj, nil)
	case V1:
		err = readV1(obj, nil)
	default:
		return fmt.Errorf("apiVersion %q is not a Materialize version", echo(v))
	}
	if err != nil {
		return err
	}
	_, err = UpstreamSpecJSON(obj["spec"].(map[string]any))
	return err
}

// metadata: kube's derived resource types require metadata, a
// k8s-openapi ObjectMeta, which reads each field it knows by its type.
func (w *serdeWriter) metadata(obj map[string]any) {
	w.field("metadata")
	if meta := obj["metadata"]; meta == nil {
		w.fail("required")
	} else {
		objectMeta(w, meta)
	}
	w.endField()
}

// metadataOnce reads metadata unless m already has: it is the first
// field read, so the error it leaves is metadata's alone.
func (w *serdeWriter) metadataOnce(obj map[string]any, m *memo) {
	switch {
	case m == nil:
		w.metadata(obj)
	case m.metadataRead:
		if m.metadataErr != nil {
			w.err = m.metadataErr
		}
	default:
		w.metadata(obj)
		m.metadataRead, m.metadataErr = true, w.err
	}
}

// readers are serdeWriters that check and write nothing: every conversion
// reads its object once or twice.
var readers = sync.Pool{New: func() any {
	return &serdeWriter{discard: true, path: make([]pathStep, 0, 8), comma: make([]bool, 0, 8)}
}}

// readWith reads with a reader from the pool, in an object (a Materialize's
// fields), and returns the first error.
func readWith(read func(r *serdeWriter)) error {
	r := readers.Get().(*serdeWriter)
	r.beginObject()
	read(r)
	r.endObject()
	err := r.err
	r.reset()
	readers.Put(r)
	return err
}

// reset empties a pooled writer for its next use. The path's keys may be
// a request's (a map's keys share its body): none is kept past it.
func (w *serdeWriter) reset() {
	clear(w.path[:cap(w.path)])
	w.buf, w.err, w.path, w.comma = w.buf[:0], nil, w.path[:0], w.comma[:0]
}

// objectMeta is k8s-openapi's ObjectMeta: every field optional, null as
// absent, unknown fields ignored.
var objectMeta = structOf(
	structField{"annotations", false, stringMap},
	structField{"creationTimestamp", false, (*serdeWriter).time},
	structField{"deletionGracePeriodSeconds", false, (*serdeWriter).int64},
	structField{"deletionTimestamp", false, (*serdeWriter).time},
	structField{"finalizers", false, strs},
	structField{"generateName", false, (*serdeWriter).string},
	structField{"generation", false, (*serdeWriter).int64},
	structField{"labels", false, stringMap},
	structField{"managedFields", false, listOf(structOf( // ManagedFieldsEntry
		structField{"apiVersion", false, (*serdeWriter).string},
		structField{"fieldsType", false, (*serdeWriter).string},
		structField{"fieldsV1", false, func(*serdeWriter, any) {}}, // any JSON value
		structField{"manager", false, (*serdeWriter).string},
		structField{"operation", false, (*serdeWriter).string},
		structField{"subresource", false, (*serdeWriter).string},
		structField{"time", false, (*serdeWriter).time}))},
	structField{"name", false, (*serdeWriter).string},
	structField{"namespace", false, (*serdeWriter).string},
	structField{"ownerReferences", false, listOf(structOf( // OwnerReference
		structField{"apiVersion", true, (*serdeWriter).string},
		structField{"blockOwnerDeletion", false, (*serdeWriter).bool},
		structField{"controller", false, (*serdeWriter).bool},
		structField{"kind", true, (*serdeWriter).string},
		structField{"name", true, (*serdeWriter).string},
		structField{"uid", true, (*serdeWriter).string}))},
	structField{"resourceVersion", false, (*serdeWriter).string},
	structField{"selfLink", false, (*serdeWriter).string},
	structField{"uid", false, (*serdeWriter).string})

// statusV1alpha1 reads v1alpha1's MaterializeStatus: an Option, so null or
// absent is fine.
func (w *serdeWriter) statusV1alpha1(v any) {
	st := w.beginStatus(v)
	if st == nil {
		return
	}
	w.requiredString(st, "resourceId")
	w.requiredField(st, "activeGeneration", (*serdeWriter).uint64)
	w.requiredField(st, "lastCompletedRolloutRequest", (*serdeWriter).uuid)
	w.option(st, "lastCompletedRolloutEnvironmentdImageRef", (*serdeWriter).string)
	w.requiredString(st, "resourcesHash")
	w.option(st, "lastCompletedRolloutHash", (*serdeWriter).string)
	w.requiredField(st, "conditions", conditions)
	w.endStatus()
}

// statusV1 reads v1's MaterializeStatus.
func (w *serdeWriter) statusV1(v any) {
	st := w.beginStatus(v)
	if st == nil {
		return
	}
	w.requiredString(st, "resourceId")
	w.requiredField(st, "activeGeneration", (*serdeWriter).uint64)
	w.option(st, "lastCompletedRolloutEnvironmentdImageRef", (*serdeWriter).string)
	w.option(st, "lastCompletedRolloutHash", (*serdeWriter).string)
	w.option(st, "requestedRolloutHash", (*serdeWriter).string)
	w.requiredField(st, "conditions", conditions)
	w.endStatus()
}

// beginStatus opens the status field and returns its fields, or nil when
// there are none to read (absent, null, or not an object, an error).
func (w *serdeWriter) beginStatus(v any) map[string]any {
	w.field("status")
	st, ok := v.(map[string]any)
	if !ok {
		if v != nil {
			w.fail("must be an object")
		}
		w.endField()
		return nil
	}
	w.beginObject()
	return st
}

func (w *serdeWriter) endStatus() {
	w.endObject()
	w.endField()
}

// conditions is a list of k8s-openapi's meta/v1 Condition: a missing
// required string is read as "", but lastTransitionTime, a Time, has no
// default: it must be there, an RFC 3339 timestamp. observedGeneration is
// an Option<i64>.
var conditions = listOf(func(w *serdeWriter, v any) {
	if c, ok := v.(map[string]any); ok && c["lastTransitionTime"] == nil {
		w.fail("lastTransitionTime: required")
		return
	}
	w.omitting(v, conditionFields)
})

var conditionFields = []structField{
	{"lastTransitionTime", true, (*serdeWriter).time},
	{"message", true, (*serdeWriter).string},
	{"observedGeneration", false, (*serdeWriter).int64},
	{"reason", true, (*serdeWriter).string},
	{"status", true, (*serdeWriter).string},
	{"type", true, (*serdeWriter).string},
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
