package fence

import (
	"context"
	"net"
	"sync"
	"time"
)

// Connections tracks the connections an API client dials (rest.Config's
// Dial) so that a fence can abort them. The fence stops new writes at the
// deadline, but a write sent just before it may not have reached the API
// server yet: held by a partition and retransmitted once it heals, or
// waiting in the socket of a server that is stalled. Aborting with a reset
// (SO_LINGER 0) discards what this side's kernel still holds to send, and
// the reset makes the server's kernel drop what its process has not read,
// so such a write never lands after the Lease could have expired.
type Connections struct {
	dialer net.Dialer
	mu     sync.Mutex
	open   map[*trackedConn]struct{}
}

// NewConnections returns a tracker dialing as client-go does by default.
func NewConnections() *Connections {
	return &Connections{dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}, open: map[*trackedConn]struct{}{}}
}

// Dial dials and tracks the connection until it is closed.
func (c *Connections) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	conn, err := c.dialer.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	t := &trackedConn{Conn: conn, owner: c}
	c.mu.Lock()
	c.open[t] = struct{}{}
	c.mu.Unlock()
	return t, nil
}

// Abort resets every open connection and returns how many there were. The
// clients dial again on their next request.
func (c *Connections) Abort() int {
	c.mu.Lock()
	open := c.open
	c.open = map[*trackedConn]struct{}{}
	c.mu.Unlock()
	for t := range open {
		if tcp, ok := t.Conn.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		_ = t.Conn.Close()
	}
	return len(open)
}

type trackedConn struct {
	net.Conn
	owner *Connections
}

func (t *trackedConn) Close() error {
	t.owner.mu.Lock()
	delete(t.owner.open, t)
	t.owner.mu.Unlock()
	return t.Conn.Close()
}
