package profiling

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// The profiles are served; the command line, which may hold credentials,
// is not.
func TestCommandLineIsNotServed(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux)
	for path, want := range map[string]int{
		"/debug/pprof/":          http.StatusOK,
		"/debug/pprof/goroutine": http.StatusOK,
		"/debug/pprof/cmdline":   http.StatusNotFound,
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("%s answered %d, want %d", path, rec.Code, want)
		}
	}
}
