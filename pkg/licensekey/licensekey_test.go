package licensekey

import (
	"encoding/base64"
	"os"
	"strings"
	"testing"
	"time"
)

func jwt(claims string) []byte {
	enc := base64.RawURLEncoding.EncodeToString
	return []byte(enc([]byte(`{"typ":"JWT","alg":"PS256"}`)) + "." + enc([]byte(claims)) + ".c2ln\n")
}

func TestReadsTheClaimsTheOperatorActsOn(t *testing.T) {
	c, err := Read(jwt(`{"aud":"0b0b0b0b-1111-4222-8333-444444444444","exp":4102444800,"expiration_behavior":"Disable","sub":"x"}`))
	if err != nil || c.EnvironmentID != "0b0b0b0b-1111-4222-8333-444444444444" || c.ExpirationBehavior != Disable ||
		!c.ExpiresAt().Equal(time.Date(2100, 1, 1, 0, 1, 0, 0, time.UTC)) {
		t.Fatalf("%+v, %v", c, err)
	}
	// Names match exactly, as serde's: another case is another field.
	if c, err := Read(jwt(`{"aud":"a","AUD":"b","exp":1,"expiration_behavior":"Warn"}`)); err != nil || c.EnvironmentID != "a" {
		t.Errorf("aud read as %q (%v), want a", c.EnvironmentID, err)
	}
	// An exp past year 9999 is never, not an overflow into the past.
	if c, err := Read(jwt(`{"aud":"a","exp":18446744073709551615,"expiration_behavior":"Disable"}`)); err != nil || c.ExpiresAt().Year() != 9999 {
		t.Errorf("huge exp: %v, %v", c.ExpiresAt(), err)
	}
	// The fixture every test environment gets.
	raw, err := os.ReadFile("../../test/fixture/license.jwt")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Read(raw); err != nil || c.Expiry != 4102444800 {
		t.Fatalf("fixture: %+v, %v", c, err)
	}
}

func TestRefusesWhatIsNoLicenseKey(t *testing.T) {
	for name, c := range map[string]struct {
		raw  []byte
		want string
	}{
		"plain text":     {[]byte("TEST-STAND-IN-LICENSE-KEY"), "not a JWT"},
		"bad base64":     {[]byte("a.!!.c"), "not base64url"},
		"not an object":  {jwt(`[1]`), "not a JSON object"},
		"no exp":         {jwt(`{"aud":"x","expiration_behavior":"Warn"}`), `no "exp"`},
		"exp not number": {jwt(`{"aud":"x","exp":"soon","expiration_behavior":"Warn"}`), "claims: exp:"},
		"negative exp":   {jwt(`{"aud":"x","exp":-1,"expiration_behavior":"Warn"}`), "claims: exp:"},
		"duplicate aud":  {jwt(`{"aud":"x","aud":"y","exp":1,"expiration_behavior":"Warn"}`), "duplicate field `aud`"},
		"only AUD":       {jwt(`{"AUD":"x","exp":1,"expiration_behavior":"Warn"}`), `no "aud"`},
		"huge":           {[]byte(strings.Repeat("a", MaxSize+1)), "more than a license key's"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Read(c.raw); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}
