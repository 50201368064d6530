package certificates

import (
	"reflect"
	"strings"
	"testing"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
)

func size(n int64) *int64 { return &n }

func TestCertificate(t *testing.T) {
	issuer := &v1alpha1.CertificateIssuerRef{Name: "ca", Kind: "ClusterIssuer"}
	req := Request{Name: "mzx-balancerd-external", Namespace: "ns", SecretName: "mzx-balancerd-external-tls",
		Labels: map[string]string{"l": "1"}, SecretLabels: map[string]string{"materialize.cloud/mz-resource-id": "x"},
		AlgorithmHint: v1alpha1.PrivateKeyECDSA, SizeHint: 256}

	if cert, err := Certificate(nil, &Spec{DNSNames: []string{"a"}}, req); cert != nil || err != nil {
		t.Errorf("no issuer: %v, %v; want no Certificate", cert, err)
	}

	// The resource's fields win, the default fills the rest, the hint the key.
	defaults := &Spec{IssuerRef: issuer, DNSNames: []string{"default"}, Duration: "2160h",
		SecretTemplate: &v1alpha1.CertificateSecretTemplate{Labels: map[string]string{"team": "db"}}}
	cert, err := Certificate(defaults, &Spec{DNSNames: []string{"b.example"}, RenewBefore: "360h"}, req)
	if err != nil {
		t.Fatal(err)
	}
	spec := cert.Object["spec"].(map[string]any)
	want := map[string]any{
		"dnsNames":       []any{"b.example"},
		"issuerRef":      map[string]any{"name": "ca", "kind": "ClusterIssuer"},
		"privateKey":     map[string]any{"algorithm": "ECDSA", "encoding": "PKCS8", "rotationPolicy": "Always", "size": int64(256)},
		"secretName":     "mzx-balancerd-external-tls",
		"secretTemplate": map[string]any{"labels": map[string]any{"team": "db", "materialize.cloud/mz-resource-id": "x"}},
		"duration":       "2160h",
		"renewBefore":    "360h",
	}
	if !reflect.DeepEqual(spec, want) {
		t.Errorf("spec\n got %#v\nwant %#v", spec, want)
	}

	// Ed25519 has no size; extra names follow the spec's.
	req.AlgorithmHint, req.SizeHint, req.AdditionalDNSNames = v1alpha1.PrivateKeyEd25519, 0, []string{"svc", "svc.ns.svc.cluster.local"}
	cert, err = Certificate(nil, &Spec{IssuerRef: issuer, DNSNames: []string{"a"}}, req)
	if err != nil {
		t.Fatal(err)
	}
	spec = cert.Object["spec"].(map[string]any)
	if pk := spec["privateKey"].(map[string]any); pk["algorithm"] != "Ed25519" || pk["size"] != nil {
		t.Errorf("private key %v", pk)
	}
	if got := spec["dnsNames"]; !reflect.DeepEqual(got, []any{"a", "svc", "svc.ns.svc.cluster.local"}) {
		t.Errorf("dnsNames %v", got)
	}

	for _, c := range []struct {
		spec *Spec
		want string
	}{
		{&Spec{IssuerRef: issuer, PrivateKeyAlgorithm: v1alpha1.PrivateKeyRSA, PrivateKeySize: size(1024)}, "at least 2048"},
		{&Spec{IssuerRef: issuer, PrivateKeyAlgorithm: v1alpha1.PrivateKeyECDSA, PrivateKeySize: size(255)}, "256, 384, or 521"},
		{&Spec{IssuerRef: issuer, PrivateKeyAlgorithm: "DSA"}, "not RSA, ECDSA or Ed25519"},
	} {
		if _, err := Certificate(nil, c.spec, req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
	// RSA without a size is 4096, as upstream.
	cert, _ = Certificate(nil, &Spec{IssuerRef: issuer, PrivateKeyAlgorithm: v1alpha1.PrivateKeyRSA}, Request{Name: "n"})
	if pk := cert.Object["spec"].(map[string]any)["privateKey"].(map[string]any); pk["size"] != int64(4096) {
		t.Errorf("RSA default size %v", pk["size"])
	}
}

func TestParseDefaults(t *testing.T) {
	d, err := ParseDefaults(`{"internal":{"issuerRef":{"name":"ca"}},"balancerdExternal":{"dnsNames":["b"]}}`)
	if err != nil || d.Internal.IssuerRef.Name != "ca" || d.BalancerdExternal.DNSNames[0] != "b" || d.ConsoleExternal != nil {
		t.Errorf("%+v, %v", d, err)
	}
	for raw, want := range map[string]string{
		`{"internl":{}}`: "unknown field",
		`{"internal":{"privateKeyAlgorithm":"RSA","privateKeySize":1}}`: "at least 2048",
		`[`: "--default-certificate-specs",
	} {
		if _, err := ParseDefaults(raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}
