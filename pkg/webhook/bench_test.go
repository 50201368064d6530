package webhook

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/materializeinc/orchestratord/pkg/conversion"
	"github.com/materializeinc/orchestratord/pkg/jsonvalue"
	"github.com/materializeinc/orchestratord/test/fixture"
)

// go test -run '^$' -bench Review -benchmem ./pkg/webhook
//
// One ConversionReview as the API server sends it for a get (1 object) and
// for a list page (500, client-go's page size), realistic objects. The
// allocated bytes per review over its body size bound the memory a review
// in flight costs, which sizes DefaultMaxInFlightBytes.
func BenchmarkReview(b *testing.B) {
	for _, n := range []int{1, 500} {
		body := string(fixture.ConversionReview("materialize.cloud/v1", n))
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			h := &ConvertHandler{Log: zap.NewNop(), Metrics: NewMetrics(prometheus.NewRegistry())}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Body.String())
				}
			}
			b.ReportMetric(float64(len(body)), "body-bytes")
		})
	}
}

// go test -run '^$' -bench ReviewStages -benchmem ./pkg/webhook
//
// A 500-object review's stages apart, each over the whole review: the
// admission estimate, the decode, the conversions and the encoding of
// what they return (docs/benchmarks.md, "Where a review's time goes").
// The conversions copy (Convert): the handler's in place (ConvertOwned)
// could not run twice on the same objects.
func BenchmarkReviewStages(b *testing.B) {
	body := string(fixture.ConversionReview("materialize.cloud/v1", 500))
	b.Run("estimate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = reviewCost(body)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, msg := parseReview(body); msg != "" {
				b.Fatal(msg)
			}
		}
	})
	rv, msg := parseReview(body)
	if msg != "" {
		b.Fatal(msg)
	}
	converted := make([]map[string]any, len(rv.objects))
	convertAll := func(b *testing.B) {
		for i, obj := range rv.objects {
			var err error
			if converted[i], err = conversion.Convert(obj.(map[string]any), rv.desiredAPIVersion); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("convert", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			convertAll(b)
		}
	})
	// What encode writes, also when -bench selects it alone.
	convertAll(b)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		var out []byte
		for b.Loop() {
			out = out[:0]
			for _, obj := range converted {
				var err error
				if out, err = jsonvalue.Append(out, obj); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
