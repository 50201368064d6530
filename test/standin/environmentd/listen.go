package environmentd

import (
	"context"
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
