package apply

import (
	"context"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Patcher is a typed client's Patch.
type Patcher[T any] interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// InitialStatus applies a first status, given as JSON values, to the status
// subresource of the object with the resourceVersion it was decided on (so
// two writers cannot both assign one). It is a raw apply because the typed
// apply configurations cannot say "conditions: []", and upstream's typed
// readers require every field of a status, an empty list included: an
// object they cannot read is one upstream cannot reconcile after a switch
// back.
func InitialStatus[T any](ctx context.Context, client Patcher[T], typeMeta metav1.TypeMeta, object metav1.ObjectMeta, status map[string]any) (T, error) {
	patch, err := json.Marshal(map[string]any{
		"apiVersion": typeMeta.APIVersion, "kind": typeMeta.Kind,
		"metadata": map[string]any{"name": object.Name, "namespace": object.Namespace, "resourceVersion": object.ResourceVersion},
		"status":   status,
	})
	if err != nil {
		var zero T
		return zero, err
	}
	opts := Options()
	return client.Patch(ctx, object.Name, types.ApplyPatchType, patch,
		metav1.PatchOptions{FieldManager: opts.FieldManager, Force: &opts.Force}, "status")
}
