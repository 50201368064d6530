package conversion

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/google/uuid"
)

// ForceRolloutAnnotation's value goes into the rollout hash, so changing it
// rolls out a new generation without touching the spec.
const ForceRolloutAnnotation = "materialize.cloud/force-rollout"

// RolloutHash is upstream orchestratord's rollout hash of a v1 Materialize
// (generate_rollout_hash in upstream's crd/materialize.rs), byte for byte:
// SHA-256 of the spec as serde_json writes upstream's Rust v1 MaterializeSpec
// with the fields that need no new generation set to None, followed by the
// force-rollout annotation's value when present. Being identical is what
// lets a cluster switch operators without a rollout: the same spec maps to
// the same requestRollout under both.
//
// spec is the v1 spec as decoded JSON. The error says why upstream could not
// read the spec either (a missing required field, a malformed UUID, a value
// of the wrong type); such a spec has no hash.
func RolloutHash(spec map[string]any, annotations map[string]string) (string, error) {
	force, forced := annotations[ForceRolloutAnnotation]
	return hashSpec(spec, force, forced)
}

// specWriters write the documents hashed: every conversion hashes one and
// drops it at once, so the writer and its buffer are reused.
var specWriters = sync.Pool{New: func() any { return newSpecWriter(nil) }}

func newSpecWriter(buf []byte) *serdeWriter {
	// The stacks are as deep as the spec.
	return &serdeWriter{buf: buf, root: "spec.", path: make([]pathStep, 0, 8), comma: make([]bool, 0, 8)}
}

func hashSpec(spec map[string]any, force string, forced bool) (string, error) {
	w := specWriters.Get().(*serdeWriter)
	defer func() {
		// A buffer grown by an outsized spec is not kept for the next.
		if cap(w.buf) <= 64<<10 {
			w.reset()
			specWriters.Put(w)
		}
	}()
	w.upstreamSpec(spec)
	if w.err != nil {
		return "", w.err
	}
	// The annotation's value follows the document: one Sum256, no digest
	// allocated.
	if forced {
		w.buf = append(w.buf, force...)
	}
	sum := sha256.Sum256(w.buf)
	var text [2 * sha256.Size]byte
	hex.Encode(text[:], sum[:])
	return string(text[:]), nil
}

// UpstreamSpecJSON is the document RolloutHash hashes. serde_json writes
// every field of the Rust struct in declaration order: an absent Option as
// null, an absent #[serde(default)] field as its default. Nested Kubernetes
// types (k8s-openapi) and cert-manager types (kopium) omit absent fields
// instead, and k8s-openapi writes fields in the alphabetical order of their
// Rust names. Fields upstream's types do not have are dropped, as serde
// ignores them.
func UpstreamSpecJSON(spec map[string]any) ([]byte, error) {
	doc, err := appendUpstreamSpecJSON(nil, spec)
	if err != nil {
		return nil, err
	}
	return doc, nil
}

func appendUpstreamSpecJSON(buf []byte, spec map[string]any) ([]byte, error) {
	w := newSpecWriter(buf)
	w.upstreamSpec(spec)
	return w.buf, w.err
}

func (w *serdeWriter) upstreamSpec(spec map[string]any) {
	w.beginObject()
	w.requiredString(spec, "environmentdImageRef")
	w.option(spec, "environmentdExtraArgs", strs)
	w.option(spec, "environmentdExtraEnv", envVars)
	w.option(spec, "environmentdConnectionRoleArn", (*serdeWriter).string)
	w.option(spec, "environmentdResourceRequirements", resourceRequirements)
	w.option(spec, "environmentdScratchVolumeStorageRequirement", (*serdeWriter).quantity)
	// Cleared by upstream before hashing: they do not change a
	// generation, but upstream's types must read them all the same.
	w.cleared(spec, "balancerdResourceRequirements", resourceRequirements)
	w.cleared(spec, "consoleResourceRequirements", resourceRequirements)
	w.cleared(spec, "balancerdReplicas", (*serdeWriter).int32)
	w.cleared(spec, "consoleReplicas", (*serdeWriter).int32)
	w.option(spec, "serviceAccountName", (*serdeWriter).string)
	w.option(spec, "serviceAccountAnnotations", stringMap)
	w.option(spec, "serviceAccountLabels", stringMap)
	w.option(spec, "podAnnotations", stringMap)
	w.option(spec, "podLabels", stringMap)
	w.cleared(spec, "forcePromote", (*serdeWriter).string)
	w.defaulted(spec, "forceRollout", nilUUID, (*serdeWriter).uuid)
	w.defaulted(spec, "rolloutStrategy", "WaitUntilReady", rolloutStrategy)
	w.defaulted(spec, "rolloutRequestTimeout", "24h", (*serdeWriter).string)
	w.requiredString(spec, "backendSecretName")
	w.defaulted(spec, "authenticatorKind", "None", authenticatorKind)
	w.defaulted(spec, "enableRbac", false, (*serdeWriter).bool)
	w.defaulted(spec, "environmentId", nilUUID, (*serdeWriter).uuid)
	w.option(spec, "systemParameterConfigmapName", (*serdeWriter).string)
	w.cleared(spec, "balancerdExternalCertificateSpec", (*serdeWriter).certSpec)
	w.cleared(spec, "consoleExternalCertificateSpec", (*serdeWriter).certSpec)
	w.option(spec, "internalCertificateSpec", (*serdeWriter).certSpec)
	w.endObject()
}

// RolloutRequest is the v1alpha1 requestRollout that stands for a v1 rollout
// hash: a name-based UUID, so re-applying an unchanged v1 spec maps to the
// same request and never triggers a rollout.
func RolloutRequest(rolloutHash string) string {
	// uuid.NewSHA1, with the hash input on the stack: every conversion to
	// v1alpha1 and every check of the way back computes one or two.
	var input [16 + 2*sha256.Size]byte
	sum := sha1.Sum(append(append(input[:0], uuid.NameSpaceOID[:]...), rolloutHash...))
	var u uuid.UUID
	copy(u[:], sum[:])
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}
