// Package children holds what every reconciler's child objects share: the
// resource id, names and owner references.
package children

import (
	"crypto/rand"
	"math/big"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

const (
	// ResourceIDLabel marks every child object; informers watch only
	// objects that carry it, so memory does not grow with the cluster.
	ResourceIDLabel = "materialize.cloud/mz-resource-id"
	// NameLabel selects a component's pods (upstream's).
	NameLabel = "materialize.cloud/name"
)

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// NewResourceID returns a random 10-character [a-z0-9] identifier.
func NewResourceID() string {
	b := make([]byte, 10)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(idAlphabet))))
		if err != nil {
			panic(err) // crypto/rand does not fail on Linux
		}
		b[i] = idAlphabet[n.Int64()]
	}
	return string(b)
}

// Name is mz{resourceID}-{suffix}.
func Name(resourceID, suffix string) string { return "mz" + resourceID + "-" + suffix }

// OwnerReference makes owner the controlling owner of a child, so garbage
// collection removes the child with it and deletion waits for the child.
func OwnerReference(owner metav1.Object, gvk schema.GroupVersionKind) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(gvk.GroupVersion().String()).WithKind(gvk.Kind).
		WithName(owner.GetName()).WithUID(owner.GetUID()).
		WithController(true).WithBlockOwnerDeletion(true)
}

// UnstructuredOwner is OwnerReference in unstructured form, for
// objects written through the dynamic client.
func UnstructuredOwner(owner metav1.Object, gvk schema.GroupVersionKind) []any {
	return []any{map[string]any{
		"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
		"name": owner.GetName(), "uid": string(owner.GetUID()),
		"controller": true, "blockOwnerDeletion": true,
	}}
}
