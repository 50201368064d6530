package environmentd

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"

	"github.com/materializeinc/orchestratord/pkg/imageref"
)

// perRouteGroupRolesVersion is the first environmentd that parses the
// 26.32.0 listeners schema (upstream's PER_ROUTE_GROUP_ROLES_VERSION). The
// operator has the same constant; the stand-in keeps its own so that it
// checks the operator instead of sharing its mistakes.
var perRouteGroupRolesVersion = imageref.MustParseVersion("26.32.0-dev.0")

// oidcVersion is the first environmentd whose AuthenticatorKind has Oidc
// (upstream c61ef02a01, "SQL-64: Create OIDC authenticator").
var oidcVersion = imageref.MustParseVersion("26.12.0-dev.0")

// ServeHTTP serves h on ln until ln is closed, which is not an error.
func ServeHTTP(ln net.Listener, h http.Handler) error {
	err := (&http.Server{Handler: h}).Serve(ln)
	if errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Listen binds addr as Rust's std binds a socket address: an IPv4 address
// (0.0.0.0 included) takes IPv4 connections only, where Go's "tcp" would
// take IPv6 ones on 0.0.0.0 too.
func Listen(addr string) (net.Listener, error) {
	network := "tcp"
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.To4() != nil {
			network = "tcp4"
		}
	}
	return net.Listen(network, addr)
}

// CloseAndWait closes lns once ctx ends and returns the first error of the
// goroutines serving them, each of which sends once on errc.
func CloseAndWait(ctx context.Context, lns []net.Listener, errc <-chan error) error {
	<-ctx.Done()
	for _, ln := range lns {
		_ = ln.Close()
	}
	var first error
	for range lns {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// ServerTLS is mz_server_core's TlsCertConfig, which environmentd and
// balancerd serve with: OpenSSL's Mozilla intermediate v5 profile, TLS 1.2
// and 1.3, and in 1.2 only ECDHE with AES-GCM or ChaCha20-Poly1305 (its
// DHE suites Go does not have). Go's defaults would also offer CBC suites
// in 1.2, which a client then could negotiate here and not upstream.
func ServerTLS(pair tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{pair},
		MinVersion:   tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
	}
}
