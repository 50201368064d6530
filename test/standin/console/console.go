// Package console is a TEST STAND-IN for the Materialize console image
// (nginx serving the web app), NOT the console. Like the image, it takes
// everything from its environment, which the image's entrypoint substitutes
// into its server block (upstream console/misc/docker/nginx.conf.template):
// MZ_NGINX_LISTENER_CONFIG (the listen directive, with ssl_certificate and
// ssl_certificate_key when TLS is on; the image's default is "listen 8080;")
// and MZ_ENDPOINT (balancerd's HTTP URL, in `set $backend ...;`). It refuses
// at boot what stops nginx, and after boot answers as that server block
// does: /api (and, from v26.39, /.well-known/oauth-protected-resource)
// proxied to MZ_ENDPOINT, resolved for every request through the pod's
// nameservers (502 when it does not resolve or answer, 500 when it is not an
// http(s) URL); static assets that do not exist 404; any other path the app
// (its index, or the app configuration the operator mounts).
package console

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/standin/clap"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

// AppConfigPath is where the operator mounts app-config.json (upstream's
// /usr/share/nginx/html/app-config), served at /app-config/app-config.json.
const AppConfigPath = "/usr/share/nginx/html/app-config/app-config.json"

// webRoot is the template's root; AppConfigPath is under it.
const webRoot = "/usr/share/nginx/html"

// defaultListener is the image's ENV MZ_NGINX_LISTENER_CONFIG.
const defaultListener = "listen 8080;"

// Listen is one listen directive.
type Listen struct {
	Network, Addr string // "tcp4" or "tcp6", and host:port
	SSL           bool
}

// Config is what the image's nginx serves.
type Config struct {
	Listens []Listen
	// TLS is the server's certificates: set whenever the listener config
	// names any, as nginx loads them whether or not a listen says ssl.
	TLS *tls.Config
	// Endpoint is MZ_ENDPOINT as `set $backend` holds it.
	Endpoint string
}

// emerg is nginx's message for a configuration it will not start with.
func emerg(format string, a ...any) error {
	return fmt.Errorf("nginx: [emerg] "+format+" in /etc/nginx/conf.d/default.conf", a...)
}

// repeatable are the server-block directives nginx accepts more than once;
// once are those it accepts once (others stop it, as unknown ones do).
var (
	repeatable = map[string]bool{"listen": true, "ssl_certificate": true, "ssl_certificate_key": true,
		"server_name": true, "add_header": true, "access_log": true, "error_log": true, "error_page": true,
		"ssl_conf_command": true, "allow": true, "deny": true}
	once = map[string]bool{"http2": true, "ssl_protocols": true, "ssl_ciphers": true, "ssl_prefer_server_ciphers": true,
		"ssl_session_cache": true, "ssl_session_timeout": true, "ssl_session_tickets": true, "client_max_body_size": true,
		"keepalive_timeout": true, "ssl_dhparam": true, "ssl_ecdh_curve": true, "ssl_stapling": true,
		"ssl_stapling_verify": true, "ssl_buffer_size": true, "ssl_early_data": true, "server_tokens": true,
		"client_body_timeout": true, "client_header_timeout": true, "send_timeout": true, "gzip": true}
)

// Check reads the environment as the image does and returns what to serve,
// failing where nginx does, in its order: the listener config (it comes
// first in the server block), MZ_ENDPOINT (in location /api), then the
// certificates (loaded once the configuration is read).
func Check(lookup func(string) (string, bool), loadPair func(cert, key string) (tls.Certificate, error)) (Config, error) {
	var c Config
	config, ok := lookup("MZ_NGINX_LISTENER_CONFIG")
	if !ok {
		config = defaultListener
	}
	directives, err := parseDirectives(config)
	if err != nil {
		return c, err
	}
	var certs, keys []string
	for _, d := range directives {
		name, args := d[0], d[1:]
		switch name {
		case "listen":
			l, err := parseListen(args)
			if err != nil {
				return c, err
			}
			for _, seen := range c.Listens {
				if seen.Addr == l.Addr {
					return c, emerg(`a duplicate listen %s`, l.Addr)
				}
			}
			c.Listens = append(c.Listens, l)
		case "ssl_certificate", "ssl_certificate_key":
			if len(args) != 1 {
				return c, emerg(`invalid number of arguments in "%s" directive`, name)
			}
			if name == "ssl_certificate" {
				certs = append(certs, args[0])
			} else {
				keys = append(keys, args[0])
			}
		}
	}
	endpoint, ok := lookup("MZ_ENDPOINT")
	switch {
	case !ok:
		// The entrypoint substitutes only variables that are set.
		return c, emerg(`unknown "MZ_ENDPOINT" variable`)
	case len(strings.Fields(endpoint)) != 1:
		return c, emerg(`invalid number of arguments in "set" directive`)
	case strings.ContainsAny(endpoint, `;{}"'$#\`):
		return c, emerg(`unexpected character in "set $backend %s"`, endpoint)
	}
	// nginx reads a token: whitespace around it (a YAML block's newline)
	// is no part of it.
	c.Endpoint = strings.Fields(endpoint)[0]
	if len(c.Listens) == 0 {
		// No listen directive: nginx, not running as root, listens on
		// *:8000.
		c.Listens = []Listen{{Network: "tcp4", Addr: "0.0.0.0:8000"}}
	}
	c.Listens = wildcardsServe(c.Listens)
	switch {
	case len(keys) < len(certs):
		return c, emerg(`no "ssl_certificate_key" is defined for certificate "%s"`, certs[len(keys)])
	case len(certs) > 0:
		pairs := make([]tls.Certificate, 0, len(certs))
		for i, cert := range certs {
			pair, err := loadPair(cert, keys[i])
			if err != nil {
				return c, emerg(`cannot load certificate "%s": %v`, cert, err)
			}
			pairs = append(pairs, pair)
		}
		c.TLS = &tls.Config{Certificates: pairs, MinVersion: tls.VersionTLS12}
	}
	for _, l := range c.Listens {
		if l.SSL && c.TLS == nil {
			return c, emerg(`no "ssl_certificate" is defined for the "listen ... ssl" directive`)
		}
	}
	return c, nil
}

// wildcardsServe drops the listens of an address whose port a wildcard
// listen of the same family also names: nginx binds only the wildcard,
// and serves the address through it.
func wildcardsServe(listens []Listen) []Listen {
	wildcard := map[string]bool{}
	for _, l := range listens {
		if host, port, _ := net.SplitHostPort(l.Addr); host == "0.0.0.0" || host == "::" {
			wildcard[l.Network+port] = true
		}
	}
	var out []Listen
	for _, l := range listens {
		host, port, _ := net.SplitHostPort(l.Addr)
		if host != "0.0.0.0" && host != "::" && wildcard[l.Network+port] {
			continue
		}
		out = append(out, l)
	}
	return out
}

// parseDirectives splits the listener config into directives, as nginx
// reads them inside the template's server block.
func parseDirectives(config string) ([][]string, error) {
	var lines []string
	for line := range strings.Lines(config) {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		lines = append(lines, line)
	}
	text := strings.TrimSpace(strings.Join(lines, "\n"))
	if text == "" {
		return nil, nil
	}
	if strings.ContainsAny(text, `{}"'$\`) {
		return nil, emerg(`unexpected character in MZ_NGINX_LISTENER_CONFIG`)
	}
	if !strings.HasSuffix(text, ";") {
		return nil, emerg(`unexpected "}"`)
	}
	var out [][]string
	seen := map[string]bool{}
	for _, d := range strings.Split(strings.TrimSuffix(text, ";"), ";") {
		fields := strings.Fields(d)
		if len(fields) == 0 {
			return nil, emerg(`unexpected ";"`)
		}
		name := fields[0]
		switch {
		case repeatable[name]:
		case once[name]:
			if seen[name] {
				return nil, emerg(`"%s" directive is duplicate`, name)
			}
			seen[name] = true
		default:
			return nil, emerg(`unknown directive "%s"`, name)
		}
		if len(fields) == 1 {
			return nil, emerg(`invalid number of arguments in "%s" directive`, name)
		}
		out = append(out, fields)
	}
	return out, nil
}

// parseListen reads a listen directive's address and parameters: a port
// alone (or *:port) is every IPv4 address, as nginx binds it.
func parseListen(args []string) (Listen, error) {
	l := Listen{Network: "tcp4"}
	host, port := "0.0.0.0", args[0]
	switch {
	case strings.HasPrefix(args[0], "["):
		end := strings.Index(args[0], "]")
		if end < 0 {
			return l, emerg(`invalid IPv6 address in "%s" of the "listen" directive`, args[0])
		}
		host, port, l.Network = args[0][1:end], strings.TrimPrefix(args[0][end+1:], ":"), "tcp6"
		if port == "" {
			port = "80"
		}
		if net.ParseIP(host) == nil {
			return l, emerg(`invalid IPv6 address in "%s" of the "listen" directive`, args[0])
		}
	case strings.Contains(args[0], ":"):
		host, port, _ = strings.Cut(args[0], ":")
		if host == "*" {
			host = "0.0.0.0"
		}
		if ip := net.ParseIP(host); ip == nil || ip.To4() == nil {
			return l, emerg(`host not found in "%s" of the "listen" directive`, args[0])
		}
	case strings.Contains(args[0], "."):
		// An address without a port: nginx's default, 80.
		host, port = args[0], "80"
		if ip := net.ParseIP(host); ip == nil || ip.To4() == nil {
			return l, emerg(`host not found in "%s" of the "listen" directive`, args[0])
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || strings.TrimLeft(port, "0123456789") != "" || n < 1 || n > 65535 {
		return l, emerg(`invalid port in "%s" of the "listen" directive`, args[0])
	}
	l.Addr = net.JoinHostPort(host, port)
	for _, p := range args[1:] {
		switch {
		case p == "ssl":
			l.SSL = true
		case p == "ipv6only=off" && l.Network == "tcp6":
			// [::] then takes IPv4 too: Go's "tcp" binds it so.
			l.Network = "tcp"
		case p == "default_server", p == "http2", p == "reuseport", p == "ipv6only=on", p == "ipv6only=off":
		default:
			return l, emerg(`invalid parameter "%s"`, p)
		}
	}
	return l, nil
}

// staticAsset is the template's regular-expression location for assets,
// which nginx prefers to any prefix location: its files exist or 404.
var staticAsset = regexp.MustCompile(`(?i)\.(js|css|png|jpg|jpeg|gif|svg|woff|woff2)$`)

// wellKnownFrom is the first console release whose template proxies the
// OAuth protected-resource metadata (before, the app answers it).
var wellKnownFrom = imageref.MustParseVersion("26.39.0-dev.0")

// Handler answers as the template's server block: version is the console
// release played; lookup resolves MZ_ENDPOINT's host (Nameservers: nginx's
// resolver); log takes the proxy's errors, as nginx's error log.
func Handler(c Config, version imageref.Version, readFile func(string) ([]byte, error),
	lookup func(ctx context.Context, host string) ([]string, error), log *slog.Logger) http.Handler {
	api := c.proxy(lookup, log, 600*time.Second, true)
	wellKnown := c.proxy(lookup, log, 60*time.Second, false)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Locations match the normalized path: slashes merged, dot
		// segments resolved.
		p := path.Clean("/" + r.URL.Path)
		switch {
		case staticAsset.MatchString(p):
			// No asset exists but the app's index (and the app
			// configuration, which is JSON).
			static(w, r, http.StatusNotFound, nil)
		case strings.HasPrefix(p, "/api"):
			if r.ContentLength > 100<<20 {
				http.Error(w, "413 Request Entity Too Large", http.StatusRequestEntityTooLarge)
				return
			}
			api(w, r)
		case strings.HasPrefix(p, "/.well-known/oauth-protected-resource") && version.AtLeast(wellKnownFrom):
			if r.ContentLength > 1<<20 {
				http.Error(w, "413 Request Entity Too Large", http.StatusRequestEntityTooLarge)
				return
			}
			wellKnown(w, r)
		case p == "/app-config":
			// The mounted directory, without an index.html or autoindex.
			http.Error(w, "403 Forbidden", http.StatusForbidden)
		case p == "/app-config/app-config.json":
			// try_files $uri: the mounted file as it is, else the index.
			if raw, err := readFile(AppConfigPath); err == nil {
				static(w, r, http.StatusOK, raw)
				return
			}
			static(w, r, http.StatusOK, nil)
		default:
			static(w, r, http.StatusOK, nil)
		}
	})
}

// index is the app's index.html.
var index = []byte("<!doctype html><title>TEST STAND-IN console, not Materialize</title>\n")

// static serves a file (nil: the index) as nginx's static module does: GET
// and HEAD only.
func static(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "405 Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	if body == nil {
		body = index
		w.Header().Set("Content-Type", "text/html")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// proxy is one location's proxy_pass $backend: a URL without a path
// passes the client's request URI as it came, one with a path replaces
// it; upstream TLS is neither verified nor sent a server name (nginx's
// proxy_ssl defaults); timeout is the location's proxy_connect_timeout
// and proxy_read_timeout (504 when it passes); api adds the /api
// location's headers.
func (c Config) proxy(lookup func(ctx context.Context, host string) ([]string, error), log *slog.Logger,
	timeout time.Duration, api bool) func(http.ResponseWriter, *http.Request) {
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips := []string{host}
		if net.ParseIP(host) == nil {
			if ips, err = lookup(ctx, host); err != nil {
				return nil, fmt.Errorf("%s could not be resolved: %w", host, err)
			}
		}
		d := net.Dialer{Timeout: timeout}
		var last error
		for _, ip := range ips {
			conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, port))
			if err == nil {
				return conn, nil
			}
			last = err
		}
		return nil, last
	}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) },
		DialTLSContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			conn, err := dial(ctx, addr)
			if err != nil {
				return nil, err
			}
			//nolint:gosec // nginx's proxy_ssl_verify off, as the image runs it
			tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true})
			if err := tc.HandshakeContext(ctx); err != nil {
				conn.Close()
				return nil, err
			}
			return tc, nil
		},
		ResponseHeaderTimeout: timeout,
		DisableKeepAlives:     true,
	}
	// $backend holds MZ_ENDPOINT, which does not change: nginx finds it
	// no URL at every request, the stand-in once.
	target, err := url.Parse(c.Endpoint)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return func(w http.ResponseWriter, _ *http.Request) {
			log.Error("invalid URL prefix", "backend", c.Endpoint)
			http.Error(w, "500 Internal Server Error", http.StatusInternalServerError)
		}
	}
	rp := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			out, in := pr.Out, pr.In
			out.URL.Scheme, out.URL.Host = target.Scheme, target.Host
			if target.Path != "" {
				out.URL.Path, out.URL.RawPath, out.URL.RawQuery = target.Path, target.RawPath, target.RawQuery
			} else {
				// The query as it came: Go would drop what it
				// cannot parse, nginx passes it on.
				out.URL.RawQuery = in.URL.RawQuery
			}
			out.Host = hostVariable(in.Host)
			// nginx passes these on; Go's Rewrite drops them.
			for _, h := range []string{"Forwarded", "X-Forwarded-Host"} {
				if v := in.Header.Values(h); len(v) > 0 {
					out.Header[h] = v
				}
			}
			remote, _, _ := net.SplitHostPort(in.RemoteAddr)
			out.Header.Set("X-Real-IP", remote)
			out.Header.Set("X-Forwarded-For", strings.Join(append(in.Header.Values("X-Forwarded-For"), remote), ", "))
			proto := "http"
			if in.TLS != nil {
				proto = "https"
			}
			out.Header.Set("X-Forwarded-Proto", proto)
			out.Header.Set("X-Request-ID", requestID())
			if api {
				if v := in.Header.Get("X-Webhook-Event"); v != "" {
					out.Header.Set("X-Webhook-Event", v)
				}
			}
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var netErr net.Error
			switch {
			case r.Context().Err() != nil:
				// The client went away: nginx logs 499, answers nothing.
				log.Info("client closed the request", "upstream", c.Endpoint)
			case errors.As(err, &netErr) && netErr.Timeout():
				log.Error("upstream timed out", "upstream", c.Endpoint, "error", err)
				http.Error(w, "504 Gateway Time-out", http.StatusGatewayTimeout)
			default:
				log.Error("upstream failed", "upstream", c.Endpoint, "error", err)
				http.Error(w, "502 Bad Gateway", http.StatusBadGateway)
			}
		},
	}
	return rp.ServeHTTP
}

// hostVariable is nginx's $host from a Host header: lower case, without
// the port or a trailing dot; an IPv6 address keeps its brackets.
func hostVariable(host string) string {
	if strings.HasPrefix(host, "[") {
		if end := strings.Index(host, "]"); end >= 0 {
			return strings.ToLower(host[:end+1])
		}
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

func requestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// resolverValid is the template's `resolver ... valid=10s`.
const resolverValid = 10 * time.Second

// Nameservers resolves host as nginx's resolver does: a query of the name
// as given (no search domains) to the nameservers of resolvConf (the
// image's entrypoint reads them from /etc/resolv.conf), its answer (an
// address or "no such name") kept for resolverValid, a timeout not. Unlike
// nginx, Go's resolver reads /etc/hosts first (a pod's names only).
func Nameservers(resolvConf string) (func(ctx context.Context, host string) ([]string, error), error) {
	raw, err := os.ReadFile(resolvConf)
	if err != nil {
		return nil, err
	}
	var servers []string
	for line := range strings.Lines(string(raw)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
			servers = append(servers, f[1])
		}
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("%s names no nameserver", resolvConf)
	}
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		var last error
		for _, s := range servers {
			conn, err := d.DialContext(ctx, network, net.JoinHostPort(s, "53"))
			if err == nil {
				return conn, nil
			}
			last = err
		}
		return nil, last
	}}
	return cached(func(ctx context.Context, host string) ([]string, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		// The trailing dot: the name as given, as nginx queries it.
		return resolver.LookupHost(ctx, strings.TrimSuffix(host, ".")+".")
	}, time.Now), nil
}

// cached keeps each host's answer for resolverValid: its addresses, or
// that it has none; any other failure (a timeout) is asked again.
func cached(lookup func(ctx context.Context, host string) ([]string, error), now func() time.Time) func(ctx context.Context, host string) ([]string, error) {
	type answer struct {
		addrs   []string
		err     error
		expires time.Time
	}
	var mu sync.Mutex
	answers := map[string]answer{}
	return func(ctx context.Context, host string) ([]string, error) {
		mu.Lock()
		a, ok := answers[host]
		mu.Unlock()
		if ok && now().Before(a.expires) {
			return a.addrs, a.err
		}
		addrs, err := lookup(ctx, host)
		var dnsErr *net.DNSError
		if err == nil || (errors.As(err, &dnsErr) && dnsErr.IsNotFound) {
			mu.Lock()
			// One host (MZ_ENDPOINT's) in practice; bounded all the same.
			if len(answers) >= 64 {
				clear(answers)
			}
			answers[host] = answer{addrs, err, now().Add(resolverValid)}
			mu.Unlock()
		}
		return addrs, err
	}
}

// Run checks the environment and serves until ctx ends.
func Run(ctx context.Context, log *slog.Logger, lookup func(string) (string, bool), readFile func(string) ([]byte, error)) error {
	c, err := Check(lookup, tls.LoadX509KeyPair)
	if err != nil {
		return err
	}
	// Console images are released with environmentd's.
	version, err := standin.Version(clap.Environmentd, lookup)
	if err != nil {
		return err
	}
	resolve, err := Nameservers("/etc/resolv.conf")
	if err != nil {
		return err
	}
	log.Info("TEST STAND-IN console (not Materialize) accepted its environment", "version", version.String(),
		"listens", fmt.Sprint(c.Listens), "tls", c.TLS != nil)
	return serve(ctx, c, Handler(c, version, readFile, resolve, log))
}

// serve binds every listen of c, failing as nginx does when one cannot
// be, and serves h until ctx ends; then it stops as the image's stop
// signal (SIGQUIT, nginx's graceful shutdown) has nginx stop: no new
// connections, the requests in flight finished.
func serve(ctx context.Context, c Config, h http.Handler) error {
	servers := make([]*http.Server, 0, len(c.Listens))
	errc := make(chan error, len(c.Listens))
	for _, l := range c.Listens {
		ln, err := net.Listen(l.Network, l.Addr)
		if err != nil {
			for _, srv := range servers {
				_ = srv.Close()
			}
			return emerg(`bind() to %s failed (%v)`, l.Addr, err)
		}
		if l.SSL {
			ln = tls.NewListener(ln, c.TLS)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 60 * time.Second}
		servers = append(servers, srv)
		go func() { errc <- srv.Serve(ln) }()
	}
	<-ctx.Done()
	for _, srv := range servers {
		_ = srv.Shutdown(context.Background())
	}
	var first error
	for range servers {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = err
		}
	}
	return first
}
