package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/materializeinc/orchestratord/pkg/healthserver"
)

// Server runs the HTTPS conversion endpoint and the plain-HTTP health and
// metrics endpoints until its context ends, then drains.
type Server struct {
	Log            *zap.Logger
	ListenAddress  string
	MetricsAddress string
	HealthAddress  string
	// Profiling serves Go's profiles at /debug/pprof/ on HealthAddress.
	Profiling bool
	// GetCertificate supplies the serving certificate for each handshake, so
	// rotated certificates are used without a restart.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Ready reports whether the webhook can serve (a certificate is loaded).
	Ready func() error
	// ShutdownDrain is how long to keep serving after the context ends, with
	// /readyz failing, so that endpoints stop routing here first.
	ShutdownDrain time.Duration
	// ShutdownTimeout bounds the wait for in-flight requests after the drain.
	ShutdownTimeout time.Duration
	// MaxConnections caps the open HTTPS connections (zero means
	// DefaultMaxConnections; connlimit.go).
	MaxConnections int
	// Listen opens (or, under a supervisor, inherits) the listener of an
	// address; nil means net.Listen.
	Listen   func(address string) (net.Listener, error)
	Convert  http.Handler
	Gatherer prometheus.Gatherer
	Metrics  *Metrics

	draining atomic.Bool
	limiter  *connLimiter
}

// connectionCharger is the handler whose in-flight budget the connections
// are charged to (ConvertHandler).
type connectionCharger interface {
	chargeConnectionShare(n int64) bool
	refundConnection(n int64)
}

// TLSConfig is the serving TLS policy: TLS 1.2+ with AEAD suites only.
func TLSConfig(getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: getCertificate,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		NextProtos: []string{"h2", "http/1.1"},
	}
}

// Run serves until ctx ends, then fails /readyz, keeps serving for
// ShutdownDrain, waits up to ShutdownTimeout for in-flight requests, closes
// what is left (logged) and returns nil: the shutdown asked for is done. It
// returns an error at once if a listener cannot be opened or a server
// fails.
func (s *Server) Run(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle("/convert", s.closeWhileDraining(s.Convert))
	secure := &http.Server{
		Handler:           mux,
		TLSConfig:         TLSConfig(s.GetCertificate),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		// Just longer than the API server's idle timeout (client-go's
		// transport keeps Go's 90 s), so the client, not the server, closes
		// an idle connection: a POST sent on a connection the server is
		// closing fails and is not retried.
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: maxHeaderBytes,
		// What a connection can hold is bounded, so it can be charged
		// (connectionMemory).
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          h2MaxStreams,
			MaxReadFrameSize:              h2MaxFrame,
			MaxReceiveBufferPerConnection: h2ReceiveWindow,
			MaxReceiveBufferPerStream:     h2StreamWindow,
			MaxDecoderHeaderTableSize:     h2HeaderTable,
			MaxEncoderHeaderTableSize:     h2HeaderTable,
		},
		ErrorLog: zap.NewStdLog(s.Log.Named("https")),
	}

	listen := s.Listen
	if listen == nil {
		listen = func(address string) (net.Listener, error) { return net.Listen("tcp", address) }
	}
	secureLn, err := listen(s.ListenAddress)
	if err != nil {
		return fmt.Errorf("--listen-address: %w", err)
	}
	maxConns := s.MaxConnections
	if maxConns <= 0 {
		maxConns = DefaultMaxConnections
	}
	limited := newConnLimiter(secureLn, maxConns, func(reason string) {
		if s.Metrics != nil {
			s.Metrics.connectionsClosed.WithLabelValues(reason).Inc()
		}
	})
	if charger, ok := s.Convert.(connectionCharger); ok {
		limited.charge, limited.refund = charger.chargeConnectionShare, charger.refundConnection
	}
	secure.ConnState, secure.ConnContext = limited.ConnState, limited.ConnContext
	s.limiter = limited
	errs := make(chan error, 1)
	// stopping ends the wait for a certificate: the drain is over.
	stopping := make(chan struct{})
	go func() {
		// Accepted only once a certificate is ready: until then the
		// connections wait in the listener's backlog (one inherited
		// across a crash holds the API server's dials) rather than fail
		// their handshake. A SIGTERM meanwhile does not end the wait: the
		// drain serves too.
		if !s.waitReady(stopping) {
			limited.Close()
			errs <- nil
			return
		}
		errs <- secure.ServeTLS(limited, "", "")
	}()
	plain, err := healthserver.Start(healthserver.Config{
		HealthAddress: s.HealthAddress, MetricsAddress: s.MetricsAddress, Profiling: s.Profiling,
		Readyz:  s.readyz,
		Metrics: promhttp.HandlerFor(s.Gatherer, promhttp.HandlerOpts{}),
		Listen:  listen,
	})
	if err != nil {
		secureLn.Close()
		return err
	}
	s.Log.Info("webhook serving", zap.String("https", secureLn.Addr().String()),
		zap.String("health", s.HealthAddress), zap.String("metrics", s.MetricsAddress))

	select {
	case err := <-errs:
		_ = secure.Close()
		plain.Shutdown(canceled())
		return err
	case err := <-plain.Errors():
		_ = secure.Close()
		plain.Shutdown(canceled())
		return err
	case <-ctx.Done():
	}

	s.draining.Store(true)
	s.Log.Info("shutting down: readiness failing, draining", zap.Duration("drain", s.ShutdownDrain))
	time.Sleep(s.ShutdownDrain)
	close(stopping)
	timeout := s.ShutdownTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	if !shutdownBy(secure, deadline) {
		// Their clients see the connection close and retry elsewhere.
		s.Log.Warn("requests still in flight at the shutdown timeout: connections closed",
			zap.Duration("timeout", timeout), zap.Int("connections", limited.open()))
		_ = secure.Close()
	}
	shutdownCtx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	plain.Shutdown(shutdownCtx)
	s.Log.Info("webhook stopped")
	return nil
}

// shutdownRetell is how often shutdownBy tells HTTP/2 connections again
// to go away.
const shutdownRetell = time.Second

// shutdownBy shuts srv down gracefully and reports whether every
// connection was done by deadline. Go's HTTP/2 server tells only the
// connections it knows when Shutdown starts to go away; one whose
// handshake ends just after is never told (golang/go#81154), and its
// client, the API server, keeps it open for its 90 s idle timeout, so
// Shutdown waited out its whole timeout for it. Each further Shutdown
// call tells the connections that joined since (each is told once).
func shutdownBy(srv *http.Server, deadline time.Time) bool {
	for {
		next := time.Now().Add(shutdownRetell)
		if next.After(deadline) {
			next = deadline
		}
		ctx, cancel := context.WithDeadline(context.Background(), next)
		err := srv.Shutdown(ctx)
		cancel()
		// Any other error is the listener's second close: all is idle.
		if !errors.Is(err, context.DeadlineExceeded) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
	}
}

// closeWhileDraining closes each connection after its response once the
// server is draining, so that clients, which keep sending to this pod over
// connections they already hold, hand them back one by one instead of
// having idle ones closed under them at Shutdown (such a POST fails with
// EOF or a broken pipe and the API server does not retry it). Closing idle
// connections actively (SetKeepAlivesEnabled(false)) has the same race.
func (s *Server) closeWhileDraining(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		} else if s.limiter != nil {
			s.limiter.askToLeave(w, r)
		}
		next.ServeHTTP(w, r)
	})
}

// waitReady waits until Ready reports the server can serve, or stop is
// closed (false).
func (s *Server) waitReady(stop <-chan struct{}) bool {
	for s.Ready != nil && s.Ready() != nil {
		select {
		case <-stop:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

func (s *Server) readyz(*http.Request) error {
	if s.draining.Load() {
		return errors.New("shutting down")
	}
	if s.Ready != nil {
		return s.Ready()
	}
	return nil
}

// canceled is a context that is already done: a shutdown that waits for
// nothing.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
