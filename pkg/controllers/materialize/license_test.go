package materialize

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"

	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
)

func unsignedKey(aud string, exp time.Time, behavior string) []byte {
	enc := base64.RawURLEncoding.EncodeToString
	return []byte(enc([]byte(`{"typ":"JWT","alg":"PS256"}`)) + "." +
		enc(fmt.Appendf(nil, `{"aud":%q,"exp":%d,"expiration_behavior":%q}`, aud, exp.Unix(), behavior)) + ".sig")
}

// The license key's claims, read before a generation starts: problems are
// stable messages on every pass; warnings are one Event per generation.
func TestLicenseKeyChecks(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	events := record.NewFakeRecorder(10)
	r := &reconciler{d: controller.Deps{Recorder: events}, o: Options{Now: func() time.Time { return now }}}
	e := testEnv(testMaterialize("materialize/environmentd:v26.35.0", ""))
	const anyEnv = "00000000-0000-0000-0000-000000000000"

	for _, c := range []struct {
		key  []byte
		want string
	}{
		{[]byte("TEST-STAND-IN-LICENSE-KEY"), `backend Secret "backend": "license_key" is not a license key environmentd accepts: not a JWT (three dot-separated parts)`},
		{unsignedKey("1c1c1c1c-1111-4222-8333-444444444444", now.Add(time.Hour), "Disable"),
			"environment_id is set in materialize resource envs/prod but does not match the environment_id set in the associated license key 1c1c1c1c-1111-4222-8333-444444444444"},
		{unsignedKey(anyEnv, now.Add(-time.Hour), "Disable"),
			`backend Secret "backend": the license key expired at 2026-12-01T23:01:00Z, and with expiration_behavior Disable environmentd refuses to start`},
	} {
		for range 2 {
			if got := r.checkLicenseKey(e, "backend", c.key); got != c.want {
				t.Errorf("problem %q, want %q", got, c.want)
			}
		}
	}
	// The same environment spelled otherwise, far from expiry: nothing.
	if got := r.checkLicenseKey(e, "backend", unsignedKey("0B0B0B0B111142228333444444444444", now.Add(365*24*time.Hour), "Disable")); got != "" {
		t.Errorf("problem %q for a good key", got)
	}
	if len(events.Events) != 0 {
		t.Fatalf("events for problems or a good key: %v", <-events.Events)
	}
	// Expiring within 30 days: a warning, once per generation.
	soon := unsignedKey(anyEnv, now.Add(10*24*time.Hour), "Disable")
	for range 3 {
		if got := r.checkLicenseKey(e, "backend", soon); got != "" {
			t.Errorf("problem %q for a key that still works", got)
		}
	}
	e.mz.Status.ActiveGeneration++
	r.checkLicenseKey(e, "backend", soon)
	r.checkLicenseKey(e, "backend", unsignedKey(anyEnv, now.Add(-time.Hour), "Warn")) // same generation: already warned
	e.mz.Status.ActiveGeneration++
	r.checkLicenseKey(e, "backend", unsignedKey(anyEnv, now.Add(-time.Hour), "Warn"))
	var got []string
	for len(events.Events) > 0 {
		got = append(got, strings.SplitN(<-events.Events, " ", 3)[1])
	}
	if strings.Join(got, ",") != "LicenseKeyExpiring,LicenseKeyExpiring,LicenseKeyExpired" {
		t.Errorf("events %v, want one warning per generation", got)
	}
}
