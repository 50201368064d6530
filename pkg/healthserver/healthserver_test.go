package healthserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/materializeinc/orchestratord/test/program"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := program.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Health, readiness and metrics on one port or on two; a failing check
// answers with its reason and the status a probe reads as failed.
func TestServesTheEndpointsOnOnePortOrTwo(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metric 1") })
	for _, shared := range []bool{true, false} {
		health := freeAddr(t)
		metricsAddr := health
		if !shared {
			metricsAddr = freeAddr(t)
		}
		ready := errors.New("caches not synced")
		s, err := Start(Config{HealthAddress: health, MetricsAddress: metricsAddr, Metrics: metrics,
			Readyz: func(*http.Request) error { return ready }})
		if err != nil {
			t.Fatal(err)
		}
		if code, body := get(t, "http://"+health+"/readyz"); code != http.StatusServiceUnavailable || body != "caches not synced\n" {
			t.Errorf("shared=%v: /readyz %d %q", shared, code, body)
		}
		ready = nil
		if code, body := get(t, "http://"+health+"/readyz"); code != http.StatusOK || body != "ok" {
			t.Errorf("shared=%v: /readyz once ready: %d %q", shared, code, body)
		}
		if code, _ := get(t, "http://"+health+"/healthz"); code != http.StatusOK {
			t.Errorf("shared=%v: /healthz %d", shared, code)
		}
		if code, body := get(t, "http://"+metricsAddr+"/metrics"); code != http.StatusOK || body != "metric 1" {
			t.Errorf("shared=%v: /metrics %d %q", shared, code, body)
		}
		if code, _ := get(t, "http://"+health+"/debug/pprof/"); code != http.StatusNotFound {
			t.Errorf("shared=%v: profiles served without Profiling: %d", shared, code)
		}
		s.Shutdown(context.Background())
		// Closed once every server has stopped, with nothing reported.
		if err, open := <-s.Errors(); open {
			t.Errorf("a shut-down server reported %v", err)
		}
	}
}
