package webhook

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

type limitedServer struct {
	t       *testing.T
	addr    string
	limiter *connLimiter
	release chan struct{}
	mu      sync.Mutex
	closed  map[string]int
}

// serveLimited serves plain HTTP behind a connLimiter of maxConns; /block
// answers once release is closed.
func serveLimited(t *testing.T, maxConns int) *limitedServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &limitedServer{t: t, addr: ln.Addr().String(), release: make(chan struct{}), closed: map[string]int{}}
	s.limiter = newConnLimiter(ln, maxConns, func(reason string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed[reason]++
	})
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/block":
				<-s.release
			case "/prove": // as a review answered is
				markProven(r.Context())
			}
			s.limiter.askToLeave(w, r)
			_, _ = io.WriteString(w, "ok")
		}),
		ConnState:   s.limiter.ConnState,
		ConnContext: s.limiter.ConnContext,
	}
	go func() { _ = srv.Serve(s.limiter) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *limitedServer) dial() net.Conn {
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { c.Close() })
	return c
}

// get sends one keep-alive request on c and reads its answer.
func (s *limitedServer) get(c net.Conn, path string) error {
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

func (s *limitedServer) closedFor(reason string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed[reason]
}

// isClosed reports whether the server closed c (a read sees EOF).
func isClosed(c net.Conn) bool { return isClosedWithin(c, 5*time.Second) }

func isClosedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// until waits for cond: the server's goroutines record state changes
// after the client has its answer. Not a performance bound.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

// At the cap, connections that never sent a request make room for new
// ones, oldest first, before idle keep-alive connections do.
func TestConnectionCapEvictsTheOldestWithoutARequest(t *testing.T) {
	s := serveLimited(t, 3)
	idle := s.dial()
	if err := s.get(idle, "/"); err != nil {
		t.Fatal(err)
	}
	silent1, silent2 := s.dial(), s.dial()
	until(t, "3 connections tracked", func() bool { return s.limiter.open() == 3 })

	fresh := s.dial()
	// Proven, so that its answer does not close it (the cap is reached).
	if err := s.get(fresh, "/prove"); err != nil {
		t.Fatalf("a new client at the cap was not served: %v", err)
	}
	if !isClosed(silent1) {
		t.Error("the oldest connection without a request was not closed")
	}
	another := s.dial()
	if err := s.get(another, "/"); err != nil {
		t.Fatal(err)
	}
	if !isClosed(silent2) {
		t.Error("the second silent connection was not closed before the idle one")
	}
	if err := s.get(idle, "/"); err != nil {
		t.Errorf("the idle keep-alive connection was closed while silent ones remained: %v", err)
	}
	if got := s.closedFor("evicted"); got != 2 {
		t.Errorf("evicted = %d, want 2", got)
	}
	if got := s.limiter.open(); got > 3 {
		t.Errorf("%d connections open, cap 3", got)
	}
}

// When every connection has a request in flight, a new one is closed at
// once; once they finish, new clients are served again and nothing leaks.
func TestConnectionCapRefusesWhenEveryConnectionIsBusy(t *testing.T) {
	s := serveLimited(t, 2)
	busy := []net.Conn{s.dial(), s.dial()}
	errs := make(chan error, len(busy))
	for _, c := range busy {
		go func() { errs <- s.get(c, "/block") }()
	}
	until(t, "both requests in flight", func() bool {
		s.limiter.mu.Lock()
		defer s.limiter.mu.Unlock()
		return s.limiter.active == 2
	})
	refused := s.dial()
	if !isClosed(refused) {
		t.Fatal("a connection beyond the cap, every one busy, was kept")
	}
	if got := s.closedFor("refused"); got != 1 {
		t.Errorf("refused = %d, want 1", got)
	}
	close(s.release)
	for range busy {
		if err := <-errs; err != nil {
			t.Errorf("a request in flight at the cap failed: %v", err)
		}
	}
	// The server records a connection idle (or closes it) after its
	// client has read the answer: until then both still count as busy,
	// and a loaded machine can show that window to the next client.
	until(t, "no request in flight", func() bool {
		s.limiter.mu.Lock()
		defer s.limiter.mu.Unlock()
		return s.limiter.active == 0
	})
	if err := s.get(s.dial(), "/"); err != nil {
		t.Errorf("after the busy requests: %v", err)
	}
	for _, c := range busy {
		c.Close()
	}
	until(t, "closed connections forgotten", func() bool { return s.limiter.open() <= 1 })
}

// Over TLS, as the webhook serves, the server reports the states of the
// *tls.Conn wrapping the limiter's connection: the limiter must still see
// a connection go active and idle, or it would evict one mid-request.
func TestConnectionCapFollowsTLSConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limiter := newConnLimiter(ln, 4, func(string) {})
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			<-release
		}
	}))
	srv.Listener = limiter
	srv.Config.ConnState = limiter.ConnState
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()

	done := make(chan error, 1)
	go func() {
		resp, err := client.Get(srv.URL + "/block")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	until(t, "the request in flight counted active", func() bool {
		limiter.mu.Lock()
		defer limiter.mu.Unlock()
		return limiter.active == 1
	})
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	until(t, "the connection counted idle after its answer", func() bool {
		limiter.mu.Lock()
		defer limiter.mu.Unlock()
		return limiter.active == 0 && limiter.idle.Len() == 1
	})
}

// A connection that has had a review answered is closed to make room only
// when every connection without a request is proven, and then the one idle
// longest: an unproven idle one goes first.
func TestConnectionCapEvictsProvenConnectionsLast(t *testing.T) {
	s := serveLimited(t, 2)
	idle := s.dial()
	if err := s.get(idle, "/"); err != nil {
		t.Fatal(err)
	}
	proven := s.dial()
	if err := s.get(proven, "/prove"); err != nil {
		t.Fatal(err)
	}
	// Both idle (the server records that after its answer).
	until(t, "2 idle connections", func() bool {
		s.limiter.mu.Lock()
		defer s.limiter.mu.Unlock()
		return s.limiter.idle.Len() == 2
	})
	fresh := s.dial()
	if err := s.get(fresh, "/prove"); err != nil {
		t.Fatalf("a new client at the cap was not served: %v", err)
	}
	if !isClosed(idle) {
		t.Error("the unproven idle connection was kept")
	}
	idleFront := func() *limitedConn {
		s.limiter.mu.Lock()
		defer s.limiter.mu.Unlock()
		if s.limiter.idle.Len() != 2 {
			return nil
		}
		return s.limiter.idle.Front().Value.(*limitedConn)
	}
	until(t, "both idle", func() bool { return idleFront() != nil })
	longest := idleFront() // proven's: idle before fresh
	if err := s.get(proven, "/"); err != nil {
		t.Fatalf("the proven connection was closed: %v", err)
	}
	until(t, "proven idle again, after fresh", func() bool { f := idleFront(); return f != nil && f != longest })
	// Both proven, fresh idle longest: it makes room.
	newcomer := s.dial()
	if err := s.get(newcomer, "/prove"); err != nil {
		t.Fatalf("a newcomer, every open connection proven: %v", err)
	}
	if !isClosed(fresh) {
		t.Error("the proven connection idle longest was kept")
	}
	if err := s.get(proven, "/"); err != nil {
		t.Errorf("the proven connection used last was closed: %v", err)
	}
}

// While the cap is reached an answer on an unproven connection closes it
// (Connection: close), one on a proven connection does not.
func TestAtTheCapUnprovenConnectionsAreAskedToLeave(t *testing.T) {
	s := serveLimited(t, 2)
	proven, other := s.dial(), s.dial()
	if err := s.get(proven, "/prove"); err != nil {
		t.Fatal(err)
	}
	until(t, "2 connections tracked", func() bool { return s.limiter.open() == 2 })
	req := func(c net.Conn) *http.Response {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := req(other); !resp.Close {
		t.Error("at the cap, an unproven connection's answer did not close it")
	}
	if resp := req(proven); resp.Close {
		t.Error("a proven connection's answer closed it")
	}
}

// Each connection is charged what it can hold: when the budget cannot take
// one more, a new connection is closed (closing another would not free
// what reviews hold).
func TestConnectionsAreChargedToTheBudget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var b budget
	// Connections may hold half the limit: two of them.
	limit := int64(4*connectionMemory + connectionMemory/2)
	var closedMu sync.Mutex
	closed := map[string]int{}
	l := newConnLimiter(ln, 100, func(reason string) {
		closedMu.Lock()
		defer closedMu.Unlock()
		closed[reason]++
	})
	l.charge = func(n int64) bool { return b.chargeConnection(n, limit) }
	l.refund = b.refundConnection
	defer l.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	<-accepted
	<-accepted
	if !isClosed(clients[2]) {
		t.Error("a connection beyond the budget was kept")
	}
	open := l.open()
	closedMu.Lock()
	refused, evicted := closed["refused"], closed["evicted"]
	closedMu.Unlock()
	if open != 2 || refused != 1 || evicted != 0 {
		t.Errorf("%d open, %d refused, %d evicted; want 2, 1, 0 (the connections' half holds two)", open, refused, evicted)
	}
	if isClosedWithin(clients[0], 100*time.Millisecond) {
		t.Error("an open connection was closed for one the budget could not take")
	}
	if b.memory != 2*connectionMemory {
		t.Errorf("charged %d, want %d", b.memory, 2*connectionMemory)
	}
}

// recordingConn keeps what the server sent on a client's connection.
type recordingConn struct {
	net.Conn
	mu   sync.Mutex
	read []byte
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.read = append(c.read, p[:n]...)
	c.mu.Unlock()
	return n, err
}

// frameTypes lists the types of the HTTP/2 frames in what a server sent.
func (c *recordingConn) frameTypes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var types []byte
	for b := c.read; len(b) >= 9; {
		n := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
		types = append(types, b[3])
		if len(b) < 9+n {
			break
		}
		b = b[9+n:]
	}
	return types
}

// An idle HTTP/2 connection closed to make room is told GOAWAY first.
func TestEvictedHTTP2ConnectionIsToldGOAWAY(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	limiter := newConnLimiter(srv.Listener, 1, func(string) {})
	srv.Listener = limiter
	srv.Config.ConnState = limiter.ConnState
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	var conn *recordingConn
	client := &http.Client{Transport: &http2.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
			cfg.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
			tc, err := tls.Dial(network, addr, cfg)
			if err != nil {
				return nil, err
			}
			conn = &recordingConn{Conn: tc}
			return conn, nil
		},
	}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("served over %s, want HTTP/2", resp.Proto)
	}
	until(t, "the connection idle", func() bool {
		limiter.mu.Lock()
		defer limiter.mu.Unlock()
		return limiter.idle.Len() == 1
	})
	// Idle long enough that its last answer is flushed (goAwayGrace).
	time.Sleep(goAwayGrace + 100*time.Millisecond)
	newcomer, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // a test client
	if err != nil {
		t.Fatal(err)
	}
	defer newcomer.Close()
	until(t, "a GOAWAY on the evicted connection", func() bool {
		return bytes.IndexByte(conn.frameTypes(), 0x7) >= 0
	})
}

// Reviews leave room for new connections: a client whose connection was
// closed comes back while large reviews fill the rest of the budget.
func TestReviewsLeaveRoomForNewConnections(t *testing.T) {
	var b budget
	limit := int64(64 << 20)
	if !b.admitReview(limit-connectionReserve, limit, 10) {
		t.Fatal("a review within the budget less the connections' reserve was refused")
	}
	if b.charge(1, limit) || b.admitReview(1, limit, 10) {
		t.Error("a review's charge took the connections' reserve")
	}
	for i := range connectionReserve / connectionMemory {
		if !b.chargeConnection(connectionMemory, limit) {
			t.Fatalf("new connection %d refused while reviews fill the rest of the budget", i+1)
		}
	}
	if b.chargeConnection(connectionMemory, limit) {
		t.Error("a connection beyond the whole budget was charged")
	}
	b.releaseReview(limit - connectionReserve)
	if !b.chargeConnection(connectionMemory, limit) {
		t.Error("a connection refused with the budget free")
	}
	for b.chargeConnection(connectionMemory, limit) {
	}
	if b.connections > limit/2 {
		t.Errorf("connections hold %d, more than half the budget (%d)", b.connections, limit/2)
	}
}
