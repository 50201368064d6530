package webhook

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
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
			if r.URL.Path == "/block" {
				<-s.release
			}
			_, _ = io.WriteString(w, "ok")
		}),
		ConnState: s.limiter.ConnState,
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
func isClosed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
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
	if err := s.get(fresh, "/"); err != nil {
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
