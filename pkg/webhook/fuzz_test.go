package webhook

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/materializeinc/orchestratord/test/fixture"
)

// Any body a client sends is answered with a ConversionReview or a 4xx,
// never a panic, and gives back everything it was charged.
//
//	go test ./pkg/webhook -run '^$' -fuzz FuzzReview -fuzztime 1m
func FuzzReview(f *testing.F) {
	f.Add(reviewBody("materialize.cloud/v1", alphaObject))
	f.Add(reviewBody("materialize.cloud/v1alpha1", alphaObject, alphaObject))
	f.Add(string(fixture.ConversionReview("materialize.cloud/v1", 2)))
	f.Add(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","objects":[{}]}}`)
	f.Add(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"materialize.cloud/v1","objects":[{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize","metadata":{"annotations":{"conversion.materialize.cloud/v1":"{\"spec\":{\"x\":1}}"}}}]}}`)
	f.Add(`[`)
	f.Fuzz(func(t *testing.T, body string) {
		h := newHandler(t)
		h.MaxInFlightMemory = 64 << 20
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body))
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
			var out struct {
				Response struct {
					Result struct{ Status string }
				}
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response.Result.Status == "" {
				t.Fatalf("200 without a ConversionReview (%v): %.300s", err, rec.Body)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("answered %d: %.300s", rec.Code, rec.Body)
		}
		if h.budget.memory != 0 || h.budget.reviews != 0 {
			t.Fatalf("%d bytes and %d reviews still charged", h.budget.memory, h.budget.reviews)
		}
	})
}
