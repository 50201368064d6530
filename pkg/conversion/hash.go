package conversion

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/google/uuid"

	v1 "github.com/materializeinc/orchestratord/pkg/apis/materialize/v1"
)

// ForceRolloutAnnotation's value goes into the rollout hash, so changing it
// rolls out a new generation without touching the spec.
const ForceRolloutAnnotation = "materialize.cloud/force-rollout"

// RolloutHash is the v1 rollout hash: SHA-256 of the canonical JSON of the
// spec without the fields that do not need a new environmentd generation,
// followed by the force-rollout annotation's value when present.
func RolloutHash(spec v1.MaterializeSpec, annotations map[string]string) string {
	spec.BalancerdResourceRequirements = nil
	spec.ConsoleResourceRequirements = nil
	spec.BalancerdReplicas = nil
	spec.ConsoleReplicas = nil
	spec.ForcePromote = nil
	spec.BalancerdExternalCertificateSpec = nil
	spec.ConsoleExternalCertificateSpec = nil
	// Marshalling a struct of plain types cannot fail; map keys come out sorted.
	canonical, _ := json.Marshal(spec)
	h := sha256.New()
	h.Write(canonical)
	if force, ok := annotations[ForceRolloutAnnotation]; ok {
		h.Write([]byte(force))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// RolloutRequest is the v1alpha1 requestRollout that stands for a v1 rollout
// hash: a name-based UUID, so re-applying an unchanged v1 spec maps to the
// same request and never triggers a rollout.
func RolloutRequest(rolloutHash string) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(rolloutHash)).String()
}
