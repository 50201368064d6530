package servingcert

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CRDCABundle keeps a CRD's conversion webhook caBundle equal to a bundle.
type CRDCABundle struct {
	Client  apiextensionsclient.Interface
	CRDName string
}

// Ensure writes bundle into the CRD's caBundle unless it is already there,
// and returns the caBundle the CRD now has. The patch is conditional on the
// resourceVersion read, so concurrent replicas cannot interleave writes.
func (c *CRDCABundle) Ensure(ctx context.Context, bundle []byte) ([]byte, error) {
	crd, err := c.Client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.CRDName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading CRD %s: %w", c.CRDName, err)
	}
	conv := crd.Spec.Conversion
	if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return nil, fmt.Errorf("CRD %s has no conversion webhook clientConfig to put a caBundle in", c.CRDName)
	}
	current := conv.Webhook.ClientConfig.CABundle
	if bytes.Equal(current, bundle) {
		return current, nil
	}
	patch, _ := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": crd.ResourceVersion},
		{"op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle", "value": base64.StdEncoding.EncodeToString(bundle)},
	})
	if _, err := c.Client.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, c.CRDName, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return current, fmt.Errorf("writing caBundle of CRD %s: %w", c.CRDName, err)
	}
	return bundle, nil
}
