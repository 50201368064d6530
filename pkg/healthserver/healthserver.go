// Package healthserver serves a program's plain-HTTP endpoints: /healthz,
// /readyz, opt-in /debug/pprof/ and /metrics, on one port or on two. Both
// programs (the webhook and the controllers) start theirs here.
package healthserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/materializeinc/orchestratord/pkg/profiling"
)

// Config is what Start serves.
type Config struct {
	// HealthAddress serves /healthz, /readyz and, with Profiling,
	// /debug/pprof/; MetricsAddress serves /metrics, on the health port
	// when the two are equal.
	HealthAddress, MetricsAddress string
	// Healthz and Readyz return nil when healthy or ready; the error's
	// text is the answer's body otherwise.
	Healthz, Readyz func(*http.Request) error
	Metrics         http.Handler
	Profiling       bool
	// Listen opens an address's listener (an inherited one, say); nil
	// means net.Listen.
	Listen func(address string) (net.Listener, error)
}

// Servers are the running servers.
type Servers struct {
	servers []*http.Server
	errs    chan error
	serving sync.WaitGroup
}

// Start listens on the addresses and serves them in the background. It
// returns an error at once if an address cannot be listened on.
func Start(cfg Config) (*Servers, error) {
	listen := cfg.Listen
	if listen == nil {
		listen = func(address string) (net.Listener, error) { return net.Listen("tcp", address) }
	}
	health := http.NewServeMux()
	health.HandleFunc("/healthz", check(cfg.Healthz, http.StatusInternalServerError))
	health.HandleFunc("/readyz", check(cfg.Readyz, http.StatusServiceUnavailable))
	if cfg.Profiling {
		profiling.Register(health)
	}
	muxes := map[string]*http.ServeMux{cfg.HealthAddress: health}
	if cfg.MetricsAddress == cfg.HealthAddress {
		health.Handle("/metrics", cfg.Metrics)
	} else {
		m := http.NewServeMux()
		m.Handle("/metrics", cfg.Metrics)
		muxes[cfg.MetricsAddress] = m
	}
	s := &Servers{errs: make(chan error, len(muxes))}
	var listeners []net.Listener
	for addr, mux := range muxes {
		ln, err := listen(addr)
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return nil, fmt.Errorf("listening on %s: %w", addr, err)
		}
		listeners = append(listeners, ln)
		s.servers = append(s.servers, &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second})
	}
	for i, srv := range s.servers {
		ln := listeners[i]
		s.serving.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.errs <- fmt.Errorf("serving %s: %w", ln.Addr(), err)
			}
		})
	}
	return s, nil
}

func check(f func(*http.Request) error, status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if f != nil {
			if err := f(r); err != nil {
				http.Error(w, err.Error(), status)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	}
}

// Errors reports a server that stopped serving on its own; it is closed
// once Shutdown has stopped them all.
func (s *Servers) Errors() <-chan error { return s.errs }

// Shutdown stops the servers, waiting for their requests until ctx ends,
// then closing what is left.
func (s *Servers) Shutdown(ctx context.Context) {
	for _, srv := range s.servers {
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
	}
	s.serving.Wait()
	close(s.errs)
}
