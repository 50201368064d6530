package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/net/http2"

	"github.com/materializeinc/orchestratord/pkg/servingcert"
)

// Until Ready, the HTTPS listener accepts nothing: a connection waits in its
// backlog (one inherited across a crash holds the API server's dials)
// instead of failing its handshake for want of a certificate; once Ready,
// the same connection is served.
func TestHTTPSAcceptsOnlyOnceReady(t *testing.T) {
	var ready atomic.Bool
	https, _ := runTestServer(t, func(s *Server) {
		s.Ready = func() error {
			if !ready.Load() {
				return errors.New("no certificate yet")
			}
			return nil
		}
	})

	conn, err := net.Dial("tcp", https) // queued by the kernel
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
	conn2, err := net.Dial("tcp", https)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	_ = conn2.SetDeadline(time.Now().Add(30 * time.Second))
	if err := tls.Client(conn2, &tls.Config{InsecureSkipVerify: true}).Handshake(); err != nil {
		t.Fatalf("handshake once ready: %v", err)
	}
}

// gatedConn lets its first write through and holds the others until open
// is closed; held is closed when the second write starts.
type gatedConn struct {
	net.Conn
	writes     atomic.Int32
	held, open chan struct{}
}

func (c *gatedConn) Write(p []byte) (int, error) {
	if c.writes.Add(1) == 2 {
		close(c.held)
	}
	if c.writes.Load() > 1 {
		<-c.open
	}
	return c.Conn.Write(p)
}

// An HTTP/2 connection whose handshake ends just after the shutdown began
// is told to go away too. Go's server tells only the connections it knew
// when Shutdown started (golang/go#81154): the API server kept such a one
// open and the shutdown waited its whole timeout, closing it without a
// GOAWAY.
func TestConnectionJoiningDuringShutdownIsToldToGoAway(t *testing.T) {
	https, stop := runTestServer(t, func(s *Server) { s.ShutdownTimeout = 5 * time.Second })

	// A connection the server knows: the SETTINGS frame that opens its
	// side is sent once it is registered.
	known, err := tls.Dial("tcp", https, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // test
	if err != nil {
		t.Fatal(err)
	}
	defer known.Close()
	knownFrames := startHTTP2(t, known)
	if f, err := knownFrames.ReadFrame(); err != nil {
		t.Fatal(err)
	} else if _, ok := f.(*http2.SettingsFrame); !ok {
		t.Fatalf("first frame %T, want SETTINGS", f)
	}

	raw, err := net.Dial("tcp", https)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	gated := &gatedConn{Conn: raw, held: make(chan struct{}), open: make(chan struct{})}
	conn := tls.Client(gated, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // test
	handshake := make(chan error, 1)
	go func() { handshake <- conn.Handshake() }()
	<-gated.held // the server has answered the ClientHello; it waits for the client's Finished

	stop()
	// The shutdown has told the connections it knew once the known one
	// has its GOAWAY; only then does this one join.
	if err := awaitGoAway(knownFrames); err != nil {
		t.Fatalf("the connection known at the shutdown: %v", err)
	}
	close(gated.open)
	if err := <-handshake; err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if proto := conn.ConnectionState().NegotiatedProtocol; proto != "h2" {
		t.Fatalf("negotiated %q, want h2", proto)
	}
	if err := awaitGoAway(startHTTP2(t, conn)); err != nil {
		t.Fatalf("the connection that joined after: %v", err)
	}
}

// startHTTP2 sends the client's preface and SETTINGS on conn.
func startHTTP2(t *testing.T, conn *tls.Conn) *http2.Framer {
	t.Helper()
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	framer := http2.NewFramer(conn, conn)
	if err := framer.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	return framer
}

// awaitGoAway reads frames until a graceful GOAWAY.
func awaitGoAway(framer *http2.Framer) error {
	for {
		f, err := framer.ReadFrame()
		if err != nil {
			return fmt.Errorf("ended without a GOAWAY: %w", err)
		}
		if goAway, ok := f.(*http2.GoAwayFrame); ok {
			if goAway.ErrCode != http2.ErrCodeNo {
				return fmt.Errorf("GOAWAY %v, want NO_ERROR (graceful)", goAway.ErrCode)
			}
			return nil
		}
	}
}

// runTestServer runs a Server on a loopback listener with a certificate
// for localhost, as configure leaves it, until stop or the test's end; it
// returns the HTTPS address.
func runTestServer(t *testing.T, configure func(*Server)) (https string, stop context.CancelFunc) {
	t.Helper()
	ca, err := servingcert.NewCA("test", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueServing([]string{"localhost"}, nil, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		Log: zap.NewNop(), ListenAddress: "https", HealthAddress: "127.0.0.1:0", MetricsAddress: "127.0.0.1:0",
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil },
		Convert:        http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}),
		Gatherer:       prometheus.NewRegistry(),
		Listen: func(address string) (net.Listener, error) {
			if address == "https" {
				return ln, nil
			}
			return net.Listen("tcp", address)
		},
	}
	configure(s)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	return ln.Addr().String(), stop
}
