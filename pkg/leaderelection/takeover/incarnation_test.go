package takeover

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A pod of the same name but another UID (a StatefulSet's next pod, say)
// reporting the incarnation's message proves nothing about the holder.
func TestTerminatedInNeedsTheHoldersPod(t *testing.T) {
	inc := &Incarnation{Namespace: "ns", Pod: "p", UID: "uid-1", ID: "abc"}
	status := func(uid, message string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: message}}}}
		return p
	}
	for _, c := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{status("uid-1", terminationPrefix+"abc\n"), true},
		{status("uid-2", terminationPrefix+"abc\n"), false},
		{status("uid-1", terminationPrefix+"abd\n"), false},
		{status("uid-1", ""), false},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"}}, false}, // running, or silent
		{nil, false},
	} {
		if got := inc.TerminatedIn(c.pod); got != c.want {
			t.Errorf("TerminatedIn(%+v) = %v, want %v", c.pod, got, c.want)
		}
	}
	// An annotation counts only for the holder it names.
	ann := map[string]string{HolderAnnotation: inc.Annotation()}
	if _, ok := ParseHolder(ann, "p"); !ok {
		t.Error("annotation of holder p not read")
	}
	if _, ok := ParseHolder(ann, "q"); ok {
		t.Error("annotation of p read for holder q")
	}
}

// The file NewIncarnation writes is what TerminatedIn looks for.
func TestNewIncarnationWritesItsTerminationMessage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "termination-log")
	inc, err := NewIncarnation("ns", "p", "uid-1", path)
	if err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: string(written)}}}}
	if !inc.TerminatedIn(pod) {
		t.Errorf("a pod reporting the written message %q does not prove incarnation %s terminated", written, inc.ID)
	}
	if other, _ := NewIncarnation("ns", "p", "uid-1", path); other.TerminatedIn(&corev1.Pod{ObjectMeta: pod.ObjectMeta, Status: pod.Status}) {
		t.Error("a second incarnation is proven dead by the first one's message")
	}
	if _, err := NewIncarnation("ns", "p", "", path); err == nil {
		t.Error("an incarnation without a pod UID")
	}
}
