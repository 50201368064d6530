package apply

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The owned part of a Certificate is what this operator applied, without
// what others wrote (cert-manager's status, another manager's fields), so
// a field removed from the desired Certificate is a difference.
func TestOwnedFields(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{"name": "c", "namespace": "n"},
		"spec":     map[string]any{"duration": "2160h", "secretName": "s", "other": "x"},
		"status":   map[string]any{"ready": true},
	}}
	fields := func(raw string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(raw)} }
	live.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
			FieldsV1: fields(`{"f:spec":{"f:duration":{},"f:secretName":{}}}`)},
		{Manager: "someone", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: fields(`{"f:spec":{"f:other":{}}}`)},
	})
	owned, err := ownedFields(live, FieldManager)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(owned.Object)
	want := `{"apiVersion":"cert-manager.io/v1","kind":"Certificate","metadata":{"name":"c","namespace":"n"},"spec":{"duration":"2160h","secretName":"s"}}`
	if string(got) != want {
		t.Errorf("owned\n got %s\nwant %s", got, want)
	}
}
