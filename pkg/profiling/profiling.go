// Package profiling serves Go's runtime profiles (net/http/pprof) on a
// program's health mux, for both programs' opt-in --profiling flag: off by
// default, since profiles expose internals and cost CPU while taken.
package profiling

import (
	"net/http"
	"net/http/pprof"
)

// Register adds /debug/pprof/ and its endpoints to mux. Not
// /debug/pprof/cmdline: the arguments may carry credentials (a Sentry DSN,
// an OpenTelemetry header), and the port answers without authentication.
func Register(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
