package environmentd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
)

func start(t *testing.T, auto bool) (*Server, *httptest.Server) {
	t.Helper()
	s := New()
	s.AutoAdvance = auto
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return s, hs
}

func mustStatus(t *testing.T, c *mzenv.Client, base string, want mzenv.LeaderStatus) {
	t.Helper()
	got, err := c.Status(context.Background(), base)
	if err != nil {
		t.Fatalf("Status(%s): %v", base, err)
	}
	if got != want {
		t.Fatalf("Status(%s) = %s, want %s", base, got, want)
	}
}

func TestAutoAdvanceRollout(t *testing.T) {
	s, hs := start(t, true)
	c := &mzenv.Client{}
	base := hs.URL + "/mzabc-environmentd-2"

	if got := s.Status("mzabc-environmentd-2"); got != mzenv.Initializing {
		t.Errorf("initial Status = %s, want Initializing (catching up)", got)
	}
	mustStatus(t, c, base, mzenv.Initializing)
	mustStatus(t, c, base, mzenv.ReadyToPromote)
	mustStatus(t, c, base, mzenv.ReadyToPromote)
	if err := c.Promote(context.Background(), base); err != nil {
		t.Fatal(err)
	}
	if got := s.Status("mzabc-environmentd-2"); got != mzenv.Promoting {
		t.Errorf("Status after promote = %s, want Promoting", got)
	}
	mustStatus(t, c, base, mzenv.IsLeader)
	mustStatus(t, c, base, mzenv.IsLeader)

	// A second promote of the leader is a no-op, as environmentd's.
	if err := c.Promote(context.Background(), base); err != nil {
		t.Errorf("promote of leader: err = %v, want success", err)
	}
	if got := s.Promotions("mzabc-environmentd-2"); got != 1 {
		t.Errorf("Promotions = %d, want 1", got)
	}
	if got := s.Requests("/mzabc-environmentd-2/"); got != 7 {
		t.Errorf("Requests = %d, want 7", got)
	}
}

// With Catalog, AutoAdvance follows upstream's 0dt preflight: the first
// generation of an environment finds its catalog fresh and leads without a
// promotion; the next catches up and waits for one; another environment's
// catalog is its own.
func TestAutoAdvanceOpensAFreshCatalog(t *testing.T) {
	s, hs := start(t, true)
	s.Catalog = ServiceCatalog
	c := &mzenv.Client{}
	first := hs.URL + "/mzabc-environmentd-1"
	mustStatus(t, c, first, mzenv.Initializing)
	mustStatus(t, c, first, mzenv.IsLeader)
	mustStatus(t, c, first, mzenv.IsLeader)
	if got := s.Promotions("mzabc-environmentd-1"); got != 0 {
		t.Errorf("Promotions = %d, want 0: a fresh catalog's leader is not promoted", got)
	}

	second := hs.URL + "/mzabc-environmentd-2"
	mustStatus(t, c, second, mzenv.Initializing)
	mustStatus(t, c, second, mzenv.ReadyToPromote)
	if err := c.Promote(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, c, second, mzenv.IsLeader)

	// Generation 1 again: the catalog is generation 2's now, so it is
	// fenced out and exits, as upstream's preflight: nothing answers for
	// it, and it cannot be promoted.
	s.SetStatus("mzabc-environmentd-1", mzenv.CatchingUp)
	if got, err := c.Status(context.Background(), first); err == nil {
		t.Errorf("Status of a fenced-out generation = %s, want an error", got)
	}
	if err := c.Promote(context.Background(), first); err == nil {
		t.Error("a fenced-out generation was promoted")
	}

	other := hs.URL + "/mzdef-environmentd-1"
	mustStatus(t, c, other, mzenv.Initializing)
	mustStatus(t, c, other, mzenv.IsLeader)
}

func TestServiceCatalog(t *testing.T) {
	for _, c := range []struct {
		prefix string
		env    string
		gen    uint64
		ok     bool
	}{
		{"mzabc-environmentd-1", "mzabc", 1, true},
		{"a/b/mzabc-environmentd-12", "mzabc", 12, true},
		{"mzabc-environmentd-", "", 0, false},
		{"mzabc-environmentd-x", "", 0, false},
		{"-environmentd-1", "", 0, false},
		{"mzabc-balancerd", "", 0, false},
		{"", "", 0, false},
	} {
		env, gen, ok := ServiceCatalog(c.prefix)
		if env != c.env || gen != c.gen || ok != c.ok {
			t.Errorf("ServiceCatalog(%q) = %q, %d, %v; want %q, %d, %v", c.prefix, env, gen, ok, c.env, c.gen, c.ok)
		}
	}
}

func TestPrefixesAreIndependent(t *testing.T) {
	s, hs := start(t, true)
	c := &mzenv.Client{}

	s.SetStatus("gen-1", mzenv.IsLeader)
	mustStatus(t, c, hs.URL+"/gen-1", mzenv.IsLeader)
	mustStatus(t, c, hs.URL+"/gen-2/", mzenv.Initializing)
	mustStatus(t, c, hs.URL, mzenv.Initializing)
	mustStatus(t, c, hs.URL+"/ns/a/b", mzenv.Initializing)
	mustStatus(t, c, hs.URL+"/gen-2", mzenv.ReadyToPromote)

	if got := s.Status("gen-1"); got != mzenv.IsLeader {
		t.Errorf("gen-1 = %s", got)
	}
	if got, want := fmt.Sprint(s.Prefixes()), "[ gen-1 gen-2 ns/a/b]"; got != want {
		t.Errorf("Prefixes = %s, want %s", got, want)
	}
	if got := s.Requests(""); got != 1 {
		t.Errorf("Requests(\"\") = %d, want 1", got)
	}
	if got := s.Requests("never"); got != 0 {
		t.Errorf("Requests(never) = %d, want 0", got)
	}
}

func TestManual(t *testing.T) {
	s, hs := start(t, false)
	c := &mzenv.Client{}
	base := hs.URL + "/g"

	mustStatus(t, c, base, mzenv.Initializing)
	mustStatus(t, c, base, mzenv.Initializing)

	s.SetStatus("g", mzenv.CatchingUp)
	mustStatus(t, c, base, mzenv.Initializing)
	mustStatus(t, c, base, mzenv.Initializing)

	s.SetStatus("g", mzenv.ReadyToPromote)
	if err := c.Promote(context.Background(), base); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, c, base, mzenv.Promoting)
	mustStatus(t, c, base, mzenv.Promoting)
	s.SetStatus("g", mzenv.IsLeader)
	mustStatus(t, c, base, mzenv.IsLeader)
	if got := s.Promotions("g"); got != 1 {
		t.Errorf("Promotions = %d, want 1", got)
	}
}

func TestAutoAdvanceHoldsAndRestarts(t *testing.T) {
	s, hs := start(t, true)
	c := &mzenv.Client{}
	base := hs.URL + "/g"

	s.SetStatus("g", mzenv.Initializing)
	for range 3 {
		mustStatus(t, c, base, mzenv.Initializing)
	}
	s.SetStatus("g", mzenv.CatchingUp)
	mustStatus(t, c, base, mzenv.Initializing)
	mustStatus(t, c, base, mzenv.ReadyToPromote)

	s.SetAutoAdvance(false)
	if err := c.Promote(context.Background(), base); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, c, base, mzenv.Promoting)
	s.SetAutoAdvance(true)
	mustStatus(t, c, base, mzenv.IsLeader)
}

// Promote and skip-catchup answer as environmentd's handlers
// (src/environmentd/src/http.rs over deployment/state.rs) in every phase.
func TestLeaderAPIAnswersAsEnvironmentd(t *testing.T) {
	failure := `{"result":{"Failure":{"message":"cannot promote leader while initializing"}}}`
	skipRefused := `{"message":"cannot skip catchup in this phase of initialization; try again later"}`
	for _, tc := range []struct {
		phase                mzenv.LeaderStatus
		promoteCode          int
		promoteBody          string
		afterPromote         mzenv.LeaderStatus
		skipCode             int
		skipBody             string
		afterSkip            mzenv.LeaderStatus
		promotionsAfterCalls int
	}{
		{mzenv.Initializing, 400, failure, mzenv.Initializing, 400, skipRefused, mzenv.Initializing, 0},
		{mzenv.CatchingUp, 400, failure, mzenv.Initializing, 204, "", mzenv.ReadyToPromote, 0},
		{mzenv.ReadyToPromote, 200, `{"result":"Success"}`, mzenv.Promoting, 204, "", mzenv.ReadyToPromote, 1},
		{mzenv.Promoting, 200, `{"result":"Success"}`, mzenv.Promoting, 204, "", mzenv.Promoting, 0},
		{mzenv.IsLeader, 200, `{"result":"Success"}`, mzenv.IsLeader, 204, "", mzenv.IsLeader, 0},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			post := func(s *Server, base, path string) (int, string) {
				resp, err := http.Post(base+"/g"+path, "application/json", nil)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, strings.TrimSpace(string(b))
			}
			s, hs := start(t, false)
			s.SetStatus("g", tc.phase)
			if code, body := post(s, hs.URL, mzenv.PromotePath); code != tc.promoteCode || body != tc.promoteBody {
				t.Errorf("promote: %d %s, want %d %s", code, body, tc.promoteCode, tc.promoteBody)
			}
			if got := s.Status("g"); got != tc.afterPromote {
				t.Errorf("after promote: %s, want %s", got, tc.afterPromote)
			}
			if got := s.Promotions("g"); got != tc.promotionsAfterCalls {
				t.Errorf("promotions = %d, want %d", got, tc.promotionsAfterCalls)
			}

			s, hs = start(t, false)
			s.SetStatus("g", tc.phase)
			if code, body := post(s, hs.URL, mzenv.SkipCatchupPath); code != tc.skipCode || body != tc.skipBody {
				t.Errorf("skip-catchup: %d %s, want %d %s", code, body, tc.skipCode, tc.skipBody)
			}
			if got := s.Status("g"); got != tc.afterSkip {
				t.Errorf("after skip-catchup: %s, want %s", got, tc.afterSkip)
			}
		})
	}
}

// The single-process Deployment answers the same way and hands the
// operator's calls to the process.
func TestDeploymentHandsSkipAndPromoteToTheProcess(t *testing.T) {
	d := NewDeployment()
	hs := httptest.NewServer(d)
	t.Cleanup(hs.Close)
	c := &mzenv.Client{}
	mustStatus(t, c, hs.URL, mzenv.Initializing)
	if err := c.SkipCatchup(context.Background(), hs.URL); err == nil {
		t.Error("skip-catchup while initializing succeeded")
	}
	skipped := d.SetCatchingUp()
	mustStatus(t, c, hs.URL, mzenv.Initializing)
	if err := c.Promote(context.Background(), hs.URL); err == nil || !strings.Contains(err.Error(), "cannot promote leader while initializing") {
		t.Errorf("promote while catching up: %v", err)
	}
	if err := c.SkipCatchup(context.Background(), hs.URL); err != nil {
		t.Fatal(err)
	}
	<-skipped
	promoted := d.SetReadyToPromote()
	mustStatus(t, c, hs.URL, mzenv.ReadyToPromote)
	if err := c.Promote(context.Background(), hs.URL); err != nil {
		t.Fatal(err)
	}
	<-promoted
	mustStatus(t, c, hs.URL, mzenv.Promoting)
	if err := c.Promote(context.Background(), hs.URL); err != nil {
		t.Errorf("second promote: %v", err)
	}
	d.SetIsLeader()
	mustStatus(t, c, hs.URL, mzenv.IsLeader)
}

func TestMethodsAndPaths(t *testing.T) {
	s, hs := start(t, true)
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{http.MethodPost, "/g/api/leader/status", http.StatusMethodNotAllowed},
		{http.MethodGet, "/g/api/leader/promote", http.StatusMethodNotAllowed},
		{http.MethodGet, "/g/api/leader", http.StatusNotFound},
		{http.MethodGet, "/gapi/leader/status", http.StatusNotFound},
		{http.MethodGet, "/api/readyz", http.StatusOK},
		{http.MethodGet, "/g/api/livez", http.StatusOK},
	} {
		req, _ := http.NewRequest(tc.method, hs.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s %s: code %d, want %d", tc.method, tc.path, resp.StatusCode, tc.code)
		}
	}
	if got := s.Requests("g"); got != 2 {
		t.Errorf("Requests(g) = %d, want 2 (the 405s)", got)
	}
	if got := s.Status("g"); got != mzenv.Initializing {
		t.Errorf("Status(g) = %s after wrong-method requests, want Initializing", got)
	}
}

func TestStartClose(t *testing.T) {
	s := New()
	s.AutoAdvance = true
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.URL() != url || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("url = %q, URL() = %q", url, s.URL())
	}
	if _, err := s.Start("127.0.0.1:0"); err == nil {
		t.Error("second Start succeeded")
	}
	if got, want := s.BaseURL("/gen-3/"), url+"/gen-3"; got != want {
		t.Errorf("BaseURL = %q, want %q", got, want)
	}
	c := &mzenv.Client{}
	mustStatus(t, c, s.BaseURL("gen-3"), mzenv.Initializing)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Status(context.Background(), url); err == nil {
		t.Error("Status after Close succeeded")
	}
}

func TestListenAndServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	s := New()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- ListenAndServe(ctx, addr, s) }()

	c := &mzenv.Client{}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := c.Status(context.Background(), "http://"+addr)
		if err == nil {
			if st != mzenv.Initializing {
				t.Fatalf("status = %s", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ListenAndServe did not return after cancel")
	}
}

func TestConcurrent(t *testing.T) {
	s, hs := start(t, true)
	c := &mzenv.Client{}
	const prefixes, workers = 4, 8
	var wg sync.WaitGroup
	var okPromotes atomic.Int32
	for p := range prefixes {
		base := fmt.Sprintf("%s/gen-%d", hs.URL, p)
		for range workers {
			wg.Go(func() {
				for {
					st, err := c.Status(context.Background(), base)
					if err != nil {
						t.Error(err)
						return
					}
					switch st {
					case mzenv.IsLeader:
						return
					case mzenv.ReadyToPromote:
						if err := c.Promote(context.Background(), base); err != nil {
							t.Error(err)
							return
						}
						okPromotes.Add(1)
					}
					_ = s.Status("gen-0")
					_ = s.Requests("gen-1")
				}
			})
		}
	}
	wg.Wait()
	if got := okPromotes.Load(); got < prefixes {
		t.Errorf("successful promotes = %d, want at least %d (one per prefix)", got, prefixes)
	}
	for p := range prefixes {
		if got := s.Promotions(fmt.Sprintf("gen-%d", p)); got != 1 {
			t.Errorf("Promotions(gen-%d) = %d, want 1", p, got)
		}
	}
}

// The in-process Server's login refuses what environmentd refuses: another
// user, a wrong password, any login when mz_system has no password.
func TestLoginNeedsMzSystemsPassword(t *testing.T) {
	s, hs := start(t, true)
	login := func(user, password string) int {
		body, _ := json.Marshal(map[string]string{"username": user, "password": password})
		resp, err := http.Post(hs.URL+mzenv.LoginPath, "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := login(mzenv.SystemUser, ""); code != http.StatusUnauthorized {
		t.Errorf("login without a configured password: %d, want 401", code)
	}
	s.Password = "secret"
	for _, c := range []struct {
		user, password string
		want           int
	}{{mzenv.SystemUser, "secret", http.StatusOK}, {mzenv.SystemUser, "wrong", http.StatusUnauthorized}, {"materialize", "secret", http.StatusUnauthorized}} {
		if code := login(c.user, c.password); code != c.want {
			t.Errorf("login %s/%s: %d, want %d", c.user, c.password, code, c.want)
		}
	}
}
