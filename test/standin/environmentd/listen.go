package environmentd

import (
	"context"
	"net"
)

// AcceptAndClose accepts connections on ln and closes each at once, until
// ln is closed: a port the stand-in must open (a probe connects to it) but
// speaks nothing on, such as pgwire.
func AcceptAndClose(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_ = c.Close()
	}
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
