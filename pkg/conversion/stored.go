package conversion

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
)

// ReadStored reads a Materialize as the API server stores it (v1alpha1
// JSON, through a v1alpha1 REST client): what its rollout hash covers,
// which a typed copy loses (empty maps and lists, quantities as written).
// Decisions that compare with the rollout hash v1 clients see, or write
// one, start here and hash with V1RolloutHash.
func ReadStored(ctx context.Context, v1alpha1 rest.Interface, namespace, name string) ([]byte, error) {
	return v1alpha1.Get().Namespace(namespace).Resource("materializes").Name(name).DoRaw(ctx)
}

// V1RolloutHash is the rollout hash v1 clients see (status.requestedRolloutHash
// at v1, which they put in spec.forcePromote to approve a ManuallyPromote
// rollout) for a stored Materialize (ReadStored), with annotations set on it
// first: the hash it would have once they were written (the force-rollout
// annotation a node upgrade writes).
func V1RolloutHash(stored []byte, annotations map[string]string) (string, error) {
	v, err := decodeValue(stored)
	if err != nil {
		return "", err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", fmt.Errorf("a Materialize must be a JSON object")
	}
	obj["apiVersion"], obj["kind"] = V1Alpha1, "Materialize"
	if len(annotations) > 0 {
		meta, _ := obj["metadata"].(map[string]any)
		if meta == nil {
			return "", fmt.Errorf("the Materialize has no metadata")
		}
		set := map[string]any{}
		if old, ok := meta["annotations"].(map[string]any); ok {
			for k, v := range old {
				set[k] = v
			}
		}
		for k, v := range annotations {
			set[k] = v
		}
		meta["annotations"] = set
	}
	converted, err := Convert(obj, V1)
	if err != nil {
		return "", err
	}
	hash, ok := rolloutHashOf(converted)
	if !ok {
		return "", fmt.Errorf("the Materialize has no rollout hash: upstream's types cannot read its spec")
	}
	return hash, nil
}
