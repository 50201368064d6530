package webhook

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

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
