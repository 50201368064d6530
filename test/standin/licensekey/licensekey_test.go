package licensekey

import (
	cryptoRand "crypto/rand"
	"crypto/rsa"
	"os"
	"strings"
	"testing"
	"time"
)

// fixtureLicense is the key every test environment gets (test/fixture).
const fixtureLicense = "../../fixture/license.jwt"

func signingKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := TestSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var now = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

func valid() map[string]any {
	return map[string]any{
		"sub": "0b0b0b0b-1111-4222-8333-444444444444", "aud": "00000000-0000-0000-0000-000000000000",
		"iss": Issuer, "jti": "3c1c0f5e-7f0e-4b8a-9d0e-2a1b3c4d5e6f", "version": 1,
		"nbf": now.Add(-24 * time.Hour).Unix(), "iat": now.Add(-24 * time.Hour).Unix(), "exp": now.Add(365 * 24 * time.Hour).Unix(),
		"max_credit_consumption_rate": 24.0, "expiration_behavior": Disable,
	}
}

// The fixture's key validates (and can be rewritten with
// ORCHESTRATORD_WRITE_LICENSE=1: valid until 2100).
func TestFixtureLicenseValidates(t *testing.T) {
	if os.Getenv("ORCHESTRATORD_WRITE_LICENSE") != "" {
		c := valid()
		c["nbf"], c["iat"], c["exp"] = int64(1767225600), int64(1767225600), int64(4102444800)
		jwt, err := Sign(c, signingKey(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fixtureLicense, []byte(jwt+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(fixtureLicense)
	if err != nil {
		t.Fatal(err)
	}
	k, err := Validate(strings.TrimSpace(string(raw)), now)
	if err != nil || k.Expired {
		t.Fatalf("fixture license: %+v, %v", k, err)
	}
}

// Each check of upstream's validate, in its order, with its message.
func TestValidateRefusesAsEnvironmentd(t *testing.T) {
	key := signingKey(t)
	sign := func(change func(map[string]any)) string {
		c := valid()
		if change != nil {
			change(c)
		}
		jwt, err := Sign(c, key)
		if err != nil {
			t.Fatal(err)
		}
		return jwt
	}
	otherKey, _ := rsa.GenerateKey(cryptoRand.Reader, 2048)
	foreign, _ := Sign(valid(), otherKey)
	good := sign(nil)
	parts := strings.Split(good, ".")
	for name, c := range map[string]struct {
		key  string
		want string
	}{
		"not a JWT":         {"TEST-STAND-IN-LICENSE-KEY", "InvalidToken"},
		"bad base64":        {"!!." + parts[1] + "." + parts[2], "Base64 error"},
		"another signer":    {foreign, "InvalidSignature"},
		"tampered claims":   {parts[0] + "." + b64.EncodeToString([]byte(`{"sub":"x"}`)) + "." + parts[2], "InvalidSignature"},
		"HS256":             {b64.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + parts[1] + "." + parts[2], "InvalidAlgorithm"},
		"missing jti":       {sign(func(c map[string]any) { delete(c, "jti") }), "JSON error: missing field `jti`"},
		"aud not a string":  {sign(func(c map[string]any) { c["aud"] = 7 }), "JSON error"},
		"unknown behaviour": {sign(func(c map[string]any) { c["expiration_behavior"] = "Ignore" }), "unknown variant `Ignore`"},
		"not yet valid":     {sign(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix(); c["iat"] = c["nbf"] }), "ImmatureSignature"},
		"another issuer":    {sign(func(c map[string]any) { c["iss"] = "Someone" }), "InvalidIssuer"},
		"version 2":         {sign(func(c map[string]any) { c["version"] = 2 }), "invalid license key version"},
		"issued after exp":  {sign(func(c map[string]any) { c["iat"] = now.Add(400 * 24 * time.Hour).Unix() }), "invalid issuance time"},
		"issued before nbf": {sign(func(c map[string]any) { c["iat"] = now.Add(-48 * time.Hour).Unix() }), "invalid issuance time"},
		"revoked":           {sign(func(c map[string]any) { c["jti"] = "eddaf004-dc1e-48cf-9cc1-41d1543d940a" }), "revoked license key"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Validate(c.key, now); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	if k, err := Validate(good, now); err != nil || k.Expired || k.Sub != "0b0b0b0b-1111-4222-8333-444444444444" {
		t.Fatalf("valid key: %+v, %v", k, err)
	}
	// Expired keys validate; the caller acts on the expiration behaviour.
	expired := sign(func(c map[string]any) { c["exp"] = now.Add(-2 * time.Minute).Unix() })
	if k, err := Validate(expired, now); err != nil || !k.Expired {
		t.Fatalf("expired key: %+v, %v", k, err)
	}
	withinLeeway := sign(func(c map[string]any) { c["exp"] = now.Add(-30 * time.Second).Unix() })
	if k, err := Validate(withinLeeway, now); err != nil || k.Expired {
		t.Fatalf("key expired within the 60 s leeway: %+v, %v", k, err)
	}
}
