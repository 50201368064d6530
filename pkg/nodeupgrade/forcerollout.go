package nodeupgrade

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/conversion"
	"github.com/materializeinc/orchestratord/pkg/mzuuid"
)

// ForceRolloutAnnotation is upstream's: its value goes into the v1 rollout
// hash, so a new value requests a new generation without touching the spec
// (which infrastructure-as-code tools own and would fight over).
const ForceRolloutAnnotation = conversion.ForceRolloutAnnotation

// TriggerAnnotation records on a Materialize the last rollout a node
// trigger requested: its scope and when. A new leader of the materialize
// Lease reads it, so a failover neither triggers a Materialize twice in
// one scope nor within the cooldown. It is not part of the rollout hash.
const TriggerAnnotation = "orchestratord.materialize.cloud/node-trigger"

// triggerRecord is TriggerAnnotation's value.
type triggerRecord struct {
	Scope string    `json:"scope"`
	At    time.Time `json:"at"`
	// By is the Trigger that wrote it (a random id per Trigger, so per
	// process): any other's record is one this Trigger does not remember.
	By string `json:"by,omitempty"`
}

// maxTriggerRecordBytes bounds what of the annotation is read: a tenant can
// write it (and so only hold back its own Materialize's trigger).
const maxTriggerRecordBytes = 1 << 10

// state is what decides whether a Materialize may be triggered.
type state struct {
	deleting          bool
	rolloutInProgress bool
	// triggered is the last trigger recorded on it, if any.
	triggered *triggerRecord
}

func readState(stored []byte) (state, error) {
	// Only the fields decided on: a spec the Go types cannot read (a
	// quantity such as 1e1.5, which the CRD admits) failed the whole
	// decode, and the trigger with it, on every scan.
	var mz struct {
		Metadata struct {
			DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
			Annotations       map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			RequestRollout string `json:"requestRollout"`
		} `json:"spec"`
		Status struct {
			LastCompletedRolloutRequest string `json:"lastCompletedRolloutRequest"`
		} `json:"status"`
	}
	if err := json.Unmarshal(stored, &mz); err != nil {
		return state{}, fmt.Errorf("decoding the Materialize: %w", err)
	}
	st := state{
		deleting: mz.Metadata.DeletionTimestamp != nil,
		// Upstream's rollout_requested, with UUIDs compared as upstream
		// reads them (absent is the nil UUID).
		rolloutInProgress: mzuuid.Value(mz.Spec.RequestRollout) != mzuuid.Value(mz.Status.LastCompletedRolloutRequest),
	}
	if raw, ok := mz.Metadata.Annotations[TriggerAnnotation]; ok && len(raw) <= maxTriggerRecordBytes {
		var rec triggerRecord
		if json.Unmarshal([]byte(raw), &rec) == nil && !rec.At.IsZero() {
			st.triggered = &rec
		}
	}
	return st, nil
}

// forceRolloutPatch is the merge patch that leaves the stored (v1alpha1)
// Materialize as upstream's trigger leaves it: upstream merge-patches the
// force-rollout annotation through the v1 endpoint, and the conversion to
// the storage version derives spec.requestRollout from the new rollout hash.
// This patch writes both at the storage version (the controllers never need
// the conversion webhook), with the resourceVersion it was computed on.
func forceRolloutPatch(stored []byte, value string, triggered triggerRecord) ([]byte, error) {
	var obj struct {
		Metadata *struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(stored, &obj); err != nil {
		return nil, fmt.Errorf("decoding the Materialize: %w", err)
	}
	if obj.Metadata == nil {
		return nil, fmt.Errorf("the Materialize has no metadata")
	}
	hash, err := conversion.V1RolloutHash(stored, map[string]string{ForceRolloutAnnotation: value})
	if err != nil {
		return nil, fmt.Errorf("computing the v1 rollout hash: %w", err)
	}
	record, err := json.Marshal(triggered)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": obj.Metadata.ResourceVersion,
			"annotations":     map[string]string{ForceRolloutAnnotation: value, TriggerAnnotation: string(record)},
		},
		"spec": map[string]any{"requestRollout": conversion.RolloutRequest(hash)},
	})
}
