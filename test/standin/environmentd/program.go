package environmentd

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/standin/clap"
	"github.com/materializeinc/orchestratord/test/standin/licensekey"
)

// ExitError is how the real program would end: clap's usage errors exit 2
// with "error: ...", environmentd's start-up failures panic with
// "environmentd: fatal: ..." under its enhanced panic handler, which aborts
// (exit 134; upstream's run installs it first thing). balancerd's stand-in
// uses it too (balancerd panics without that handler: exit 101).
type ExitError struct {
	Code    int
	Message string
}

func (e *ExitError) Error() string { return e.Message }

// ExitCode is the status the real program exits with.
func (e *ExitError) ExitCode() int { return e.Code }

func fatal(format string, a ...any) *ExitError {
	return &ExitError{Code: ExitPanic, Message: "environmentd: fatal: " + fmt.Sprintf(format, a...)}
}

// Plan is what a command line that environmentd accepts asks it to serve.
type Plan struct {
	Listeners *Listeners
	// Password is mz_system's, for listeners that authenticate.
	Password string
	// TLS serves the listeners with enable_tls.
	TLS *tls.Config
	// Generation is --deploy-generation.
	Generation string
	// Args are all parsed arguments, defaults included.
	Args *clap.Matches
	// LicenseWarning is environmentd's warning for an expired key whose
	// expiration behaviour lets it start.
	LicenseWarning string
	// Version is the environmentd version played.
	Version imageref.Version
}

// Version is the version a stand-in plays: STANDIN_VERSION from its image's
// environment, else the newest release line of cmd's table (X.Y.0), the
// line of the commit the tables were generated from. environmentd's and
// balancerd's stand-ins choose alike.
func Version(cmd *clap.Command, lookup func(string) (string, bool)) (imageref.Version, error) {
	if v, ok := lookup("STANDIN_VERSION"); ok && v != "" {
		version, err := imageref.ParseVersion(v)
		if err != nil {
			return version, fmt.Errorf("STANDIN_VERSION: %w", err)
		}
		return version, nil
	}
	if vs := cmd.Versions; len(vs) > 0 {
		return imageref.ParseVersion(vs[len(vs)-1] + ".0")
	}
	return imageref.Version{}, errors.New("STANDIN_VERSION is not set")
}

// Now is the clock license keys are checked against.
var Now = time.Now

// environmentIDPattern is EnvironmentId's regex (upstream
// src/sql/src/catalog.rs), to read the parts of an id clap accepted.
var environmentIDPattern = regexp.MustCompile(`^([[:alnum:]]+)-([[:alnum:]\-]+)-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-(\d{1,8})$`)

// Check parses argv and the environment as environmentd of the given
// version does at start-up, in its order, and reads the files it reads with
// readFile (os.ReadFile in a pod). The command line is that version's
// (clap.Command.At): a flag added in a later release is an unexpected
// argument, and its environment variable is not read.
func Check(version imageref.Version, argv []string, lookup func(string) (string, bool), readFile func(string) ([]byte, error)) (*Plan, *ExitError) {
	m, err := clap.Parse(clap.Environmentd.At(version.Major, version.Minor), argv, lookup)
	if err != nil {
		var ce *clap.Error
		if errors.As(err, &ce) {
			return nil, &ExitError{Code: ce.ExitCode(), Message: ce.Error()}
		}
		return nil, &ExitError{Code: 2, Message: err.Error()}
	}
	// clap has run the value parsers (--environment-id's EnvironmentId and
	// the others, package clap's values.go) while parsing.
	orchestrator, _ := m.Get("orchestrator")

	// run(): the license key first.
	var licenseWarning string
	requireMemoryLimit := false
	if path, ok := m.Get("license-key"); ok {
		raw, err := readFile(path)
		if err != nil {
			return nil, fatal("failed to open license key file: %v", err)
		}
		key, err := licensekey.Validate(strings.TrimSpace(string(raw)), Now())
		if err != nil {
			return nil, fatal("failed to validate license key file: %v", err)
		}
		requireMemoryLimit = !key.AllowCreditConsumptionOverride
		if key.Expired {
			msg := fmt.Sprintf("The license key provided at %s is expired! Please contact Materialize for assistance.", path)
			if key.ExpirationBehavior == licensekey.Disable {
				return nil, fatal("%s", msg)
			}
			licenseWarning = msg
		}
	} else if orchestrator == "kubernetes" {
		return nil, fatal("--license-key is required when running in Kubernetes")
	}

	// main.rs, configuring the controller: what the Kubernetes
	// orchestrator cannot work with.
	if orchestrator == "kubernetes" {
		if _, ok := m.Get("orchestrator-process-scratch-directory"); ok {
			return nil, fatal("--orchestrator-process-scratch-directory is not currently usable with the kubernetes orchestrator")
		}
		if secrets, _ := m.Get("secrets-controller"); secrets == "local-file" {
			return nil, fatal("SecretsControllerKind::LocalFile is not compatible with Orchestrator::Kubernetes.")
		}
	}

	plan := &Plan{Args: m, LicenseWarning: licenseWarning, Version: version}
	plan.Generation, _ = m.Get("deploy-generation")
	if mode, _ := m.Get("tls-mode"); mode == "require" {
		certPath, _ := m.Get("tls-cert")
		keyPath, _ := m.Get("tls-key")
		cert, err := readFile(certPath)
		if err != nil {
			return nil, fatal("%v", err)
		}
		key, err := readFile(keyPath)
		if err != nil {
			return nil, fatal("%v", err)
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fatal("%v", err)
		}
		plan.TLS = ServerTLS(pair)
	}

	path, _ := m.Get("listeners-config-path")
	raw, err := readFile(path)
	if err != nil {
		return nil, fatal("%v", err)
	}
	schema := Schema2632
	if !version.AtLeast(perRouteGroupRolesVersion) {
		schema = Schema147
	}
	plan.Listeners, err = ParseListeners(raw, schema)
	if err != nil {
		return nil, fatal("%v", err)
	}
	for _, l := range append(append([]Listener(nil), plan.Listeners.SQL...), plan.Listeners.HTTP...) {
		if l.AuthenticatorKind == "Oidc" && !version.AtLeast(oidcVersion) {
			// serde's answer of an AuthenticatorKind without the variant.
			return nil, fatal("listener %q: authenticator_kind: unknown variant `Oidc`, expected one of `Frontegg`, `Password`, `Sasl`, `None`", l.Name)
		}
		if l.EnableTLS && plan.TLS == nil {
			return nil, fatal("listener %q enables TLS but --tls-mode is not require", l.Name)
		}
	}

	sizeMap, _ := m.Get("cluster-replica-sizes")
	sizes, err := checkReplicaSizes(sizeMap, requireMemoryLimit)
	if err != nil {
		return nil, fatal("parsing replica size map: %v", err)
	}
	// serve() refuses it once the catalog is open, before any leader
	// status: a pod that never reports one, as here.
	if bootstrap, _ := m.Get("bootstrap-default-cluster-replica-size"); sizes[bootstrap] == nil {
		return nil, fatal("bootstrap default cluster replica size is unknown")
	}
	for _, l := range plan.Listeners.HTTP {
		if l.AuthenticatorKind == "Password" || l.AuthenticatorKind == "Oidc" {
			pw, ok := m.Get("external-login-password-mz-system")
			if !ok || pw == "" {
				return nil, fatal("listener %q authenticates with %s, but mz_system has no password (--external-login-password-mz-system)", l.Name, l.AuthenticatorKind)
			}
			plan.Password = pw
		}
	}
	return plan, nil
}

// Serve serves plan's listeners until ctx ends: the leader API (leader: a
// Deployment, or a Server standing in for many) only where a listener's internal route group is enabled and only
// to the roles it allows, logins where the listener authenticates, the
// metrics group's probes, and SQL listeners that log clients in (ServeSQL).
func Serve(ctx context.Context, plan *Plan, leader http.Handler) error {
	errc := make(chan error, len(plan.Listeners.SQL)+len(plan.Listeners.HTTP))
	var lns []net.Listener
	listen := func(l Listener) (net.Listener, error) {
		ln, err := Listen(l.Addr.String())
		if err != nil {
			return nil, err
		}
		if l.EnableTLS {
			ln = tls.NewListener(ln, plan.TLS)
		}
		lns = append(lns, ln)
		return ln, nil
	}
	// abort closes what is already open when a later listener fails.
	abort := func(err error) error {
		closed, cancel := context.WithCancel(context.Background())
		cancel()
		_ = CloseAndWait(closed, lns, errc)
		return err
	}
	for _, l := range plan.Listeners.SQL {
		ln, err := Listen(l.Addr.String()) // pgwire negotiates its own TLS
		if err != nil {
			return abort(err)
		}
		lns = append(lns, ln)
		go func() {
			ServeSQL(ln, l, plan, func(ctx context.Context) bool { return adapterUp(ctx, leader) })
			errc <- nil
		}()
	}
	for _, l := range plan.Listeners.HTTP {
		ln, err := listen(l)
		if err != nil {
			return abort(err)
		}
		h := ListenerHandler(l, plan.Password, leader)
		go func() { errc <- ServeHTTP(ln, h) }()
	}
	return CloseAndWait(ctx, lns, errc)
}

type sessions struct {
	mu   sync.Mutex
	byID map[string]string // session id -> user
}

const sessionCookie = "mz_session"

func (s *sessions) create(user string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	s.mu.Lock()
	s.byID[id] = user
	s.mu.Unlock()
	return id
}

func (s *sessions) user(r *http.Request) (string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.byID[c.Value]
	return u, ok
}

// adapterUp waits until leader's adapter serves (or ctx ends): environmentd
// checks a password, and opens a session, through its adapter client, which
// waits for the adapter (upstream's Delayed adapter client).
func adapterUp(ctx context.Context, leader http.Handler) bool {
	a, ok := leader.(interface{ AdapterReady() <-chan struct{} })
	if !ok {
		return true
	}
	select {
	case <-a.AdapterReady():
		return true
	case <-ctx.Done():
		return false
	}
}

// httpDefaultUser is who a request is from on a listener without
// authentication that names no one (upstream HTTP_DEFAULT_USER).
const httpDefaultUser = "anonymous_http_user"

// ListenerHandler routes one HTTP listener's requests as environmentd's
// route groups and authentication would (upstream environmentd/src/http.rs).
// Every refusal is 401 "unauthorized", a disallowed role included.
func ListenerHandler(l Listener, password string, leader http.Handler) http.Handler {
	s := &sessions{byID: map[string]string{}}
	authenticates := l.AuthenticatorKind == "Password" || l.AuthenticatorKind == "Oidc"
	// user is who the request is from; ok is false when it is refused.
	// headerAuth is the x-materialize-user layer, which upstream puts on
	// the base routes (not the leader or metrics routes) of listeners
	// without authentication only.
	user := func(r *http.Request, headerAuth bool) (string, bool) {
		if !authenticates {
			if h, set := r.Header["X-Materialize-User"]; set && headerAuth {
				u := h[0]
				return u, u == mzenv.SystemUser || u == supportUser
			}
			// The Basic username, its password unchecked.
			if u, _, ok := r.BasicAuth(); ok {
				return u, true
			}
			return httpDefaultUser, true
		}
		// A session is reused only when the request brings no
		// credentials: credentials are authenticated anew.
		u, p, basic := r.BasicAuth()
		if !basic {
			if u, ok := s.user(r); ok {
				return u, true
			}
		}
		// The password authenticator is the adapter client: it is awaited
		// before credentials are looked at.
		if !adapterUp(r.Context(), leader) {
			return "", false
		}
		return u, basic && u == mzenv.SystemUser && p == password
	}
	mux := http.NewServeMux()
	if authenticates {
		mux.HandleFunc("POST "+mzenv.LoginPath, func(w http.ResponseWriter, r *http.Request) {
			var creds struct {
				Username string `json:"username"`
				Password string `json:"password"`
			}
			if err := json.NewDecoder(r.Body).Decode(&creds); err != nil {
				http.Error(w, "invalid login body", http.StatusUnprocessableEntity)
				return
			}
			if !adapterUp(r.Context(), leader) {
				return
			}
			if creds.Username != mzenv.SystemUser || creds.Password != password {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.create(creds.Username), Path: "/", HttpOnly: true})
		})
	}
	group := func(name string, h http.Handler) http.Handler {
		rg := l.Routes[name]
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !rg.Enabled {
				http.NotFound(w, r)
				return
			}
			u, ok := user(r, name == "base")
			if !ok || !Allows(rg.AllowedRoles, u) {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("TEST STAND-IN, not Materialize\n"))
	})
	for _, p := range []string{mzenv.StatusPath, mzenv.PromotePath, mzenv.SkipCatchupPath} {
		mux.Handle(p, group("internal", leader))
	}
	for _, p := range []string{"/metrics", ReadyzPath, LivezPath} {
		mux.Handle(p, group("metrics", ok))
	}
	// The base routes are what the console and SQL-over-HTTP use; any
	// other path is axum's 404.
	for _, p := range []string{"/{$}", "/api/sql", "/memory", "/hierarchical-memory", "/metrics-viz", "/static/", "/metrics/public"} {
		mux.Handle(p, group("base", ok))
	}
	// Webhook sources have a router of their own, without authentication
	// (they check their own secrets), where the base routes are enabled.
	if l.Routes["base"].Enabled {
		mux.Handle("/api/webhook/", ok)
	}
	return mux
}

// checkReplicaSizes parses --cluster-replica-sizes as environmentd's
// ReplicaAllocation (upstream src/controller/src/clusters.rs) requires:
// scale and workers non-zero integers, credits_per_hour a decimal string;
// the other fields have defaults or are optional.
// It returns the sizes by name.
func checkReplicaSizes(raw string, requireMemoryLimit bool) (map[string]map[string]json.RawMessage, error) {
	var sizes map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &sizes); err != nil {
		return nil, err
	}
	for _, name := range sortedNames(sizes) {
		size := sizes[name]
		for _, field := range []string{"scale", "workers"} {
			var n uint64
			v, ok := size[field]
			if !ok {
				return nil, fmt.Errorf("size %q: missing field `%s`", name, field)
			}
			if err := json.Unmarshal(v, &n); err != nil || n == 0 || (field == "scale" && n > 65535) {
				return nil, fmt.Errorf("size %q: invalid value: %s, expected a nonzero integer for `%s`", name, v, field)
			}
		}
		v, ok := size["credits_per_hour"]
		if !ok {
			return nil, fmt.Errorf("size %q: missing field `credits_per_hour`", name)
		}
		var credits string
		if err := json.Unmarshal(v, &credits); err != nil {
			return nil, fmt.Errorf("size %q: invalid type: %s, expected a string for `credits_per_hour`", name, kindOf(v))
		}
		if _, err := strconv.ParseFloat(credits, 64); err != nil {
			return nil, fmt.Errorf("size %q: invalid numeric %q for `credits_per_hour`", name, credits)
		}
	}
	// ClusterReplicaSizeMap::parse_from_str, once the whole map parsed:
	// credits come from memory unless the license key allows overriding
	// credit consumption.
	for _, name := range sortedNames(sizes) {
		if mem, ok := sizes[name]["memory_limit"]; requireMemoryLimit && (!ok || string(mem) == "null") {
			return nil, fmt.Errorf("No memory limit found in cluster definition for %s", name)
		}
	}
	return sizes, nil
}

// OrganizationID is the organization UUID of a valid --environment-id.
func OrganizationID(environmentID string) string {
	if g := environmentIDPattern.FindStringSubmatch(environmentID); g != nil {
		return g[3]
	}
	return ""
}
