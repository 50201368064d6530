// Package console is a TEST STAND-IN for the Materialize console image
// (nginx serving the web app), NOT the console. Like the image, it takes
// everything from its environment: MZ_ENDPOINT (balancerd's HTTP URL, which
// the image proxies API requests to) and MZ_NGINX_LISTENER_CONFIG (the
// listen directive, with ssl_certificate and ssl_certificate_key when TLS
// is on). It refuses what would leave the real image unable to serve: no
// endpoint, no listener, a certificate nginx could not load. It serves / and
// the app configuration the operator mounts.
package console

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"

	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

// AppConfigPath is where the operator mounts app-config.json (upstream's
// /usr/share/nginx/html/app-config), served at /app-config/app-config.json.
const AppConfigPath = "/usr/share/nginx/html/app-config/app-config.json"

// Listener is the parsed MZ_NGINX_LISTENER_CONFIG.
type Listener struct {
	Port          string
	TLS           *tls.Config
	Cert, KeyFile string
}

// Check reads the environment as the image does and returns what to serve.
func Check(lookup func(string) (string, bool), loadPair func(cert, key string) (tls.Certificate, error)) (Listener, error) {
	var l Listener
	endpoint, ok := lookup("MZ_ENDPOINT")
	if !ok || endpoint == "" {
		return l, fmt.Errorf("MZ_ENDPOINT is not set: the console has no balancerd to send API requests to")
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return l, fmt.Errorf("MZ_ENDPOINT %q is not an http(s) URL", endpoint)
	}
	config, ok := lookup("MZ_NGINX_LISTENER_CONFIG")
	if !ok || strings.TrimSpace(config) == "" {
		return l, fmt.Errorf("MZ_NGINX_LISTENER_CONFIG is not set: nginx would not listen on the console's port")
	}
	directives := map[string][]string{}
	for _, d := range strings.Split(config, ";") {
		fields := strings.Fields(d)
		if len(fields) == 0 {
			continue
		}
		if _, dup := directives[fields[0]]; dup {
			return l, fmt.Errorf(`nginx: [emerg] "%s" directive is duplicate`, fields[0])
		}
		directives[fields[0]] = fields[1:]
	}
	if !strings.HasSuffix(strings.TrimSpace(config), ";") {
		return l, fmt.Errorf(`nginx: [emerg] unexpected end of file, expecting ";" in MZ_NGINX_LISTENER_CONFIG`)
	}
	listen := directives["listen"]
	if len(listen) == 0 || len(listen) > 2 || (len(listen) == 2 && listen[1] != "ssl") {
		return l, fmt.Errorf("nginx: [emerg] invalid listen directive %q", listen)
	}
	l.Port = listen[0]
	for name := range directives {
		switch name {
		case "listen", "ssl_certificate", "ssl_certificate_key":
		default:
			return l, fmt.Errorf(`nginx: [emerg] unknown directive "%s"`, name)
		}
	}
	if len(listen) == 2 {
		cert, key := directives["ssl_certificate"], directives["ssl_certificate_key"]
		if len(cert) != 1 || len(key) != 1 {
			return l, fmt.Errorf(`nginx: [emerg] no "ssl_certificate" is defined for the "listen ... ssl" directive`)
		}
		pair, err := loadPair(cert[0], key[0])
		if err != nil {
			return l, fmt.Errorf(`nginx: [emerg] cannot load certificate "%s": %v`, cert[0], err)
		}
		l.Cert, l.KeyFile = cert[0], key[0]
		l.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	return l, nil
}

// Handler serves / and the mounted app configuration; a configuration that
// is not JSON answers 500, as the web app could not start with it.
func Handler(readFile func(string) ([]byte, error)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, "TEST STAND-IN console, not Materialize")
	})
	mux.HandleFunc("/app-config/"+path.Base(AppConfigPath), func(w http.ResponseWriter, _ *http.Request) {
		raw, err := readFile(AppConfigPath)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		if !json.Valid(raw) {
			http.Error(w, "app-config.json is not JSON", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(raw)
	})
	return mux
}

// Run checks the environment and serves until ctx ends.
func Run(ctx context.Context, log *slog.Logger, lookup func(string) (string, bool), readFile func(string) ([]byte, error)) error {
	l, err := Check(lookup, tls.LoadX509KeyPair)
	if err != nil {
		return err
	}
	log.Info("TEST STAND-IN console (not Materialize) accepted its environment", "port", l.Port, "tls", l.TLS != nil)
	ln, err := net.Listen("tcp", ":"+l.Port)
	if err != nil {
		return err
	}
	served := ln
	if l.TLS != nil {
		served = tls.NewListener(ln, l.TLS)
	}
	errc := make(chan error, 1)
	go func() { errc <- standin.ServeHTTP(served, Handler(readFile)) }()
	return standin.CloseAndWait(ctx, []net.Listener{ln}, errc)
}
