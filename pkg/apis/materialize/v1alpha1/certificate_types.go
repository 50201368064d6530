package v1alpha1

// MaterializeCertSpec asks cert-manager for a certificate.
type MaterializeCertSpec struct {
	// dnsNames are additional DNS names the certificate is valid for.
	// +optional
	// +listType=atomic
	DNSNames []string `json:"dnsNames,omitempty"`
	// duration is the requested lifetime of the certificate, a Go duration such as 2160h.
	// +optional
	Duration string `json:"duration,omitempty"`
	// renewBefore is how long before expiry the certificate is renewed, a Go duration.
	// +optional
	RenewBefore string `json:"renewBefore,omitempty"`
	// issuerRef names the cert-manager Issuer or ClusterIssuer that signs the certificate.
	// +optional
	IssuerRef *CertificateIssuerRef `json:"issuerRef,omitempty"`
	// secretTemplate holds labels and annotations copied onto the certificate's Secret.
	// +optional
	SecretTemplate *CertificateSecretTemplate `json:"secretTemplate,omitempty"`
	// privateKeyAlgorithm is the private key's algorithm; unset, the
	// operator picks one per certificate (ECDSA for the external ones).
	// +optional
	PrivateKeyAlgorithm PrivateKeyAlgorithm `json:"privateKeyAlgorithm,omitempty"`
	// privateKeySize is the private key's size in bits: RSA at least 2048
	// (default 4096), ECDSA 256, 384 or 521 (default 256); Ed25519 has none.
	// +optional
	PrivateKeySize *int64 `json:"privateKeySize,omitempty"`
}

// PrivateKeyAlgorithm is a cert-manager private key algorithm.
// +kubebuilder:validation:Enum=RSA;ECDSA;Ed25519
type PrivateKeyAlgorithm string

// The algorithms cert-manager supports.
const (
	PrivateKeyRSA     PrivateKeyAlgorithm = "RSA"
	PrivateKeyECDSA   PrivateKeyAlgorithm = "ECDSA"
	PrivateKeyEd25519 PrivateKeyAlgorithm = "Ed25519"
)

// CertificateIssuerRef references a cert-manager issuer.
type CertificateIssuerRef struct {
	// name of the issuer.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// kind of the issuer, Issuer or ClusterIssuer.
	// +optional
	Kind string `json:"kind,omitempty"`
	// group of the issuer, cert-manager.io unless an external issuer is used.
	// +optional
	Group string `json:"group,omitempty"`
}

// CertificateSecretTemplate holds metadata copied onto a certificate's Secret.
type CertificateSecretTemplate struct {
	// annotations to add to the Secret.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// labels to add to the Secret.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}
