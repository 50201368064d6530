package environmentd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// server answers each request with the given code and body; the returned
// function gives the method and path of the last request.
func server(t *testing.T, code int, body string) (*httptest.Server, func() string) {
	t.Helper()
	var (
		mu  sync.Mutex
		got string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Method + " " + r.URL.Path
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, func() string {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

func TestStatusEachValue(t *testing.T) {
	for _, want := range []LeaderStatus{Initializing, CatchingUp, ReadyToPromote, Promoting, IsLeader} {
		t.Run(string(want), func(t *testing.T) {
			srv, got := server(t, http.StatusOK, fmt.Sprintf(`{"status":%q}`, want))
			s, err := (&Client{}).Status(context.Background(), srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			if s != want {
				t.Errorf("status = %q, want %q", s, want)
			}
			if got() != "GET /api/leader/status" {
				t.Errorf("request = %q", got())
			}
		})
	}
}

func TestStatusTrailingSlashAndPrefix(t *testing.T) {
	srv, got := server(t, http.StatusOK, `{"status":"IsLeader"}`)
	if _, err := (&Client{HTTP: srv.Client()}).Status(context.Background(), srv.URL+"/gen-2/"); err != nil {
		t.Fatal(err)
	}
	if got() != "GET /gen-2/api/leader/status" {
		t.Errorf("request = %q", got())
	}
}

func TestStatusUnknown(t *testing.T) {
	srv, _ := server(t, http.StatusOK, `{"status":"Sleeping"}`)
	_, err := (&Client{}).Status(context.Background(), srv.URL)
	if err == nil || !strings.Contains(err.Error(), `"Sleeping"`) {
		t.Fatalf("err = %v, want one naming \"Sleeping\"", err)
	}
}

func TestStatusMalformed(t *testing.T) {
	for name, body := range map[string]string{
		"not json":     `status: IsLeader`,
		"truncated":    `{"status":"IsLea`,
		"wrong type":   `{"status":3}`,
		"missing":      `{}`,
		"empty body":   ``,
		"empty status": `{"status":""}`,
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := server(t, http.StatusOK, body)
			s, err := (&Client{}).Status(context.Background(), srv.URL)
			if err == nil {
				t.Fatalf("status = %q, want an error", s)
			}
		})
	}
}

func TestStatusNon2xx(t *testing.T) {
	srv, _ := server(t, http.StatusServiceUnavailable, `not ready`)
	_, err := (&Client{}).Status(context.Background(), srv.URL)
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("err = %v, want one naming 503 and the body", err)
	}
	if !IsStatusError(err, http.StatusServiceUnavailable) {
		t.Errorf("IsStatusError(%v, 503) = false", err)
	}
}

func TestStatusBodyTooLarge(t *testing.T) {
	srv, _ := server(t, http.StatusOK, `{"status":"IsLeader","pad":"`+strings.Repeat("x", MaxBodyBytes)+`"}`)
	_, err := (&Client{}).Status(context.Background(), srv.URL)
	if err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("err = %v, want a size-limit error", err)
	}
}

func TestPromoteSuccess(t *testing.T) {
	srv, got := server(t, http.StatusOK, `{"result":"Success"}`)
	if err := (&Client{}).Promote(context.Background(), srv.URL); err != nil {
		t.Fatal(err)
	}
	if got() != "POST /api/leader/promote" {
		t.Errorf("request = %q", got())
	}
}

func TestPromoteFailure(t *testing.T) {
	long := strings.Repeat("y", 1000)
	for name, tc := range map[string]struct {
		code     int
		body     string
		contains string
	}{
		"failure result": {http.StatusOK, `{"result":{"Failure":{"message":"boom"}}}`, "boom"},
		// environmentd's refusal before it is ready (src/environmentd/src/http.rs).
		"refused": {http.StatusBadRequest, `{"result":{"Failure":{"message":"cannot promote leader while initializing"}}}`,
			"environmentd refused the promotion: cannot promote leader while initializing"},
		"other string": {http.StatusOK, `{"result":"Nope"}`, "Nope"},
		"no result":    {http.StatusOK, `{}`, "{}"},
		"malformed":    {http.StatusOK, `<html>`, "<html>"},
		"conflict":     {http.StatusConflict, `{"error":"not ready"}`, "409"},
		"server error": {http.StatusInternalServerError, `oops`, "500"},
		"long body":    {http.StatusOK, long, "yyy..."},
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := server(t, tc.code, tc.body)
			err := (&Client{}).Promote(context.Background(), srv.URL)
			if err == nil || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("err = %v, want one containing %q", err, tc.contains)
			}
			if len(err.Error()) > 600 {
				t.Errorf("error message is %d bytes long; body not truncated", len(err.Error()))
			}
		})
	}
}

func TestCancelledContext(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	// Already cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (&Client{}).Status(ctx, srv.URL); !errors.Is(err, context.Canceled) {
		t.Errorf("Status with cancelled context: err = %v, want context.Canceled", err)
	}
	if err := (&Client{}).Promote(ctx, srv.URL); !errors.Is(err, context.Canceled) {
		t.Errorf("Promote with cancelled context: err = %v, want context.Canceled", err)
	}

	// Cancelled while the server is still answering.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	if _, err := (&Client{}).Status(ctx, srv.URL); !errors.Is(err, context.Canceled) {
		t.Errorf("Status cancelled in flight: err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Status returned %v after cancellation", d)
	}
}

func TestURL(t *testing.T) {
	got := URL("http", "mzabc-environmentd-2", "materialize-env", 6878)
	want := "http://mzabc-environmentd-2.materialize-env.svc.cluster.local:6878"
	if got != want {
		t.Errorf("URL = %q, want %q", got, want)
	}
}

// A password makes every call log in as mz_system first and carry the
// session cookie; a wrong password fails with the login's status.
func TestPasswordLogsInAndSendsSession(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		mu.Unlock()
		switch r.URL.Path {
		case LoginPath:
			var creds struct{ Username, Password string }
			if err := json.NewDecoder(r.Body).Decode(&creds); err != nil || creds.Username != SystemUser || creds.Password != "secret" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1", Path: "/"})
		case StatusPath:
			if c, err := r.Cookie("session"); err != nil || c.Value != "s1" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			io.WriteString(w, `{"status":"IsLeader"}`)
		}
	}))
	t.Cleanup(srv.Close)
	// The test server's certificate is self-signed: with a password the
	// client does not verify it, as upstream does not.
	s, err := (&Client{}).WithPassword("secret").Status(context.Background(), srv.URL)
	if err != nil || s != IsLeader {
		t.Fatalf("Status = %q, %v", s, err)
	}
	if want := []string{"POST " + LoginPath, "GET " + StatusPath}; fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("calls = %v, want %v", calls, want)
	}
	if _, err := (&Client{}).WithPassword("wrong").Status(context.Background(), srv.URL); !IsStatusError(err, http.StatusUnauthorized) {
		t.Errorf("wrong password: err = %v, want a 401 StatusError", err)
	}
	// Without a password the certificate is verified.
	if _, err := (&Client{}).Status(context.Background(), srv.URL); err == nil {
		t.Error("an unverified certificate was accepted without a password")
	}
}

func TestSkipCatchup(t *testing.T) {
	srv, got := server(t, http.StatusOK, ``)
	if err := (&Client{}).SkipCatchup(context.Background(), srv.URL); err != nil {
		t.Fatal(err)
	}
	if got() != "POST "+SkipCatchupPath {
		t.Errorf("request = %q", got())
	}
	bad, _ := server(t, http.StatusBadRequest, `{"message":"not catching up"}`)
	err := (&Client{}).SkipCatchup(context.Background(), bad.URL)
	if err == nil || err.Error() != "failed to skip catchup: not catching up" {
		t.Errorf("err = %v", err)
	}
}

// environmentd's image is the tenant's, so its answer may be a redirect to
// another environment's leader API, which admits the operator. No call
// follows one, with or without a login or a client of the caller's: the
// redirect is an error, and the other environment is never called.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var victimCalls sync.Map
	victim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		victimCalls.Store(r.Method+" "+r.URL.Path, true)
		io.WriteString(w, `{"result":"Success","status":"IsLeader"}`)
	}))
	t.Cleanup(victim.Close)
	// The login, which carries mz_system's password, is not followed either.
	loginRedirected := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, victim.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(loginRedirected.Close)
	if _, err := (&Client{}).WithPassword("secret").Status(context.Background(), loginRedirected.URL); err == nil {
		t.Error("a redirected login succeeded")
	}
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == LoginPath {
				http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1", Path: "/"})
				return
			}
			http.Redirect(w, r, victim.URL+r.URL.Path, code)
		}))
		t.Cleanup(attacker.Close)
		for name, c := range map[string]*Client{
			"default":       {},
			"password":      (&Client{}).WithPassword("secret"),
			"caller's HTTP": {HTTP: &http.Client{Timeout: time.Second}},
		} {
			ctx := context.Background()
			if err := c.Promote(ctx, attacker.URL); !IsStatusError(err, code) {
				t.Errorf("%d, %s: Promote err = %v, want the redirect as a StatusError", code, name, err)
			}
			if err := c.SkipCatchup(ctx, attacker.URL); !IsStatusError(err, code) {
				t.Errorf("%d, %s: SkipCatchup err = %v, want the redirect as a StatusError", code, name, err)
			}
			if _, err := c.Status(ctx, attacker.URL); !IsStatusError(err, code) {
				t.Errorf("%d, %s: Status err = %v, want the redirect as a StatusError", code, name, err)
			}
		}
	}
	victimCalls.Range(func(call, _ any) bool {
		t.Errorf("the other environment was called: %s", call)
		return true
	})
}

// Timed adds up what each call takes, to the end of its answer, a login
// included, and keeps the caller's Wrap (the lease fence) on every call.
func TestTimedAddsUpEachCall(t *testing.T) {
	const delay = 50 * time.Millisecond
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		if r.URL.Path == LoginPath {
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1", Path: "/"})
			return
		}
		w.(http.Flusher).Flush()
		time.Sleep(delay) // the body comes later: counted too
		io.WriteString(w, `{"status":"IsLeader"}`)
	}))
	t.Cleanup(srv.Close)
	wrapped := 0
	c := &Client{Wrap: func(rt http.RoundTripper) http.RoundTripper {
		wrapped++
		return rt
	}}
	var spent time.Duration
	if _, err := c.WithPassword("secret").Timed(&spent).Status(context.Background(), srv.URL); err != nil {
		t.Fatal(err)
	}
	if spent < 3*delay {
		t.Errorf("spent %v, want at least the login's and the status's %v", spent, 3*delay)
	}
	if wrapped == 0 {
		t.Error("the caller's Wrap was dropped")
	}
	before := spent
	if _, err := c.Timed(&spent).Status(context.Background(), "http://127.0.0.1:1"); err == nil {
		t.Fatal("a closed port answered")
	}
	if spent <= before {
		t.Error("a failed call added nothing")
	}
}
