// Package licensekey reads the claims of a Materialize license key (a
// PS256 JWT, upstream src/license-keys) without checking its signature:
// environmentd checks it; the operator only reads what it must act on
// before environmentd starts — the environment the key is for and when it
// expires — so that a key environmentd would refuse is a condition, not a
// crash loop.
package licensekey

import (
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
	// Expiry is exp, in Unix seconds.
	Expiry             int64  `json:"exp"`
	ExpirationBehavior string `json:"expiration_behavior"`
	// AllowCreditConsumptionOverride, when false (serde's default),
	// makes environmentd require a memory limit of every replica size.
	AllowCreditConsumptionOverride bool `json:"allow_credit_consumption_override"`
}

// ExpiresAt is when environmentd starts treating the key as expired.
func (c Claims) ExpiresAt() time.Time { return time.Unix(c.Expiry+Leeway, 0).UTC() }

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
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil {
		return c, fmt.Errorf("claims are not a JSON object: %v", err)
	}
	for _, f := range []string{"aud", "exp", "expiration_behavior"} {
		if _, ok := fields[f]; !ok {
			return c, fmt.Errorf("claims have no %q", f)
		}
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return c, fmt.Errorf("claims: %v", err)
	}
	return c, nil
}
