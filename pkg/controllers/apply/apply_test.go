package apply

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

func TestSubset(t *testing.T) {
	got := map[string]any{"a": 1.0, "b": map[string]any{"c": "x", "d": []any{1.0, 2.0}}, "e": true}
	cases := []struct {
		want any
		ok   bool
	}{
		{map[string]any{}, true},
		{map[string]any{"a": 1.0}, true},
		{map[string]any{"b": map[string]any{"c": "x"}}, true},
		{map[string]any{"b": map[string]any{"d": []any{1.0, 2.0}}}, true},
		{map[string]any{"b": map[string]any{"d": []any{1.0}}}, false},
		{map[string]any{"a": 2.0}, false},
		{map[string]any{"z": nil}, false},
		{map[string]any{"b": "x"}, false},
	}
	for i, tc := range cases {
		if Subset(tc.want, got) != tc.ok {
			t.Errorf("case %d: Subset(%v) = %v, want %v", i, tc.want, !tc.ok, tc.ok)
		}
	}
}

// A cached stub is judged by its digest: equal to the desired
// configuration's, nothing is written; different, the write happens.
func TestObjectComparesStubsByDigest(t *testing.T) {
	desired := corev1ac.ConfigMap("c", "ns").WithData(map[string]string{"a": "1"})
	digest, err := Digest(desired)
	if err != nil {
		t.Fatal(err)
	}
	extract := func(*corev1.ConfigMap, string) (*corev1ac.ConfigMapApplyConfiguration, error) {
		t.Fatal("a stub's owned fields must not be extracted again")
		return nil, nil
	}
	for _, tc := range []struct {
		digest    string
		wantWrite bool
	}{{digest, false}, {"other", true}} {
		live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns",
			Annotations: map[string]string{OwnedDigestAnnotation: tc.digest}}}
		wrote := false
		write := func(context.Context, *corev1ac.ConfigMapApplyConfiguration, metav1.ApplyOptions) (*corev1.ConfigMap, error) {
			wrote = true
			return live, nil
		}
		got, err := Object(context.Background(), live, true, desired, extract, write)
		if err != nil || got != tc.wantWrite || wrote != tc.wantWrite {
			t.Errorf("stub digest %q: wrote %v (reported %v, %v), want %v", tc.digest, wrote, got, err, tc.wantWrite)
		}
	}
}

// Only a stub the cache made has a digest: an object from the API server
// with the annotation written on it and its managedFields emptied still
// has its creation timestamp.
func TestCachedDigestRefusesAPIObjects(t *testing.T) {
	stub := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{OwnedDigestAnnotation: "d"}}}
	if d, ok := CachedDigest(stub); !ok || d != "d" {
		t.Errorf("stub: %q, %v", d, ok)
	}
	forged := stub.DeepCopy()
	forged.CreationTimestamp = metav1.Now()
	if _, ok := CachedDigest(forged); ok {
		t.Error("an object with a creation timestamp passed for a stub")
	}
	forged = stub.DeepCopy()
	forged.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
	if _, ok := CachedDigest(forged); ok {
		t.Error("an object with managedFields passed for a stub")
	}
}

// A cached object's digest stands for its main resource's fields: the
// status check extracts the status instead.
func TestStatusDoesNotCompareTheDigest(t *testing.T) {
	live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{OwnedDigestAnnotation: "of the main resource"}},
		Data: map[string]string{"a": "1"}}
	owned := func(l *corev1.ConfigMap, _ string) (*corev1ac.ConfigMapApplyConfiguration, error) {
		return corev1ac.ConfigMap(l.Name, l.Namespace).WithData(l.Data), nil
	}
	writes := 0
	write := func(context.Context, *corev1ac.ConfigMapApplyConfiguration, metav1.ApplyOptions) (*corev1.ConfigMap, error) {
		writes++
		return live, nil
	}
	desired := corev1ac.ConfigMap("c", "").WithData(map[string]string{"a": "1"})
	if wrote, err := Status(context.Background(), live, desired, owned, write); err != nil || wrote {
		t.Errorf("Status of a held status: wrote %v, %v", wrote, err)
	}
	if wrote, err := Object(context.Background(), live, true, desired, owned, write); err != nil || !wrote {
		t.Errorf("Object compares the digest, which differs: wrote %v, %v", wrote, err)
	}
	if wrote, err := Status(context.Background(), live, desired.WithData(map[string]string{"a": "2"}), owned, write); err != nil || !wrote || writes != 2 {
		t.Errorf("Status of a changed status: wrote %v, %v (%d writes)", wrote, err, writes)
	}
}
