// Package certificates builds the cert-manager Certificates of an
// environment as upstream orchestratord does (src/orchestratord/src/tls.rs):
// a Certificate exists only when an issuer is named, by the resource's
// certificate spec or the operator-wide default spec, field by field the
// resource's value first.
package certificates

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
)

// GVR is cert-manager's Certificate resource.
var GVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}

// Spec is a certificate request as the CRDs hold it.
type Spec = v1alpha1.MaterializeCertSpec

// Defaults are upstream's --default-certificate-specs: the spec of each
// certificate when the resource names none (or for the fields it leaves
// unset).
type Defaults struct {
	BalancerdExternal *Spec `json:"balancerdExternal,omitempty"`
	ConsoleExternal   *Spec `json:"consoleExternal,omitempty"`
	Internal          *Spec `json:"internal,omitempty"`
}

// ParseDefaults reads --default-certificate-specs ("{}" or empty: none).
func ParseDefaults(raw string) (Defaults, error) {
	var d Defaults
	if raw == "" {
		return d, nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Defaults{}, fmt.Errorf("--default-certificate-specs: %w", err)
	}
	for name, s := range map[string]*Spec{"balancerdExternal": d.BalancerdExternal, "consoleExternal": d.ConsoleExternal, "internal": d.Internal} {
		if err := validateKey(s); err != nil {
			return Defaults{}, fmt.Errorf("--default-certificate-specs: %s: %w", name, err)
		}
	}
	return d, nil
}

// IssuerRefDefined tells whether a certificate is wanted: an issuer is
// named by the resource's spec or the default.
func IssuerRefDefined(defaults, spec *Spec) bool {
	return (spec != nil && spec.IssuerRef != nil) || (defaults != nil && defaults.IssuerRef != nil)
}

// ResolvedDNSNames are the resource's DNS names, else the default's.
func ResolvedDNSNames(defaults, spec *Spec) []string {
	if spec != nil && spec.DNSNames != nil {
		return spec.DNSNames
	}
	if defaults != nil {
		return defaults.DNSNames
	}
	return nil
}

// Request is one Certificate to build.
type Request struct {
	Name, Namespace, SecretName string
	// Labels are the Certificate's labels; SecretLabels are added to the
	// secret template's labels (upstream: the owner's default labels).
	Labels, SecretLabels map[string]string
	// OwnerReferences of the Certificate, in unstructured form.
	OwnerReferences []any
	// AdditionalDNSNames follow the spec's (environmentd's Service names).
	AdditionalDNSNames []string
	// AlgorithmHint and SizeHint (0: the algorithm's default) apply when
	// neither spec names them.
	AlgorithmHint v1alpha1.PrivateKeyAlgorithm
	SizeHint      int64
}

// Certificate is the Certificate for req, nil when no issuer is named.
// The key's size is checked as upstream does (RSA at least 2048 bits,
// ECDSA 256, 384 or 521).
func Certificate(defaults, spec *Spec, req Request) (*unstructured.Unstructured, error) {
	d, s := orEmpty(defaults), orEmpty(spec)
	issuer := s.IssuerRef
	if issuer == nil {
		issuer = d.IssuerRef
	}
	if issuer == nil {
		return nil, nil
	}
	tmpl := s.SecretTemplate
	if tmpl == nil {
		tmpl = d.SecretTemplate
	}
	secretLabels := map[string]any{}
	secretTemplate := map[string]any{"labels": secretLabels}
	if tmpl != nil {
		for k, v := range tmpl.Labels {
			secretLabels[k] = v
		}
		if tmpl.Annotations != nil {
			secretTemplate["annotations"] = stringMap(tmpl.Annotations)
		}
	}
	for k, v := range req.SecretLabels {
		secretLabels[k] = v
	}
	dnsNames := s.DNSNames
	if dnsNames == nil {
		dnsNames = d.DNSNames
	}
	dnsNames = append(slices.Clone(dnsNames), req.AdditionalDNSNames...)
	algorithm := first(s.PrivateKeyAlgorithm, d.PrivateKeyAlgorithm, req.AlgorithmHint)
	size := s.PrivateKeySize
	if size == nil {
		size = d.PrivateKeySize
	}
	if size == nil && req.SizeHint != 0 {
		size = &req.SizeHint
	}
	privateKey := map[string]any{"algorithm": string(algorithm), "encoding": "PKCS8", "rotationPolicy": "Always"}
	switch algorithm {
	case v1alpha1.PrivateKeyRSA:
		n := int64(4096)
		if size != nil {
			n = *size
		}
		if n < 2048 {
			return nil, fmt.Errorf("certificate %s: RSA key size must be at least 2048 bits", req.Name)
		}
		privateKey["size"] = n
	case v1alpha1.PrivateKeyECDSA:
		n := int64(256)
		if size != nil {
			n = *size
		}
		if !slices.Contains([]int64{256, 384, 521}, n) {
			return nil, fmt.Errorf("certificate %s: ECDSA key size must be one of 256, 384, or 521 bits", req.Name)
		}
		privateKey["size"] = n
	case v1alpha1.PrivateKeyEd25519:
	default:
		return nil, fmt.Errorf("certificate %s: private key algorithm %q is not RSA, ECDSA or Ed25519", req.Name, algorithm)
	}
	issuerRef := map[string]any{"name": issuer.Name}
	if issuer.Kind != "" {
		issuerRef["kind"] = issuer.Kind
	}
	if issuer.Group != "" {
		issuerRef["group"] = issuer.Group
	}
	names := make([]any, 0, len(dnsNames))
	for _, n := range dnsNames {
		names = append(names, n)
	}
	certSpec := map[string]any{
		"dnsNames":       names,
		"issuerRef":      issuerRef,
		"privateKey":     privateKey,
		"secretName":     req.SecretName,
		"secretTemplate": secretTemplate,
	}
	if v := first(s.Duration, d.Duration); v != "" {
		certSpec["duration"] = v
	}
	if v := first(s.RenewBefore, d.RenewBefore); v != "" {
		certSpec["renewBefore"] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1",
		"kind":       "Certificate",
		"metadata": map[string]any{
			"name":            req.Name,
			"namespace":       req.Namespace,
			"labels":          stringMap(req.Labels),
			"ownerReferences": req.OwnerReferences,
		},
		"spec": certSpec,
	}}, nil
}

func validateKey(s *Spec) error {
	if s == nil || s.PrivateKeySize == nil {
		return nil
	}
	switch s.PrivateKeyAlgorithm {
	case v1alpha1.PrivateKeyRSA:
		if *s.PrivateKeySize < 2048 {
			return fmt.Errorf("RSA key size must be at least 2048 bits")
		}
	case v1alpha1.PrivateKeyECDSA:
		if !slices.Contains([]int64{256, 384, 521}, *s.PrivateKeySize) {
			return fmt.Errorf("ECDSA key size must be one of 256, 384, or 521 bits")
		}
	}
	return nil
}

func orEmpty(s *Spec) *Spec {
	if s == nil {
		return &Spec{}
	}
	return s
}

func first[T comparable](vs ...T) T {
	var zero T
	for _, v := range vs {
		if v != zero {
			return v
		}
	}
	return zero
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
