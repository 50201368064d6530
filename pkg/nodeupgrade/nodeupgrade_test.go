package nodeupgrade

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/materializeinc/orchestratord/pkg/conversion"
)

func pod(ns, name, node string, lbls map[string]string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}, Spec: corev1.PodSpec{NodeName: node}}
}

func dataPlane(app, mzNamespace, mzName string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": app, "materialize.cloud/organization-name": mzName, "materialize.cloud/organization-namespace": mzNamespace}
}

// The selector is upstream's, byte for byte, and selects what upstream's
// does.
func TestPodSelector(t *testing.T) {
	const upstream = "app.kubernetes.io/name in (environmentd,clusterd),materialize.cloud/organization-name,materialize.cloud/organization-namespace"
	if PodSelector != upstream {
		t.Fatalf("PodSelector %q, upstream's %q", PodSelector, upstream)
	}
	sel, err := labels.Parse(PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	for lbls, want := range map[*map[string]string]bool{
		ptr(dataPlane("environmentd", "ns", "mz")):                   true,
		ptr(dataPlane("clusterd", "ns", "mz")):                       true,
		ptr(dataPlane("balancerd", "ns", "mz")):                      false,
		ptr(dataPlane("console", "ns", "mz")):                        false,
		ptr(map[string]string{"app.kubernetes.io/name": "clusterd"}): false,
	} {
		if got := sel.Matches(labels.Set(*lbls)); got != want {
			t.Errorf("%v: %v, want %v", *lbls, got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestAddAffected(t *testing.T) {
	now := metav1.Now()
	terminating := pod("a", "old", "blue-1", dataPlane("environmentd", "a", "mz-a"))
	terminating.DeletionTimestamp = &now
	succeeded := pod("a", "done", "blue-1", dataPlane("clusterd", "a", "mz-a"))
	succeeded.Status.Phase = corev1.PodSucceeded
	pods := []corev1.Pod{
		pod("a", "env", "blue-1", dataPlane("environmentd", "a", "mz-a")),
		pod("a", "c1", "blue-2", dataPlane("clusterd", "a", "mz-a")),
		pod("a", "c2", "blue-2", dataPlane("clusterd", "a", "mz-a")),
		pod("a", "c3", "green-1", dataPlane("clusterd", "a", "mz-a")),
		pod("b", "c1", "green-1", dataPlane("clusterd", "b", "mz-b")),
		terminating,
		pod("c", "env", "", dataPlane("environmentd", "c", "mz-c")), // not scheduled
		// Only a terminating pod on the nodes: nothing to move.
		func() corev1.Pod {
			p := terminating
			p.Namespace, p.Labels = "d", dataPlane("environmentd", "d", "mz-d")
			return p
		}(),
		succeeded,
		// A pod naming another namespace's Materialize.
		pod("e", "c1", "blue-1", dataPlane("clusterd", "b", "mz-b")),
		pod("f", "c1", "blue-1", dataPlane("clusterd", "f", "")),
	}
	out := map[Instance][]string{}
	addAffected(out, pods, map[string]bool{"blue-1": true, "blue-2": true})
	for _, nodes := range out {
		sort.Strings(nodes)
	}
	want := map[Instance][]string{{Namespace: "a", Name: "mz-a"}: {"blue-1", "blue-2"}}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("affected %v, want %v", out, want)
	}
}

// storedMaterialize is a v1alpha1 Materialize as the API server returns it.
func storedMaterialize(t *testing.T, request, lastCompleted string, annotations map[string]string) []byte {
	t.Helper()
	obj := map[string]any{
		"apiVersion": "materialize.cloud/v1alpha1", "kind": "Materialize",
		"metadata": map[string]any{"name": "mz", "namespace": "ns", "resourceVersion": "42", "annotations": annotations},
		"spec": map[string]any{
			"environmentdImageRef": "materialize/environmentd:v26.1.0", "backendSecretName": "backend",
			"requestRollout":                   request,
			"environmentdResourceRequirements": map[string]any{"limits": map[string]any{"cpu": json.Number("2"), "memory": "4Gi"}},
		},
		"status": map[string]any{"lastCompletedRolloutRequest": lastCompleted, "resourcesHash": ""},
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestReadState(t *testing.T) {
	const a, b = "0b8f0e6f-6f35-4e8c-9d7e-2a3a3c4c1f10", "9d1a6e61-2b4f-4c55-8a0a-4f8b2f0a6c22"
	for name, tc := range map[string]struct {
		request, last string
		inProgress    bool
	}{
		"completed":                 {a, a, false},
		"completed, other spelling": {a, "{" + a + "}", false},
		"requested":                 {b, a, true},
		"never completed":           {a, "", true},
		"nothing requested":         {"", "", false},
	} {
		s, err := readState(storedMaterialize(t, tc.request, tc.last, nil))
		if err != nil {
			t.Fatal(err)
		}
		if s.rolloutInProgress != tc.inProgress {
			t.Errorf("%s: in progress %v, want %v", name, s.rolloutInProgress, tc.inProgress)
		}
	}
}

// A spec the Go types cannot read (a quantity the CRD's pattern admits
// and Go refuses) does not stop the trigger: it decides on the request,
// the last completed one, the deletion and its own record only.
func TestReadStateOfAnUnreadableSpec(t *testing.T) {
	const a, b = "0b8f0e6f-6f35-4e8c-9d7e-2a3a3c4c1f10", "9d1a6e61-2b4f-4c55-8a0a-4f8b2f0a6c22"
	stored := []byte(`{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize",
		"metadata":{"name":"mz","namespace":"ns","deletionTimestamp":"2026-12-06T12:00:00Z"},
		"spec":{"requestRollout":"` + b + `","environmentdResourceRequirements":{"limits":{"memory":"1e1.5"}}},
		"status":{"lastCompletedRolloutRequest":"` + a + `"}}`)
	s, err := readState(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !s.rolloutInProgress || !s.deleting {
		t.Errorf("state %+v, want a rollout in progress and the object deleting", s)
	}
	// Settled, not deleting, triggered before: the record is read, and the
	// patch (the v1 rollout hash of the raw object) is made.
	settled := []byte(`{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize",
		"metadata":{"name":"mz","namespace":"ns","resourceVersion":"7",
			"annotations":{"` + TriggerAnnotation + `":"{\"scope\":\"pool-a\",\"at\":\"2026-12-06T12:00:00Z\"}"}},
		"spec":{"environmentdImageRef":"materialize/environmentd:v26.1.0","backendSecretName":"backend","requestRollout":"` + a + `",
			"environmentdResourceRequirements":{"limits":{"memory":"1e1.5"}}},
		"status":{"lastCompletedRolloutRequest":"` + a + `"}}`)
	if s, err = readState(settled); err != nil || s.rolloutInProgress || s.deleting || s.triggered == nil || s.triggered.Scope != "pool-a" {
		t.Errorf("settled state %+v (triggered %+v), error %v; want settled, not deleting, triggered by pool-a", s, s.triggered, err)
	}
	if _, err := forceRolloutPatch(settled, "x", triggerRecord{Scope: "pool-b", At: time.Now()}); err != nil {
		t.Errorf("no forced rollout for an unreadable spec: %v", err)
	}
}

// The patch leaves the stored object as upstream's v1 patch leaves it
// through the conversion: the annotation set, and requestRollout the one
// the conversion derives from the new v1 rollout hash.
func TestForceRolloutPatch(t *testing.T) {
	const request = "0b8f0e6f-6f35-4e8c-9d7e-2a3a3c4c1f10"
	stored := storedMaterialize(t, request, request, map[string]string{"keep": "me"})
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	patch, err := forceRolloutPatch(stored, "value-1", triggerRecord{Scope: "pool-a", At: at})
	if err != nil {
		t.Fatal(err)
	}
	patched, err := jsonpatch.MergePatch(stored, patch)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Metadata struct {
			ResourceVersion string            `json:"resourceVersion"`
			Annotations     map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			RequestRollout string `json:"requestRollout"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(patched, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.Metadata.ResourceVersion != "42" {
		t.Errorf("the patch is not conditional on the resourceVersion read: %q", obj.Metadata.ResourceVersion)
	}
	if want := map[string]string{"keep": "me", ForceRolloutAnnotation: "value-1",
		TriggerAnnotation: `{"scope":"pool-a","at":"2026-12-04T10:00:00Z"}`}; !reflect.DeepEqual(obj.Metadata.Annotations, want) {
		t.Errorf("annotations %v, want %v", obj.Metadata.Annotations, want)
	}
	hash, err := conversion.V1RolloutHash(patched, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := conversion.RolloutRequest(hash); obj.Spec.RequestRollout != want {
		t.Errorf("requestRollout %q, the conversion derives %q", obj.Spec.RequestRollout, want)
	}
	before, err := conversion.V1RolloutHash(stored, nil)
	if err != nil {
		t.Fatal(err)
	}
	if before == hash || obj.Spec.RequestRollout == request {
		t.Error("the annotation did not change the rollout hash or the request")
	}
	s, err := readState(patched)
	if err != nil || !s.rolloutInProgress {
		t.Errorf("after the patch a rollout is not in progress: %+v %v", s, err)
	}
	// The next leader reads what was triggered.
	if s.triggered == nil || s.triggered.Scope != "pool-a" || !s.triggered.At.Equal(at) {
		t.Errorf("the trigger recorded on the object: %+v, want pool-a at %v", s.triggered, at)
	}
	// Another value, another request.
	patch2, err := forceRolloutPatch(stored, "value-2", triggerRecord{Scope: "pool-a", At: at})
	if err != nil {
		t.Fatal(err)
	}
	if string(patch2) == string(patch) {
		t.Error("two values, one patch")
	}
}
