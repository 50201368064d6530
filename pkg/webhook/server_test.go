package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/materializeinc/orchestratord/pkg/servingcert"
)

// Until Ready, the HTTPS listener accepts nothing: a connection waits in its
// backlog (one inherited across a crash holds the API server's dials)
// instead of failing its handshake for want of a certificate; once Ready,
// the same connection is served.
func TestHTTPSAcceptsOnlyOnceReady(t *testing.T) {
	ca, err := servingcert.NewCA("test", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueServing([]string{"localhost"}, nil, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	https, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var ready atomic.Bool
	s := &Server{
		Log: zap.NewNop(), ListenAddress: "https", HealthAddress: "127.0.0.1:0", MetricsAddress: "127.0.0.1:0",
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil },
		Ready: func() error {
			if !ready.Load() {
				return errors.New("no certificate yet")
			}
			return nil
		},
		Convert:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}),
		Gatherer: prometheus.NewRegistry(),
		Listen: func(address string) (net.Listener, error) {
			if address == "https" {
				return https, nil
			}
			return net.Listen("tcp", address)
		},
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })

	conn, err := net.Dial("tcp", https.Addr().String()) // queued by the kernel
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := tls.Client(conn, &tls.Config{InsecureSkipVerify: true})
	_ = conn.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if err := client.Handshake(); err == nil {
		t.Fatal("handshake completed before the server was ready")
	}
	// A fresh connection (the timed-out handshake above left its own
	// half-written) is served once ready.
	ready.Store(true)
	conn2, err := net.Dial("tcp", https.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	_ = conn2.SetDeadline(time.Now().Add(30 * time.Second))
	if err := tls.Client(conn2, &tls.Config{InsecureSkipVerify: true}).Handshake(); err != nil {
		t.Fatalf("handshake once ready: %v", err)
	}
}
