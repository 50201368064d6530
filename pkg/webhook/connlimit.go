package webhook

import (
	"container/list"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxConnections bounds the webhook's open connections. An API
// server keeps one or a few.
const DefaultMaxConnections = 256

// What one connection can hold, bounded by the server's settings
// (server.go) and charged to the in-flight budget while it is open.
const (
	// maxHeaderBytes bounds a request's headers (http.Server adds 4 KiB of
	// slack); the API server sends a few hundred bytes.
	maxHeaderBytes = 16 << 10
	// h2MaxFrame is the largest HTTP/2 frame read (the least allowed).
	h2MaxFrame = 16 << 10
	// h2ReceiveWindow is how much body an HTTP/2 connection may send
	// ahead of the handler reading it, h2StreamWindow per stream. Go's
	// defaults (1 MiB) would let each connection park a MiB outside any
	// charge.
	h2ReceiveWindow = 128 << 10
	h2StreamWindow  = 64 << 10
	// h2MaxStreams bounds a connection's concurrent requests; the API
	// server opens another connection beyond it.
	h2MaxStreams = 16
	// h2HeaderTable bounds the HPACK decoder's table.
	h2HeaderTable = 4 << 10
	// connectionMemory is what an open connection can hold outside its
	// reviews' charges: TLS records in and out, HTTP/1 buffers or the
	// HTTP/2 frame buffer and header tables, and the receive window.
	// Each request is charged its headers and goroutine (requestMemory)
	// while its handler runs.
	connectionMemory = 2*(16<<10+1<<10) + h2MaxFrame + 2*h2HeaderTable + h2ReceiveWindow + 8<<10
	// requestMemory is a request's headers, its goroutine and the server's
	// structures for it.
	requestMemory = maxHeaderBytes + 4<<10 + 16<<10
)

// connLimiter caps the connections a listener keeps open, and charges
// each the memory it can hold (connectionMemory) to the in-flight budget.
// When the budget cannot take one more, a new connection is closed. At the
// cap a new connection makes room by closing the one that has waited
// longest without a request
// (a handshake or first request not yet sent, then an idle keep-alive
// connection), proven ones last: a connection that has had a review
// answered is the API server's as far as anyone can tell, and goes only
// when every connection without a request is proven, the one idle longest
// (the API server's are in use; a client that proves connections to squat
// must keep them busier than it). When none can go, every one having a
// request in flight, the new one is closed at once. Clients that only open
// connections can therefore neither exhaust memory nor push the API server
// out. An idle HTTP/2 connection is told GOAWAY before it is closed, and
// while the cap is reached every answer on an unproven connection carries
// Connection: close (GOAWAY over HTTP/2), so such clients leave between
// requests rather than lose one.
type connLimiter struct {
	net.Listener
	max     int
	onClose func(reason string)
	// charge and refund, when set, take connectionMemory per connection
	// from the in-flight budget.
	charge func(int64) bool
	refund func(int64)

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
	// charged: connectionMemory is charged for it (under l.mu).
	charged bool
	// h2: HTTP/2 was negotiated (under l.mu, set once the handshake is done).
	h2 bool
	// tls is the TLS connection over it, once known (under l.mu).
	tls *tls.Conn
	// proven: a review was answered on it.
	proven atomic.Bool
	// evicted: closed to make room; a request it starts meanwhile closes it.
	evicted atomic.Bool
	// idleSince is when it last went idle (under l.mu).
	idleSince time.Time
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
		if c := l.admit(raw); c != nil {
			return c, nil
		}
	}
}

// admit tracks and charges a new connection, closing others to make room;
// nil when none could go (raw is closed).
func (l *connLimiter) admit(raw net.Conn) *limitedConn {
	c := &limitedConn{Conn: raw, l: l}
	for {
		l.mu.Lock()
		if len(l.conns) < l.max {
			if l.chargeLocked(c) {
				l.conns[c] = l.waiting.PushBack(c)
				l.mu.Unlock()
				return c
			}
			// The budget is taken, mostly by reviews in flight: closing an
			// idle connection would not let this one in, only cost a
			// client its connection.
			l.mu.Unlock()
			l.onClose("refused")
			_ = raw.Close()
			return nil
		}
		victim := l.oldestWithoutRequestLocked()
		if victim == nil {
			l.mu.Unlock()
			// Counted first: whoever sees the close sees the count.
			l.onClose("refused")
			_ = raw.Close()
			return nil
		}
		l.removeLocked(victim)
		victim.evicted.Store(true)
		// GOAWAY only to a connection idle for a while: its last answer has
		// long been flushed, so the frame cannot land inside it.
		goAway := victim.h2 && victim.tls != nil && !victim.idleSince.IsZero() && time.Since(victim.idleSince) >= goAwayGrace
		tc := victim.tls
		l.mu.Unlock()
		l.onClose("evicted")
		// Off the accept loop: a peer that does not read holds only this.
		go evict(victim, goAway, tc)
	}
}

func (l *connLimiter) chargeLocked(c *limitedConn) bool {
	if l.charge != nil && !l.charge(connectionMemory) {
		return false
	}
	c.charged = true
	return true
}

// goAwayGrace is how long an evicted HTTP/2 connection stays open after its
// GOAWAY, so the client reads it before the close.
const goAwayGrace = time.Second

// evict closes a connection that has no request in flight. An HTTP/2 one
// is sent GOAWAY first (last stream 0: nothing on it is being processed, so
// a request the client sends meanwhile is retried elsewhere). Its slot and
// charge are already free.
func evict(c *limitedConn, goAway bool, tc *tls.Conn) {
	if !goAway {
		_ = c.Close()
		return
	}
	// The frame is written whole by one TLS write; the server writes
	// nothing on an idle connection but a ping's answer.
	var frame [17]byte
	frame[2] = 8   // length
	frame[3] = 0x7 // GOAWAY; flags, stream 0, last stream 0 and NO_ERROR are zeros
	_ = tc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := tc.Write(frame[:]); err != nil {
		_ = c.Close()
		return
	}
	time.AfterFunc(goAwayGrace, func() { _ = c.Close() })
}

func (l *connLimiter) oldestWithoutRequestLocked() *limitedConn {
	for _, q := range []*list.List{l.waiting, l.idle} {
		for e := q.Front(); e != nil; e = e.Next() {
			if c := e.Value.(*limitedConn); !c.proven.Load() {
				return c
			}
		}
	}
	// Every one proven: the one idle longest.
	if e := l.idle.Front(); e != nil {
		return e.Value.(*limitedConn)
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
	if c.charged && l.refund != nil {
		l.refund(connectionMemory)
	}
	c.charged = false
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
	tc, _ := conn.(*tls.Conn)
	if tc != nil {
		conn = tc.NetConn()
	}
	c, ok := conn.(*limitedConn)
	if !ok {
		return
	}
	// Active and idle come after the handshake: its state is final.
	h2 := tc != nil && (state == http.StateActive || state == http.StateIdle) && tc.ConnectionState().NegotiatedProtocol == "h2"
	l.mu.Lock()
	defer l.mu.Unlock()
	e, known := l.conns[c]
	if !known {
		if state == http.StateActive && c.evicted.Load() {
			// A request on a connection evicted and not closed yet (its
			// GOAWAY's grace): it is no longer charged, so it may not serve.
			_ = c.Conn.Close()
		}
		return
	}
	if h2 {
		c.h2, c.tls = true, tc
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
		c.idleSince = time.Now()
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

type limitedConnKey struct{}

// ConnContext is the server's http.Server.ConnContext hook: requests find
// their connection in their context.
func (l *connLimiter) ConnContext(ctx context.Context, conn net.Conn) context.Context {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	if c, ok := conn.(*limitedConn); ok {
		return context.WithValue(ctx, limitedConnKey{}, c)
	}
	return ctx
}

// markProven records that a review was answered on the connection of ctx.
func markProven(ctx context.Context) {
	if c, ok := ctx.Value(limitedConnKey{}).(*limitedConn); ok {
		c.proven.Store(true)
	}
}

// askToLeave makes the answer to r close its connection (GOAWAY over
// HTTP/2) when the cap is reached and the connection is not proven.
func (l *connLimiter) askToLeave(w http.ResponseWriter, r *http.Request) {
	if l.shedding(r.Context()) {
		w.Header().Set("Connection", "close")
	}
}

func (l *connLimiter) shedding(ctx context.Context) bool {
	c, ok := ctx.Value(limitedConnKey{}).(*limitedConn)
	if !ok || c.proven.Load() {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns) >= l.max
}
