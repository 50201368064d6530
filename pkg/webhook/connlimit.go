package webhook

import (
	"container/list"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
)

// DefaultMaxConnections bounds the webhook's open connections: each costs
// about 40 KiB idle (TLS and HTTP buffers), so the cap is about 10 MiB,
// part of memoryReserve. An API server keeps one or a few.
const DefaultMaxConnections = 256

// connLimiter caps the connections a listener keeps open. At the cap a new
// connection makes room by closing the one that has waited longest without
// a request (a handshake or first request not yet sent, then an idle
// keep-alive connection); when every connection has a request in flight
// the new one is closed at once. Clients that only open connections can
// therefore neither exhaust memory nor keep the API server out, which
// reconnects and is let in; an idle connection closed under a client costs
// at most one request, which the API server reports (and retries on its
// next call).
type connLimiter struct {
	net.Listener
	max     int
	onClose func(reason string)

	mu sync.Mutex
	// waiting and idle hold the connections without a request in flight,
	// oldest first; active are the rest.
	waiting, idle *list.List
	conns         map[*limitedConn]*list.Element
	active        int
}

func newConnLimiter(ln net.Listener, maxConns int, onClose func(reason string)) *connLimiter {
	return &connLimiter{Listener: ln, max: maxConns, onClose: onClose,
		waiting: list.New(), idle: list.New(), conns: map[*limitedConn]*list.Element{}}
}

type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.forget(c) })
	return c.Conn.Close()
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &limitedConn{Conn: raw, l: l}
		l.mu.Lock()
		var victim *limitedConn
		if len(l.conns) >= l.max {
			victim = l.oldestWithoutRequestLocked()
			if victim == nil {
				l.mu.Unlock()
				// Counted first: whoever sees the close sees the count.
				l.onClose("refused")
				_ = raw.Close()
				continue
			}
			l.removeLocked(victim)
		}
		l.conns[c] = l.waiting.PushBack(c)
		l.mu.Unlock()
		if victim != nil {
			l.onClose("evicted")
			_ = victim.Close()
		}
		return c, nil
	}
}

func (l *connLimiter) oldestWithoutRequestLocked() *limitedConn {
	for _, q := range []*list.List{l.waiting, l.idle} {
		if e := q.Front(); e != nil {
			return e.Value.(*limitedConn)
		}
	}
	return nil
}

// removeLocked forgets c; a connection with a request in flight is in no
// list.
func (l *connLimiter) removeLocked(c *limitedConn) {
	e, ok := l.conns[c]
	if !ok {
		return
	}
	delete(l.conns, c)
	if e == nil {
		l.active--
		return
	}
	l.waiting.Remove(e)
	l.idle.Remove(e)
}

func (l *connLimiter) forget(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removeLocked(c)
}

// ConnState is the server's http.Server.ConnState hook: it moves a
// connection between waiting, active and idle.
func (l *connLimiter) ConnState(conn net.Conn, state http.ConnState) {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	c, ok := conn.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, known := l.conns[c]
	if !known {
		return
	}
	switch state {
	case http.StateActive:
		if e != nil {
			l.waiting.Remove(e)
			l.idle.Remove(e)
			l.conns[c] = nil
			l.active++
		}
	case http.StateIdle:
		if e == nil {
			l.active--
		} else {
			l.waiting.Remove(e)
			l.idle.Remove(e)
		}
		l.conns[c] = l.idle.PushBack(c)
	case http.StateClosed, http.StateHijacked:
		l.removeLocked(c)
	}
}

// open is how many connections are tracked.
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}
