// Package licensekey checks a license key as environmentd does (upstream
// src/license-keys/src/lib.rs): a PS256 JWT whose header, signature and
// claims it validates, in upstream's order and with its messages. It is a
// TEST STAND-IN's: it trusts the test key pair of this package
// (test-signing-key.pem, for tests only), where environmentd trusts
// Materialize's.
package licensekey

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Issuer is the only issuer environmentd accepts.
const Issuer = "Materialize, Inc."

// leeway is jsonwebtoken's default for exp and nbf, in seconds.
const leeway = 60

// revoked are key ids (jti) environmentd refuses.
var revoked = map[string]bool{"eddaf004-dc1e-48cf-9cc1-41d1543d940a": true}

// Expiration behaviours (ExpirationBehavior's serde names).
const (
	Warn                   = "Warn"
	DisableClusterCreation = "DisableClusterCreation"
	Disable                = "Disable"
)

// Claims is upstream's Payload, field for field.
type Claims struct {
	Sub                            string   `json:"sub"`
	Exp                            uint64   `json:"exp"`
	Nbf                            uint64   `json:"nbf"`
	Iss                            string   `json:"iss"`
	Aud                            string   `json:"aud"`
	Iat                            uint64   `json:"iat"`
	Jti                            string   `json:"jti"`
	Version                        uint64   `json:"version"`
	MaxCreditConsumptionRate       float64  `json:"max_credit_consumption_rate"`
	AllowCreditConsumptionOverride bool     `json:"allow_credit_consumption_override,omitempty"`
	ExpirationBehavior             string   `json:"expiration_behavior"`
	Entitlements                   []string `json:"entitlements,omitempty"`
}

// required are the Payload fields without a serde default.
var required = []string{"sub", "exp", "nbf", "iss", "aud", "iat", "jti", "version", "max_credit_consumption_rate", "expiration_behavior"}

// Key is a validated license key.
type Key struct {
	Claims
	// Expired keys validate: what happens then is their ExpirationBehavior's.
	Expired bool
}

//go:embed test-public.pem
var publicPEM []byte

func publicKey() (*rsa.PublicKey, error) {
	return decodePEM(publicPEM, x509.ParsePKIXPublicKey, func(k any) (*rsa.PublicKey, bool) { rk, ok := k.(*rsa.PublicKey); return rk, ok })
}

// decodePEM parses the RSA key in raw's first PEM block.
func decodePEM[K any](raw []byte, parse func([]byte) (any, error), rsaKey func(any) (K, bool)) (K, error) {
	var zero K
	block, _ := pem.Decode(raw)
	if block == nil {
		return zero, errors.New("no key found")
	}
	k, err := parse(block.Bytes)
	if err != nil {
		return zero, err
	}
	rk, ok := rsaKey(k)
	if !ok {
		return zero, errors.New("key is not RSA")
	}
	return rk, nil
}

var b64 = base64.RawURLEncoding

// Validate checks text (the key file's contents, trimmed by the caller as
// environmentd trims it) at now. Its errors read as environmentd's after
// "failed to validate license key file: ".
func Validate(text string, now time.Time) (*Key, error) {
	parts := strings.Split(text, ".")
	if len(parts) != 3 {
		return nil, errors.New("InvalidToken")
	}
	rawHeader, err := b64.DecodeString(parts[0])
	if err != nil {
		return nil, fmt.Errorf("Base64 error: %v", err)
	}
	var header struct {
		Alg string  `json:"alg"`
		Typ *string `json:"typ"`
	}
	if err := json.Unmarshal(rawHeader, &header); err != nil {
		return nil, fmt.Errorf("JSON error: %v", err)
	}
	if header.Alg != "PS256" {
		return nil, errors.New("InvalidAlgorithm")
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return nil, fmt.Errorf("Base64 error: %v", err)
	}
	pub, err := publicKey()
	if err != nil {
		return nil, err
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPSS(pub, crypto.SHA256, digest[:], sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}); err != nil {
		return nil, errors.New("InvalidSignature")
	}
	rawClaims, err := b64.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("Base64 error: %v", err)
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(rawClaims, &present); err != nil {
		return nil, fmt.Errorf("JSON error: %v", err)
	}
	for _, f := range required {
		if _, ok := present[f]; !ok {
			return nil, fmt.Errorf("JSON error: missing field `%s`", f)
		}
	}
	var c Claims
	dec := json.NewDecoder(bytes.NewReader(rawClaims))
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("JSON error: %v", err)
	}
	switch c.ExpirationBehavior {
	case Warn, DisableClusterCreation, Disable:
	default:
		return nil, fmt.Errorf("JSON error: unknown variant `%s`, expected one of `Warn`, `DisableClusterCreation`, `Disable`", c.ExpirationBehavior)
	}
	t := uint64(now.Unix())
	// jsonwebtoken compares exp with now - leeway: no overflow near u64's end.
	key := &Key{Claims: c, Expired: t > leeway && c.Exp < t-leeway}
	if c.Nbf > t+leeway {
		return nil, errors.New("ImmatureSignature")
	}
	if c.Iss != Issuer {
		return nil, errors.New("InvalidIssuer")
	}
	if header.Typ == nil || *header.Typ != "JWT" {
		return nil, errors.New("invalid jwt header type")
	}
	if c.Version != 1 {
		return nil, errors.New("invalid license key version")
	}
	if c.Iat < c.Nbf || c.Iat > c.Exp {
		return nil, errors.New("invalid issuance time")
	}
	if revoked[c.Jti] {
		return nil, errors.New("revoked license key")
	}
	return key, nil
}

//go:embed test-signing-key.pem
var signingPEM []byte

// TestSigningKey is the private half of the key pair this package trusts:
// for tests and fixtures only.
func TestSigningKey() (*rsa.PrivateKey, error) {
	return decodePEM(signingPEM, x509.ParsePKCS8PrivateKey, func(k any) (*rsa.PrivateKey, bool) { rk, ok := k.(*rsa.PrivateKey); return rk, ok })
}

// Sign makes a license key of claims with key, as Materialize's signer
// does ({"typ":"JWT","alg":"PS256"}); for tests and fixtures.
func Sign(claims any, key *rsa.PrivateKey) (string, error) {
	header := b64.EncodeToString([]byte(`{"typ":"JWT","alg":"PS256"}`))
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := header + "." + b64.EncodeToString(payload)
	digest := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPSS(rand.Reader, key, crypto.SHA256, digest[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	if err != nil {
		return "", err
	}
	return signing + "." + b64.EncodeToString(sig), nil
}
