// Package licensekey reads the claims of a Materialize license key (a
// PS256 JWT, upstream src/license-keys) without checking its signature:
// environmentd checks it; the operator only reads what it must act on
// before environmentd starts — the environment the key is for and when it
// expires — so that a key environmentd would refuse is a condition, not a
// crash loop.
package licensekey

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MaxSize bounds the key read from a Secret: real keys are about 1 KB.
const MaxSize = 16 << 10

// Leeway is environmentd's tolerance on exp, in seconds.
const Leeway = 60

// Disable is the expiration behaviour with which environmentd refuses to
// start once the key expired (Warn and DisableClusterCreation start).
const Disable = "Disable"

// Claims are the claims the operator acts on.
type Claims struct {
	// EnvironmentID is aud: the environment the key is for; the nil UUID
	// stands for any.
	EnvironmentID string `json:"aud"`
	// Expiry is exp, in Unix seconds (u64 upstream: negative is refused).
	Expiry             uint64 `json:"exp"`
	ExpirationBehavior string `json:"expiration_behavior"`
	// AllowCreditConsumptionOverride, when false (serde's default),
	// makes environmentd require a memory limit of every replica size.
	AllowCreditConsumptionOverride bool `json:"allow_credit_consumption_override"`
}

// ExpiresAt is when environmentd starts treating the key as expired.
func (c Claims) ExpiresAt() time.Time {
	// Past year 9999 is never; adding the leeway there would overflow.
	const never = 253402300799
	if c.Expiry >= never-Leeway {
		return time.Unix(never, 0).UTC()
	}
	return time.Unix(int64(c.Expiry)+Leeway, 0).UTC()
}

// Read decodes the claims of raw (a Secret's value; surrounding white space
// is ignored, as environmentd trims the file).
func Read(raw []byte) (Claims, error) {
	var c Claims
	if len(raw) > MaxSize {
		return c, fmt.Errorf("%d bytes, more than a license key's %d", len(raw), MaxSize)
	}
	parts := strings.Split(strings.TrimSpace(string(raw)), ".")
	if len(parts) != 3 {
		return c, errors.New("not a JWT (three dot-separated parts)")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return c, fmt.Errorf("claims are not base64url: %v", err)
	}
	fields, err := exactFields(payload)
	if err != nil {
		return c, err
	}
	for _, f := range []string{"aud", "exp", "expiration_behavior"} {
		if _, ok := fields[f]; !ok {
			return c, fmt.Errorf("claims have no %q", f)
		}
	}
	for name, dst := range map[string]any{"aud": &c.EnvironmentID, "exp": &c.Expiry,
		"expiration_behavior": &c.ExpirationBehavior, "allow_credit_consumption_override": &c.AllowCreditConsumptionOverride} {
		if raw, ok := fields[name]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return c, fmt.Errorf("claims: %s: %v", name, err)
			}
		}
	}
	return c, nil
}

// exactFields splits a JSON object into its fields by their exact names, as
// serde reads a struct (encoding/json would match names in any case, so a
// key could read differently here than in environmentd); a field given twice
// is refused, as serde refuses it.
func exactFields(payload []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("claims are not a JSON object")
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("claims are not a JSON object: %v", err)
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("claims are not a JSON object: %v", err)
		}
		if _, dup := fields[name]; dup {
			return nil, fmt.Errorf("claims: duplicate field `%s`", name)
		}
		fields[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("claims are not a JSON object: %v", err)
	}
	if dec.More() {
		return nil, errors.New("claims: trailing characters")
	}
	return fields, nil
}
