package materialize

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize/rollout"
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
		t.Fatalf("events from the pre-flight check: %v", <-events.Events)
	}
}

// Between rollouts too, the LicenseKey condition says how the key stands,
// with an Event as it changes: 30 days before expiry, at expiry, when it
// is unreadable; and the reconcile comes back when the clock changes it.
func TestLicenseKeyCondition(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	const anyEnv = "00000000-0000-0000-0000-000000000000"
	mz := testMaterialize("materialize/environmentd:v26.35.0", "")
	mz.Generation = 7
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: mz.Spec.BackendSecretName, Namespace: mz.Namespace}, Data: map[string][]byte{}}
	kube := fake.NewClientset(secret)
	events := record.NewFakeRecorder(10)
	r := &reconciler{d: controller.Deps{Kube: kube, Recorder: events, Log: zap.NewNop()}, o: Options{Now: func() time.Time { return now }}}

	var st v1alpha1.MaterializeStatus
	step := func(key []byte) licenseState {
		t.Helper()
		secret.Data[LicenseKeyEntry] = key
		if _, err := kube.CoreV1().Secrets(mz.Namespace).Update(context.Background(), secret, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		l := r.licenseKeyState(context.Background(), mz, r.readBackendSecret(context.Background(), mz))
		before := *st.DeepCopy()
		if l.cond != nil {
			meta.SetStatusCondition(&st.Conditions, *l.cond) // as rollout.Step sets Input.Also
		}
		r.licenseEvent(mz, before, st)
		return l
	}
	check := func(status metav1.ConditionStatus, reason string) {
		t.Helper()
		c := meta.FindStatusCondition(st.Conditions, ConditionLicenseKey)
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != 7 {
			t.Fatalf("condition %+v, want %s/%s at generation 7", c, status, reason)
		}
	}

	nearWarning := now.Add(licenseWarning + time.Hour)
	if l := step(unsignedKey(anyEnv, nearWarning, "Disable")); l.recheck != nearWarning.Add(time.Minute).Add(-licenseWarning).Sub(now) {
		t.Errorf("recheck %v, want when the warning starts", l.recheck)
	}
	far := now.Add(100 * 24 * time.Hour)
	if l := step(unsignedKey(anyEnv, far, "Disable")); l.recheck != maxLicenseRecheck {
		t.Errorf("recheck %v for a key valid for months, want at most %v", l.recheck, maxLicenseRecheck)
	}
	check(metav1.ConditionTrue, ReasonLicenseValid)
	step(unsignedKey(anyEnv, far, "Disable")) // unchanged: no Event
	soon := now.Add(10 * 24 * time.Hour)
	step(unsignedKey(anyEnv, soon, "Disable"))
	step(unsignedKey(anyEnv, soon, "Disable"))
	check(metav1.ConditionTrue, ReasonLicenseExpiring)
	now = soon.Add(2 * time.Minute)
	step(unsignedKey(anyEnv, soon, "Disable"))
	check(metav1.ConditionFalse, ReasonLicenseExpired)
	if c := meta.FindStatusCondition(st.Conditions, ConditionLicenseKey); !strings.Contains(c.Message, "environmentd refuses to start") {
		t.Errorf("message %q", c.Message)
	}
	step([]byte("not-a-jwt"))
	check(metav1.ConditionFalse, ReasonLicenseInvalid)

	var got []string
	for len(events.Events) > 0 {
		got = append(got, strings.SplitN(<-events.Events, " ", 3)[1])
	}
	if strings.Join(got, ",") != "LicenseKeyExpiring,LicenseKeyExpired,LicenseKeyInvalid" {
		t.Errorf("events %v, want one per change", got)
	}
}

// The LicenseKey condition's message quotes what the tenant wrote (the
// backend Secret's name, the key's claims): it is cut as UpToDate's is, or
// a long one would fail every status write of the Materialize.
func TestLicenseKeyConditionMessageIsBounded(t *testing.T) {
	mz := testMaterialize("materialize/environmentd:v26.35.0", "")
	mz.Spec.BackendSecretName = strings.Repeat("s", 1<<20)
	r := &reconciler{d: controller.Deps{Kube: fake.NewClientset(), Recorder: record.NewFakeRecorder(10), Log: zap.NewNop()},
		o: Options{Now: time.Now}}
	missing := backendSecret{err: apierrors.NewNotFound(corev1.Resource("secrets"), mz.Spec.BackendSecretName)}
	l := r.licenseKeyState(context.Background(), mz, missing)
	if l.cond == nil || l.cond.Reason != ReasonLicenseInvalid {
		t.Fatalf("condition %+v, want Invalid", l.cond)
	}
	if n := len(l.cond.Message); n > rollout.MaxMessageBytes {
		t.Fatalf("message of %d bytes, want at most %d", n, rollout.MaxMessageBytes)
	}
}
