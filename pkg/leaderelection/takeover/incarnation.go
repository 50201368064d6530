// Package takeover lets a standby take a Lease over from a holder whose
// process has terminated, before the Lease expires: the holder names its
// process on the Lease (an Incarnation), and a standby follows that
// process's pod until the kubelet reports it terminated (Follower).
package takeover

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// HolderAnnotation is set on a Lease by its holder: which process holds it
// (an Incarnation), so that a standby can tell from the kubelet's report
// that this very process has terminated and take over before the Lease
// expires (docs/leader-election.md, "Crash failover").
const HolderAnnotation = "orchestratord.materialize.cloud/holder"

// terminationPrefix starts the termination message an Incarnation writes.
const terminationPrefix = "orchestratord incarnation "

// Incarnation is one life of a controllers process: a random id written to
// its container's termination message file at start. The kubelet reads that
// file only once the container has terminated and reports it in the
// container's (last) terminated state, so a status carrying the id proves
// that this process is dead. Nothing else about the status is trusted: not
// restart counts (a status read at start may still describe the previous
// container) nor timestamps (clocks step).
type Incarnation struct {
	// Namespace, Pod and UID name the pod the process runs in; UID tells
	// a later pod of the same name (a StatefulSet's) apart.
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
	// ID is random, per process start.
	ID string `json:"incarnation"`
}

// NewIncarnation draws an id and writes it to the termination message file
// at path (a container's terminationMessagePath, policy File). Without a
// pod name and UID, or a writable file, there is no incarnation: standbys
// then take this process's Leases over only once they expire.
func NewIncarnation(namespace, pod, uid, path string) (*Incarnation, error) {
	if namespace == "" || pod == "" || uid == "" || path == "" {
		return nil, errors.New("no pod namespace, name, UID or termination message path")
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	inc := &Incarnation{Namespace: namespace, Pod: pod, UID: uid, ID: hex.EncodeToString(b[:])}
	if err := os.WriteFile(path, []byte(inc.TerminationMessage()), 0o644); err != nil {
		return nil, fmt.Errorf("writing the termination message: %w", err)
	}
	return inc, nil
}

// TerminationMessage is what NewIncarnation writes to the termination
// message file, and so what the kubelet reports once the process is dead.
func (i *Incarnation) TerminationMessage() string { return terminationPrefix + i.ID + "\n" }

// Annotation is the value of HolderAnnotation naming this process.
func (i *Incarnation) Annotation() string {
	b, _ := json.Marshal(i) // strings only: cannot fail
	return string(b)
}

// ParseHolder reads a Lease's HolderAnnotation. It counts only for the
// holder it names: a claim of a crashed holder's Lease carries the
// claimant's annotation, but a Lease claimed some other way may still carry
// its previous holder's.
func ParseHolder(annotations map[string]string, holderIdentity string) (*Incarnation, bool) {
	raw, ok := annotations[HolderAnnotation]
	if !ok || len(raw) > 1024 {
		return nil, false
	}
	var inc Incarnation
	if err := json.Unmarshal([]byte(raw), &inc); err != nil || inc.Pod != holderIdentity || inc.ID == "" || inc.UID == "" || inc.Namespace == "" {
		return nil, false
	}
	return &inc, true
}

// TerminatedIn tells whether the kubelet reports, in pod, a container that
// terminated with this incarnation's message: the process is dead. The pod
// must be the one the incarnation ran in (same UID).
func (i *Incarnation) TerminatedIn(pod *corev1.Pod) bool {
	if pod == nil || string(pod.UID) != i.UID {
		return false
	}
	want := terminationPrefix + i.ID
	terminated := func(s *corev1.ContainerStateTerminated) bool {
		return s != nil && strings.HasPrefix(s.Message, want)
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for _, s := range statuses {
			if terminated(s.State.Terminated) || terminated(s.LastTerminationState.Terminated) {
				return true
			}
		}
	}
	return false
}
