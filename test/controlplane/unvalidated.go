package controlplane

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/materializeinc/orchestratord/pkg/crds"
)

// crdEdits serialises the CRD changes of WithUpstreamQuantities, which
// tests may make at once.
var crdEdits sync.Mutex

// WithUpstreamQuantities runs write while the CRD named crdName serves its
// quantities as upstream's CRD does: an int-or-string, with no pattern and
// no length (k8s-openapi's Quantity schema), in maps of any size. What a
// tenant could have stored then, the operator must still cope with. write
// is retried while the API server still refuses a quantity (the new schema
// is served a moment after the update); the CRD is restored afterwards.
func (cp *ControlPlane) WithUpstreamQuantities(ctx context.Context, crdName string, write func() error) (err error) {
	crdEdits.Lock()
	defer crdEdits.Unlock()
	client, err := apiextensionsclient.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	defs := client.ApiextensionsV1().CustomResourceDefinitions()
	installed, err := defs.Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	lax := installed.DeepCopy()
	for i := range lax.Spec.Versions {
		if s := lax.Spec.Versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
			loosenQuantities(s.OpenAPIV3Schema)
		}
	}
	if _, err = defs.Update(ctx, lax, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("loosening the quantities of %s: %w", crdName, err)
	}
	defer func() {
		restoreErr := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			current, err := defs.Get(context.WithoutCancel(ctx), crdName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			restored := current.DeepCopy()
			restored.Spec = *installed.Spec.DeepCopy()
			_, err = defs.Update(context.WithoutCancel(ctx), restored, metav1.UpdateOptions{})
			return err
		})
		if restoreErr != nil && err == nil {
			err = fmt.Errorf("restoring the quantities of %s: %w", crdName, restoreErr)
		}
	}()
	var last error
	if pollErr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, startTimeout, true, func(context.Context) (bool, error) {
		last = write()
		if last != nil && (strings.Contains(last.Error(), crds.QuantityPattern) || strings.Contains(last.Error(), "Too long") || strings.Contains(last.Error(), "Too many")) {
			return false, nil // the tightened schema is still served
		}
		return true, nil
	}); pollErr != nil {
		return fmt.Errorf("the API server kept the tightened quantities of %s: %w", crdName, last)
	}
	return last
}

// loosenQuantities gives the quantities under s, and their maps, upstream's
// schema.
func loosenQuantities(s *apiextensionsv1.JSONSchemaProps) {
	if s.XIntOrString && s.Pattern == crds.QuantityPattern {
		s.Pattern, s.MaxLength = "", nil
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		if v := s.AdditionalProperties.Schema; v.XIntOrString && v.Pattern == crds.QuantityPattern {
			s.MaxProperties = nil
		}
		loosenQuantities(s.AdditionalProperties.Schema)
	}
	for name, p := range s.Properties {
		loosenQuantities(&p)
		s.Properties[name] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		loosenQuantities(s.Items.Schema)
	}
}
