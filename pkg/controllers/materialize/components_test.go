package materialize

import (
	"encoding/json"
	"testing"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
)

// An issuerRef's kind and group are written only when set, as upstream
// writes them: an empty one written as "" would differ from upstream's
// Balancer and Console specs, and every switch between the operators
// would rewrite them.
func TestCertificateSpecLeavesUnsetIssuerFieldsOut(t *testing.T) {
	for _, c := range []struct {
		ref  v1alpha1.CertificateIssuerRef
		want string
	}{
		{v1alpha1.CertificateIssuerRef{Name: "ca"}, `{"name":"ca"}`},
		{v1alpha1.CertificateIssuerRef{Name: "ca", Kind: "ClusterIssuer"}, `{"name":"ca","kind":"ClusterIssuer"}`},
		{v1alpha1.CertificateIssuerRef{Name: "ca", Kind: "Issuer", Group: "cert-manager.io"}, `{"name":"ca","kind":"Issuer","group":"cert-manager.io"}`},
	} {
		got, err := json.Marshal(certAC(&v1alpha1.MaterializeCertSpec{IssuerRef: &c.ref}).IssuerRef)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("issuerRef %+v written as %s, want %s", c.ref, got, c.want)
		}
	}
}
