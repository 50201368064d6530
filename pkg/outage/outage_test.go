package outage

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// apiServer serves on one address it can leave and come back to.
type apiServer struct {
	t    *testing.T
	addr string
	srv  *http.Server
}

func (a *apiServer) up() {
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		a.t.Fatal(err)
	}
	a.addr = ln.Addr().String()
	a.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path)
	})}
	go func() { _ = a.srv.Serve(ln) }()
}

func (a *apiServer) down() { _ = a.srv.Close() }

// countingTransport counts the requests that reach the network.
type countingTransport struct {
	next  http.RoundTripper
	sent  atomic.Int64
	probe atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/readyz" {
		c.probe.Add(1)
	} else {
		c.sent.Add(1)
	}
	return c.next.RoundTrip(req)
}

func TestReadsWaitOutAnOutage(t *testing.T) {
	api := &apiServer{t: t, addr: "127.0.0.1:0"}
	api.up()
	t.Cleanup(api.down)
	counting := &countingTransport{next: &http.Transport{DisableKeepAlives: true}}
	resent := Resent()
	transport := Wrap(10*time.Millisecond, resent)(counting).(*Transport)
	client := &http.Client{Transport: transport}
	url := "http://" + api.addr

	get := func(ctx context.Context) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/apis/x", nil)
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if got, err := get(context.Background()); err != nil || got != "/apis/x" {
		t.Fatalf("before the outage: %q, %v", got, err)
	}

	api.down()
	// A write fails at once: whether it took effect is its caller's
	// question.
	if _, err := client.Post(url+"/apis/x", "application/json", nil); err == nil {
		t.Fatal("a POST to a server that is down succeeded")
	}
	// A read whose caller gives up returns the outage's error.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := get(ctx)
	cancel()
	if err == nil || !unreachable(errors.Unwrap(err)) {
		t.Fatalf("a read given up during the outage: %v, want the connection error", err)
	}

	reads := make(chan error, 3)
	for range 3 {
		go func() {
			got, err := get(context.Background())
			if err == nil && got != "/apis/x" {
				err = errors.New("wrong answer " + got)
			}
			reads <- err
		}()
	}
	// Every read is waiting on the one prober.
	for {
		transport.mu.Lock()
		waiting := transport.waiting
		transport.mu.Unlock()
		if waiting == 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for probes := counting.probe.Load(); counting.probe.Load() < probes+3; {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-reads:
		t.Fatalf("a read returned during the outage: %v", err)
	default:
	}
	if sent := counting.sent.Load(); sent > 6 { // 1 before, 1 POST, 1 given up, 3 waiting
		t.Errorf("%d reads sent during the outage: the waiting ones must not retry on their own", sent)
	}
	api.up()
	for range 3 {
		if err := <-reads; err != nil {
			t.Errorf("a read that waited out the outage: %v", err)
		}
	}
	if got := testutil.ToFloat64(resent); got != 3 {
		t.Errorf("resent = %v, want the 3 reads that waited", got)
	}
}

// A server that answers probes but cuts every read off does not keep a
// read looping: it fails after a few resends.
func TestResendsAreBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			return
		}
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	counting := &countingTransport{next: &http.Transport{DisableKeepAlives: true}}
	client := &http.Client{Transport: Wrap(time.Millisecond, nil)(counting)}
	if _, err := client.Get("http://" + ln.Addr().String() + "/apis/x"); err == nil {
		t.Fatal("a read the server always cuts off succeeded")
	}
	if sent := counting.sent.Load(); sent != maxResends+1 {
		t.Errorf("sent %d times, want %d", sent, maxResends+1)
	}
}
