package webhook

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/materializeinc/orchestratord/pkg/boundedtext"
)

// lineSizes is a log sink that keeps the size of the longest line.
type lineSizes struct {
	mu      sync.Mutex
	longest int
	lines   int
}

func (l *lineSizes) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range bytes.Lines(p) {
		l.lines++
		l.longest = max(l.longest, len(line))
	}
	return len(p), nil
}

func (l *lineSizes) Sync() error { return nil }

// Whatever a client sends, the strings of it that an answer or a log line
// repeats are cut: a review whose kind (or name, or apiVersion...) is
// megabytes of control characters is answered in a few hundred bytes,
// valid UTF-8, marked as cut, and no log line is longer than 16 KiB. A body
// that is not UTF-8 at all is refused before it is decoded.
func TestClientInputIsEchoedBounded(t *testing.T) {
	const (
		maxAnswer  = 64 << 10
		maxLogLine = 16 << 10
	)
	// Each \u0001 is four bytes once quoted.
	huge := strings.Repeat(`é\u0001`, 512<<10)
	object := func(kind, apiVersion, ns, name, annotations string) string {
		return `{"apiVersion":"` + apiVersion + `","kind":"` + kind + `","metadata":{"name":"` + name + `","namespace":"` + ns + `"` + annotations +
			`},"spec":{"environmentdImageRef":"mz:v1","backendSecretName":"b"}}`
	}
	review := func(apiVersion, kind, uid, desired string, objects ...string) string {
		return `{"apiVersion":"` + apiVersion + `","kind":"` + kind + `","request":{"uid":"` + uid + `","desiredAPIVersion":"` +
			desired + `","objects":[` + strings.Join(objects, ",") + `]}}`
	}
	const (
		rv       = "apiextensions.k8s.io/v1"
		v1       = "materialize.cloud/v1"
		v1alpha1 = "materialize.cloud/v1alpha1"
	)
	good := object("Materialize", v1alpha1, "ns", "mz", "")
	for name, tc := range map[string]struct {
		body        string
		contentType string
		// converted: the input is ignored, not refused (a carry
		// annotation a tenant wrote is logged and dropped).
		converted bool
		// unechoed: refused without repeating the input.
		unechoed bool
	}{
		"review kind":         {body: review(rv, huge, "u", v1, good)},
		"invalid UTF-8":       {body: review(rv, strings.Repeat("\xff", 4<<20), "u", v1, good), unechoed: true},
		"review apiVersion":   {body: review(huge, "ConversionReview", "u", v1, good)},
		"uid":                 {body: review(rv, "ConversionReview", huge, v1, good), unechoed: true},
		"desiredAPIVersion":   {body: review(rv, "ConversionReview", "u", huge, good)},
		"object kind":         {body: review(rv, "ConversionReview", "u", v1, object(huge, v1alpha1, "ns", "mz", ""))},
		"object apiVersion":   {body: review(rv, "ConversionReview", "u", v1, object("Materialize", huge, "ns", "mz", ""))},
		"object name":         {body: review(rv, "ConversionReview", "u", v1, object("Other", v1alpha1, huge, huge, ""))},
		"annotation key":      {body: review(rv, "ConversionReview", "u", v1, object("Materialize", v1alpha1, "ns", "mz", `,"annotations":{"`+huge+`":1}`))},
		"carried field path":  {body: review(rv, "ConversionReview", "u", v1, object("Materialize", v1alpha1, "ns", "mz", `,"annotations":{"conversion.materialize.cloud/v1":"[{\"path\":[\"`+strings.Repeat("p", 15<<10)+`\"],\"value\":1,\"derived\":1}]"}`)), converted: true},
		"content type header": {body: good, contentType: "text/" + strings.Repeat("x", 1<<20)},
	} {
		t.Run(name, func(t *testing.T) {
			logs := &lineSizes{}
			log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), logs, zap.DebugLevel))
			h := &ConvertHandler{Log: log, Metrics: NewMetrics(prometheus.NewRegistry()), MaxInFlightMemory: 1 << 30}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			h.ServeHTTP(rec, req)
			answer := rec.Body.String()
			if succeeded := rec.Code == http.StatusOK && strings.Contains(answer, `"status":"Success"`); succeeded != tc.converted {
				t.Fatalf("converted %v, want %v: %.300s", succeeded, tc.converted, answer)
			}
			if len(answer) > maxAnswer && !tc.converted {
				t.Errorf("answer of %d bytes, over %d", len(answer), maxAnswer)
			}
			if !utf8.ValidString(answer) {
				t.Errorf("answer is not valid UTF-8: %.300q", answer)
			}
			if !tc.converted && !tc.unechoed && !strings.Contains(answer, boundedtext.Marker) {
				t.Errorf("answer does not say the text was cut: %.300s", answer)
			}
			if logs.lines == 0 {
				t.Error("nothing logged")
			}
			if logs.longest > maxLogLine {
				t.Errorf("a log line of %d bytes, over %d", logs.longest, maxLogLine)
			}
			t.Logf("answer %d bytes, longest log line %d bytes: %.200s", len(answer), logs.longest, answer)
		})
	}
}
