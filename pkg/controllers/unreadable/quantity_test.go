package unreadable

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
)

// costly are quantities resource.ParseQuantity takes seconds to forever
// to read, which upstream's CRD admits.
var costly = map[string]string{
	"a large negative exponent":   `"1e-100000000"`,
	"an exponent wrapping int32":  `"1e-2147483648"`,
	"an exponent past int64":      `"1e99999999999999999999"`,
	"a million digits":            `"` + strings.Repeat("7", 1_000_000) + `"`,
	"a million digits, a number":  strings.Repeat("7", 1_000_000),
	"a million decimals":          `"0.` + strings.Repeat("7", 1_000_000) + `"`,
	"digits then a long exponent": `"123456789e-123456789"`,
	"19 digits, then e9999":       `"1000000000000000001e9999"`,
	// Quantity.UnmarshalJSON trims the spaces around (U+00A0 included).
	"a trailing space": `"1e-100000000 "`,
	"a leading space":  `" 1e-100000000"`,
	"a no-break space": "\"1e-100000000\u00a0\"",
}

// Every quantity a person writes passes; none of the costly ones does.
func TestCheckQuantity(t *testing.T) {
	for _, q := range []string{`"1"`, `2`, `"500m"`, `"2Gi"`, `"1E"`, `"1Ei"`, `"1e3"`, `"1e-99"`, `"+.5e+99"`, `"` + strings.Repeat("9", 62) + `e99"`, `"1e-0000000005"`,
		`"1.5"`, `"` + strings.Repeat("9", 64) + `"`, `null`, ``} {
		if err := checkQuantity([]byte(q)); err != nil {
			t.Errorf("%s refused: %v", q, err)
		}
	}
	for name, q := range costly {
		if err := checkQuantity([]byte(q)); err == nil {
			t.Errorf("%s passes", name)
		}
	}
	if err := checkQuantity([]byte(`"1e-100"`)); err == nil {
		t.Error("an exponent one past the bound passes")
	}
}

// Each quantity of the three kinds, at either version, is checked, and
// the error names it; an object without long digit runs is not parsed.
func TestCheckQuantitiesNamesTheQuantity(t *testing.T) {
	const bad = `"1e-100000000"`
	for want, raw := range map[string]string{
		"spec.environmentdResourceRequirements.requests[cpu]":             materialize("", bad, "", ""),
		"spec.balancerdResourceRequirements.limits[memory]":               materialize("", `"1"`, `,"balancerdResourceRequirements":{"limits":{"memory":`+bad+`}}`, ""),
		"spec.consoleResourceRequirements.requests[cpu]":                  materialize("", `"1"`, `,"consoleResourceRequirements":{"requests":{"cpu":`+bad+`}}`, ""),
		"spec.resourceRequirements.limits[cpu]":                           `{"kind":"Balancer","spec":{"resourceRequirements":{"limits":{"cpu":` + bad + `}}}}`,
		"spec.environmentdScratchVolumeStorageRequirement":                materialize("", `"1"`, `,"environmentdScratchVolumeStorageRequirement":`+bad, ""),
		"spec.environmentdExtraEnv[1].valueFrom.resourceFieldRef.divisor": materialize("", `"1"`, `,"environmentdExtraEnv":[{"name":"A","value":"1"},{"name":"B","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":`+bad+`}}}]`, ""),
		"spec.environmentdResourceRequirements.limits[cpu]":               materialize("", `"1"`, `,"environmentdExtraEnv":"not a list","environmentdResourceRequirements":{"limits":{"cpu":`+bad+`}}`, ""),
	} {
		err := checkQuantities([]byte(raw))
		if err == nil || !strings.HasPrefix(err.Error(), want+": ") {
			t.Errorf("want an error naming %s, got %v", want, err)
		}
	}
	fine := materialize("", `"1"`, `,"environmentId":"0b0b0b0b-1111-4222-8333-444444444444","requestRollout":"e1234567-1111-4222-8333-444444444444"`,
		`{"resourceId":"abcdefghij","lastCompletedRolloutRequest":"e1234567-1111-4222-8333-444444444444"}`)
	if err := checkQuantities([]byte(fine)); err != nil {
		t.Errorf("a readable object refused: %v", err)
	}
	if costlyDigits([]byte(materialize("", `"500m"`, `,"environmentId":"0b0b0b0b-1111-4222-8333-444444444444"`, ""))) {
		t.Error("an everyday object is parsed for its quantities")
	}
}

// An object holding a costly quantity becomes a placeholder without any Go
// type reading it: the decode returns at once instead of holding the
// informer (and every reconciler behind it) for as long as the quantity
// takes. The bound is a hang guard, not a speed assertion.
func TestACostlyQuantityIsNotDecoded(t *testing.T) {
	r := materializeReader()
	for name, q := range costly {
		t.Run(name, func(t *testing.T) {
			done := make(chan string, 1)
			go func() {
				obj, ok := r.decode([]byte(materialize("", q, "", `{"resourceId":"abcdefghij"}`)))
				why, _ := Reason(obj)
				if !ok {
					why = "no placeholder"
				}
				done <- why
			}()
			select {
			case why := <-done:
				if !strings.Contains(why, "is not read") {
					t.Errorf("reason %q, want the quantity's", why)
				}
			case <-time.After(time.Minute):
				t.Fatal("the decode still runs: the quantity is being parsed")
			}
		})
	}
	// A costly string member is left out of the placeholder, not decoded.
	obj, ok := r.decode([]byte(materialize("", `"1"`, `,"environmentdScratchVolumeStorageRequirement":"1e-100000000","environmentId":"0b0b0b0b-1111-4222-8333-444444444444"`, "")))
	if !ok || obj.Spec.EnvironmentID != "0b0b0b0b-1111-4222-8333-444444444444" {
		t.Errorf("placeholder %+v (ok %v): want its environmentId kept", obj.Spec, ok)
	}
}

// A client guarded by GuardTransport refuses a response that carries a
// costly quantity, whether one object or a list; it passes every other
// response unchanged, and leaves watches to the informers' readers.
func TestGuardTransportRefusesCostlyQuantities(t *testing.T) {
	bad := materialize("", `"1e-100000000"`, "", "")
	good := materialize("", `"1"`, "", "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A server answers in what was asked for: CBOR when the client
		// prefers it and the guard did not ask for JSON.
		if r.Header.Get("Accept") != "application/json" {
			w.Header().Set("Content-Type", "application/cbor")
			_, _ = io.WriteString(w, "\xa0")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/materializes/cbor"):
			w.Header().Set("Content-Type", "application/cbor")
			_, _ = io.WriteString(w, "\xa0")
		case strings.HasSuffix(r.URL.Path, "/materializes/bad"):
			_, _ = io.WriteString(w, bad)
		case strings.HasSuffix(r.URL.Path, "/materializes/good"):
			_, _ = io.WriteString(w, good)
		case strings.HasSuffix(r.URL.Path, "/materializes"):
			_, _ = io.WriteString(w, `{"apiVersion":"materialize.cloud/v1alpha1","kind":"MaterializeList","metadata":{},"items":[`+good+`,`+bad+`]}`)
		}
	}))
	t.Cleanup(srv.Close)
	client, err := versioned.NewForConfig(&rest.Config{Host: srv.URL, WrapTransport: GuardTransport,
		ContentConfig: rest.ContentConfig{AcceptContentTypes: "application/cbor;q=1,application/json;q=0.9"}})
	if err != nil {
		t.Fatal(err)
	}
	mzs := client.MaterializeV1alpha1().Materializes("tenant")
	ctx := context.Background()
	if got, err := mzs.Get(ctx, "good", metav1.GetOptions{}); err != nil || got.Name != "mz" {
		t.Errorf("a readable object: %v, %v", got, err)
	}
	for what, call := range map[string]func() error{
		"get":  func() error { _, err := mzs.Get(ctx, "bad", metav1.GetOptions{}); return err },
		"list": func() error { _, err := mzs.List(ctx, metav1.ListOptions{}); return err },
	} {
		err := call()
		if !errors.Is(err, ErrCostlyQuantity) || !strings.Contains(err.Error(), "spec.environmentdResourceRequirements.requests[cpu]") {
			t.Errorf("%s: %v, want the quantity refused by name", what, err)
		}
	}
	// An answer the guard cannot check is refused, not passed on.
	if _, err := mzs.Get(ctx, "cbor", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("a CBOR answer: %v, want it refused", err)
	}
	// A watch's stream is passed through untouched (the guard reads no
	// body it would have to buffer whole).
	resp, err := GuardTransport(http.DefaultTransport).RoundTrip(mustRequest(t, srv.URL+"/apis/materialize.cloud/v1alpha1/namespaces/tenant/materializes/bad?watch=true"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// The scan that decides whether an object's quantities are decoded at all
// is not fooled by what every object holds: UUIDs (in one of three an e is
// followed by three digits), resource versions, timestamps. Quantities
// with spaces around are still caught.
func TestEverydayObjectsAreNotDecodedForTheirQuantities(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	id := func() string {
		u, err := uuid.NewRandomFromReader(byteReader{rng})
		if err != nil {
			t.Fatal(err)
		}
		return u.String()
	}
	for range 1000 {
		obj := `{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize","metadata":{"name":"mz","namespace":"tenant","uid":"` + id() +
			`","resourceVersion":"123456789","creationTimestamp":"2026-12-06T08:49:44Z","ownerReferences":[{"uid":"` + id() + `"}]},` +
			`"spec":{"environmentId":"` + id() + `","requestRollout":"` + id() + `","environmentdResourceRequirements":{"requests":{"cpu":"500m","memory":"1e9"}}}}`
		if costlyDigits([]byte(obj)) {
			t.Fatalf("an everyday object is decoded for its quantities: %s", obj)
		}
	}
	for name, q := range costly {
		if !costlyDigits([]byte(materialize("", q, "", ""))) {
			t.Errorf("%s: not flagged", name)
		}
	}
}

type byteReader struct{ rng *rand.Rand }

func (r byteReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.rng.IntN(256))
	}
	return len(p), nil
}
