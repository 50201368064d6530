package crds

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestManifestsDecodeAndDeclareTheAPI(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range all {
		byName[crd.Name] = crd
	}
	for _, name := range []string{MaterializeCRDName, "balancers.materialize.cloud", "consoles.materialize.cloud"} {
		crd := byName[name]
		if crd == nil {
			t.Fatalf("CRD %s missing; have %v", name, len(all))
		}
		if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
			t.Errorf("%s: scope %s, want Namespaced", name, crd.Spec.Scope)
		}
		if got := crd.Spec.Names.Categories; len(got) != 1 || got[0] != "materialize" {
			t.Errorf("%s: categories %v, want [materialize]", name, got)
		}
		for _, v := range crd.Spec.Versions {
			if v.Subresources == nil || v.Subresources.Status == nil {
				t.Errorf("%s %s: no status subresource", name, v.Name)
			}
		}
	}

	mz := byName[MaterializeCRDName]
	if got := mz.Spec.Names.ShortNames; len(got) != 1 || got[0] != "mzs" {
		t.Errorf("short names %v, want [mzs]", got)
	}
	storage := map[string]bool{}
	for _, v := range mz.Spec.Versions {
		if !v.Served {
			t.Errorf("version %s not served", v.Name)
		}
		storage[v.Name] = v.Storage
	}
	if len(storage) != 2 || !storage["v1alpha1"] || storage["v1"] {
		t.Errorf("want v1alpha1 (storage) and v1 served, got %v", storage)
	}
	conv := mz.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil ||
		len(conv.Webhook.ConversionReviewVersions) != 1 || conv.Webhook.ConversionReviewVersions[0] != "v1" {
		t.Errorf("Materialize conversion must be Webhook with review version v1, got %+v", conv)
	}
}
