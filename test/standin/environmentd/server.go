// Package environmentd is a TEST STAND-IN for environmentd's leader API. It is
// not Materialize: it only answers the two leader endpoints the materialize
// reconciler uses, with state the test drives.
//
// One Server can stand in for many environmentd generations: every request
// path of the form /{prefix}/api/leader/status or /{prefix}/api/leader/promote
// (prefix may be empty, or contain slashes) is served from state kept per
// prefix, so a reconciler configured with a URL template such as
// "{server}/{service}" talks to a separate "environmentd" per generation,
// e.g. /mzabc-environmentd-2/api/leader/status. Prefixes are normalised by
// trimming leading and trailing slashes: "", "/" and "/x/" and "x" name the
// same state as their trimmed form.
//
// The package name clashes with pkg/environmentd; import one of them under
// another name.
package environmentd

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
)

// Paths of the extra endpoints served (under any prefix) so the stand-in can
// run as a pod with environmentd's readiness and liveness probes.
const (
	ReadyzPath = "/api/readyz"
	LivezPath  = "/api/livez"
)

// Server is a thread-safe stand-in for the leader API of many environmentd
// generations at once, each a Deployment with upstream's answers (see
// deployment.go): a promote that is refused is 400 with
// {"result":{"Failure":...}}, one while Promoting or IsLeader is 200; a
// skip-catchup is refused (400) only while Initializing.
//
// Without AutoAdvance, a prefix starts at Initializing and changes only by
// SetStatus, by a successful promote (ReadyToPromote -> Promoting) or by a
// skip-catchup while catching up (-> ReadyToPromote).
//
// With AutoAdvance, a prefix starts catching up (reported as Initializing,
// as real environmentd reports it) and
//   - a status request that finds it catching up and already reported at
//     least once moves it to ReadyToPromote (so an unseen prefix answers
//     Initializing, then ReadyToPromote);
//   - a successful promote moves it to Promoting, and the next status request
//     moves it to (and answers) IsLeader.
//
// Initializing, ReadyToPromote and IsLeader never advance on their own, so a
// test can hold a generation with SetStatus(prefix, Initializing) or keep it
// waiting for approval at ReadyToPromote. SetStatus(p, CatchingUp) puts it in
// the catch-up phase; SetStatus restarts the "reported" count, so catch-up is
// answered once before advancing.
type Server struct {
	// AutoAdvance enables the automatic transitions described above. Set it
	// before serving; use SetAutoAdvance to change it while serving.
	AutoAdvance bool
	// Password is mz_system's: POST /api/login accepts only it (and no
	// login at all while it is empty, as environmentd without a password
	// for mz_system).
	Password string

	// Catalog, when set, names the environment (whose catalog it is) and
	// the deploy generation a prefix stands for, so that the Server
	// follows upstream's 0dt preflight: with AutoAdvance, a generation
	// that finds its environment's catalog fresh (no generation has led
	// it) or its own boots with writes allowed: after its first
	// Initializing it is the leader, without a promotion; and a generation
	// older than the one that led the catalog last is fenced out (the
	// process exits): its leader API answers 503. Nil: every prefix
	// catches up and waits for a promotion. ServiceCatalog reads the
	// operator's service names.
	Catalog func(prefix string) (environment string, generation uint64, ok bool)

	mu       sync.Mutex
	prefixes map[string]*prefixState
	// catalogs holds, per environment, the generation that last led it.
	catalogs map[string]uint64
	srv      *http.Server
	url      string
	done     chan struct{}
}

type prefixState struct {
	d          *Deployment
	reported   bool // status answered at least once since it was last set
	requests   int
	promotions int
}

// New returns a Server with AutoAdvance off.
func New() *Server {
	return &Server{prefixes: map[string]*prefixState{}}
}

// Handler returns the Server as an http.Handler, e.g. for httptest.NewServer.
func (s *Server) Handler() http.Handler { return s }

// Start listens on addr (e.g. "127.0.0.1:0") and serves in the background
// until Close. It returns the base URL, with an unspecified listen host
// replaced by 127.0.0.1.
func (s *Server) Start(addr string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return "", errors.New("standin environmentd: already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	host, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		ln.Close()
		return "", err
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	s.url = "http://" + net.JoinHostPort(host, port)
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln)
	}(s.srv, s.done)
	return s.url, nil
}

// URL returns the base URL returned by Start, or "" if not started.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// BaseURL returns the base URL of the environmentd stood in for by prefix
// (URL() + "/" + prefix), to pass to pkg/environmentd's Client.
func (s *Server) BaseURL(prefix string) string {
	prefix = normalise(prefix)
	if prefix == "" {
		return s.URL()
	}
	return s.URL() + "/" + prefix
}

// Close stops a Server started with Start, closing open connections. It is
// safe to call more than once, and on a Server that was never started.
func (s *Server) Close() error {
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.srv, s.done = nil, nil
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Close()
	<-done
	return err
}

// SetAutoAdvance sets AutoAdvance while the Server may be serving.
func (s *Server) SetAutoAdvance(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.AutoAdvance = on
}

// SetCatalog sets Catalog while the Server may be serving.
func (s *Server) SetCatalog(catalog func(prefix string) (environment string, generation uint64, ok bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Catalog = catalog
}

// SetStatus sets the leader status of prefix: CatchingUp is the catch-up
// phase (answered as Initializing), an unknown status Initializing.
func (s *Server) SetStatus(prefix string, status mzenv.LeaderStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stateLocked(normalise(prefix))
	st.d.set(phaseOf(status))
	st.reported = false
}

// Status returns the current leader status of prefix, without counting as a
// request or advancing it. A prefix never seen reports its initial status.
func (s *Server) Status(prefix string) mzenv.LeaderStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.prefixes[normalise(prefix)]; ok {
		return st.d.Status()
	}
	return s.initialLocked().status()
}

// Promotions returns how many promote requests for prefix succeeded.
func (s *Server) Promotions(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.prefixes[normalise(prefix)]; ok {
		return st.promotions
	}
	return 0
}

// Requests returns how many leader API requests (status or promote, whatever
// their outcome) were made for prefix.
func (s *Server) Requests(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.prefixes[normalise(prefix)]; ok {
		return st.requests
	}
	return 0
}

// Prefixes returns, sorted, every prefix that was requested or set.
func (s *Server) Prefixes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.prefixes))
	for p := range s.prefixes {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case strings.HasSuffix(path, mzenv.StatusPath):
		s.serveStatus(w, r, normalise(strings.TrimSuffix(path, mzenv.StatusPath)))
	case strings.HasSuffix(path, mzenv.PromotePath):
		s.servePromote(w, r, normalise(strings.TrimSuffix(path, mzenv.PromotePath)))
	case strings.HasSuffix(path, mzenv.LoginPath):
		s.serveLogin(w, r)
	case strings.HasSuffix(path, mzenv.SkipCatchupPath):
		s.serveSkipCatchup(w, r, normalise(strings.TrimSuffix(path, mzenv.SkipCatchupPath)))
	case strings.HasSuffix(path, ReadyzPath), strings.HasSuffix(path, LivezPath):
		w.WriteHeader(http.StatusOK)
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "standin environmentd: no such endpoint " + path})
	}
}

func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request, prefix string) {
	st, ok := s.lockRequest(w, r, prefix, http.MethodGet)
	if !ok {
		return
	}
	if s.fencedOutLocked(prefix) {
		s.mu.Unlock()
		answerFencedOut(w)
		return
	}
	if s.AutoAdvance {
		switch st.d.phase {
		case phasePromoting:
			st.d.set(phaseIsLeader)
		case phaseCatchingUp:
			if st.reported && s.opensCatalogLocked(prefix) {
				st.d.set(phaseIsLeader)
			} else if st.reported {
				st.d.set(phaseReadyToPromote)
			}
		}
		if st.d.phase == phaseIsLeader {
			s.ledLocked(prefix)
		}
	}
	st.reported = true
	status := st.d.Status()
	s.mu.Unlock()
	answerStatus(w, status)
}

// serveLogin accepts mz_system's login with Password, so a
// reconciler configured for password authentication can be pointed at the
// in-process Server; the strict per-listener checks are ListenerHandler's.
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	var creds struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	if err := json.NewDecoder(r.Body).Decode(&creds); err != nil || creds.Username != mzenv.SystemUser ||
		s.Password == "" || creds.Password != s.Password {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// serveSkipCatchup answers as environmentd's /api/leader/skip-catchup: in
// catch-up it ends it at once (a forced promotion).
func (s *Server) serveSkipCatchup(w http.ResponseWriter, r *http.Request, prefix string) {
	st, ok := s.lockRequest(w, r, prefix, http.MethodPost)
	if !ok {
		return
	}
	catchingUp := st.d.phase == phaseCatchingUp
	skipped := st.d.trySkipCatchup()
	if catchingUp {
		st.d.set(phaseReadyToPromote) // what the process does once catch-up ends
	}
	s.mu.Unlock()
	answerSkipCatchup(w, skipped)
}

func (s *Server) servePromote(w http.ResponseWriter, r *http.Request, prefix string) {
	st, ok := s.lockRequest(w, r, prefix, http.MethodPost)
	if !ok {
		return
	}
	if s.fencedOutLocked(prefix) {
		s.mu.Unlock()
		answerFencedOut(w)
		return
	}
	ready := st.d.phase == phaseReadyToPromote
	promoted := st.d.tryPromote()
	if ready {
		st.reported = false
		st.promotions++
	}
	s.mu.Unlock()
	answerPromote(w, promoted)
}

// lockRequest counts a request to prefix's leader API and, when it uses the
// method, returns prefix's state with s.mu held; otherwise it answers 405.
func (s *Server) lockRequest(w http.ResponseWriter, r *http.Request, prefix, method string) (*prefixState, bool) {
	s.mu.Lock()
	st := s.stateLocked(prefix)
	st.requests++
	if r.Method != method {
		s.mu.Unlock()
		methodNotAllowed(w, method)
		return nil, false
	}
	return st, true
}

func (s *Server) stateLocked(prefix string) *prefixState {
	if s.prefixes == nil {
		s.prefixes = map[string]*prefixState{}
	}
	st, ok := s.prefixes[prefix]
	if !ok {
		st = &prefixState{d: &Deployment{phase: s.initialLocked()}}
		s.prefixes[prefix] = st
	}
	return st
}

// catalogLocked reads prefix's generation and the one that last led its
// environment's catalog (initialized false: none has, the catalog is
// fresh); ok is false without a Catalog or for a prefix it does not place.
func (s *Server) catalogLocked(prefix string) (gen, led uint64, initialized, ok bool) {
	if s.Catalog == nil {
		return 0, 0, false, false
	}
	env, gen, ok := s.Catalog(prefix)
	if !ok {
		return 0, 0, false, false
	}
	led, initialized = s.catalogs[env]
	return gen, led, initialized, true
}

// opensCatalogLocked tells whether prefix's generation finds its
// environment's catalog fresh or its own: it boots as the leader.
func (s *Server) opensCatalogLocked(prefix string) bool {
	gen, led, initialized, ok := s.catalogLocked(prefix)
	return ok && (!initialized || led == gen)
}

// fencedOutLocked tells whether a newer generation than prefix's has led
// its environment's catalog: upstream's preflight exits ("this deployment
// has been fenced out"), so nothing answers for it.
func (s *Server) fencedOutLocked(prefix string) bool {
	gen, led, initialized, ok := s.catalogLocked(prefix)
	return ok && initialized && led > gen
}

// answerFencedOut is what a client sees of a generation whose process has
// exited: no leader API (503, as a Service without a ready endpoint).
func answerFencedOut(w http.ResponseWriter) {
	writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "standin environmentd: this deployment has been fenced out"})
}

// ledLocked records that prefix's generation leads its environment's
// catalog.
func (s *Server) ledLocked(prefix string) {
	if s.Catalog == nil {
		return
	}
	env, gen, ok := s.Catalog(prefix)
	if !ok {
		return
	}
	if s.catalogs == nil {
		s.catalogs = map[string]uint64{}
	}
	s.catalogs[env] = max(s.catalogs[env], gen)
}

// ServiceCatalog reads a prefix that ends in environmentd's service name
// for a generation, "mz<resource id>-environmentd-<generation>" (the
// reconciler's URL template "{server}/mz{{.ResourceID}}-environmentd-{{.Generation}}"):
// the environment is "mz<resource id>".
func ServiceCatalog(prefix string) (environment string, generation uint64, ok bool) {
	name := prefix[strings.LastIndex(prefix, "/")+1:]
	env, gen, found := strings.Cut(name, "-environmentd-")
	if !found || env == "" {
		return "", 0, false
	}
	generation, err := strconv.ParseUint(gen, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return env, generation, true
}

func (s *Server) initialLocked() phase {
	if s.AutoAdvance {
		return phaseCatchingUp
	}
	return phaseInitializing
}

func normalise(prefix string) string { return strings.Trim(prefix, "/") }

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed; use " + allow})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ListenAndServe serves h (a Server, or a handler wrapping one) on addr
// until ctx is done, then shuts down gracefully (waiting up to 5s for
// in-flight requests).
func ListenAndServe(ctx context.Context, addr string, h http.Handler) error {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
