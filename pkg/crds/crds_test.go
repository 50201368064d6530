package crds

import (
	"strings"
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

// environmentd lists VpcEndpoints while it boots; the type is upstream's
// (src/cloud-resources/src/crd/vpc_endpoint.rs): names, short name, the one
// served and stored version, status subresource, printer columns and the
// spec's required fields.
func TestVpcEndpointIsUpstreams(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	var crd *apiextensionsv1.CustomResourceDefinition
	for _, c := range all {
		if c.Name == "vpcendpoints.materialize.cloud" {
			crd = c
		}
	}
	if crd == nil {
		t.Fatal("no vpcendpoints.materialize.cloud CRD")
	}
	n := crd.Spec.Names
	if n.Kind != "VpcEndpoint" || n.Plural != "vpcendpoints" || n.Singular != "vpcendpoint" ||
		len(n.ShortNames) != 1 || n.ShortNames[0] != "vpce" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("names %+v, scope %s", n, crd.Spec.Scope)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("versions %d, want v1 only", len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	if v.Name != "v1" || !v.Served || !v.Storage || v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("version %s served %v storage %v subresources %+v", v.Name, v.Served, v.Storage, v.Subresources)
	}
	var cols []string
	for _, c := range v.AdditionalPrinterColumns {
		cols = append(cols, c.Name+"="+c.JSONPath+"@"+string(rune('0'+c.Priority)))
	}
	if got, want := strings.Join(cols, " "), "AwsServiceName=.spec.awsServiceName@1 AvailabilityZoneIDs=.spec.availabilityZoneIds@1"; got != want {
		t.Errorf("printer columns %s, want %s", got, want)
	}
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	if got := strings.Join(spec.Required, ","); got != "availabilityZoneIds,awsServiceName,roleSuffix" {
		t.Errorf("spec required %s", got)
	}
	if got := strings.Join(v.Schema.OpenAPIV3Schema.Required, ","); got != "spec" {
		t.Errorf("required %s, want spec", got)
	}
}

// The API server applies a schema's defaults to objects it reads from etcd,
// so a default upstream's CRD lacks would change the stored specs (and the
// rollout hashes) of Materializes upstream wrote. k8s.io/api declares one
// on EnvVar's fileKeyRef.optional; upstream's schema has none.
func TestNoFileKeyRefOptionalDefault(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	var walk func(path string, s *apiextensionsv1.JSONSchemaProps)
	walk = func(path string, s *apiextensionsv1.JSONSchemaProps) {
		if s == nil {
			return
		}
		for name, p := range s.Properties {
			if strings.HasSuffix(path, ".fileKeyRef") && name == "optional" {
				found++
				if p.Default != nil {
					t.Errorf("%s.optional has default %s", path, p.Default.Raw)
				}
			}
			walk(path+"."+name, &p)
		}
		if s.Items != nil {
			walk(path+"[]", s.Items.Schema)
		}
	}
	for _, crd := range all {
		for _, v := range crd.Spec.Versions {
			walk(crd.Name+"/"+v.Name, v.Schema.OpenAPIV3Schema)
		}
	}
	if found == 0 {
		t.Fatal("no fileKeyRef.optional found: the walk is broken")
	}
}
