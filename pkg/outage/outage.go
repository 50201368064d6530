// Package outage makes reads wait out an API server outage instead of
// failing. client-go's informers back off after each failed list or watch
// (0.8 s doubling to 30 s), so once an API server that was down for 15 s
// answers again they stay blind for up to their next attempt: a change
// written then was acted on 21 s later. A read that cannot reach the API
// server here waits until its /readyz answers, probed every ProbeInterval
// by one prober for all waiting reads, and is then sent again: the
// reflectors never see the outage, so they have no backoff to sit out.
package outage

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// DefaultProbeInterval is how often an unreachable API server is probed.
const DefaultProbeInterval = 250 * time.Millisecond

// maxResends bounds how often one read is sent again after the API server
// answered a probe: one that still cannot reach it (a probe and a read
// routed differently) fails as it would have.
const maxResends = 3

// Resent counts the reads that waited out an outage and were sent again:
// orchestratord_api_reads_resent_total.
func Resent() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orchestratord_api_reads_resent_total",
		Help: "Reads that could not reach the API server, waited until it answered again and were sent again.",
	})
}

// Transport wraps rt so that GET requests wait out an outage. Writes are
// untouched: whether one that failed took effect is for its caller to find
// out.
type Transport struct {
	next          http.RoundTripper
	probeInterval time.Duration
	resent        prometheus.Counter

	mu sync.Mutex
	// reachable is closed when a probe answers; nil while none runs.
	reachable chan struct{}
	waiting   int
}

// Wrap returns a Transport around rt, for rest.Config.Wrap; resent (from
// Resent) may be nil.
func Wrap(probeInterval time.Duration, resent prometheus.Counter) func(http.RoundTripper) http.RoundTripper {
	if probeInterval <= 0 {
		probeInterval = DefaultProbeInterval
	}
	return func(rt http.RoundTripper) http.RoundTripper {
		return &Transport{next: rt, probeInterval: probeInterval, resent: resent}
	}
}

func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return t.next.RoundTrip(req)
	}
	for resends := 0; ; resends++ {
		resp, err := t.next.RoundTrip(req)
		if err == nil || !unreachable(err) || resends == maxResends {
			return resp, err
		}
		if werr := t.waitReachable(req.Context(), req.URL); werr != nil {
			return nil, err
		}
		if t.resent != nil {
			t.resent.Inc()
		}
	}
}

// unreachable is an error of a request that never got an answer because
// the API server is not there: refused, reset, cut off mid-read, or no
// route to it. (A timeout is not: a slow server is not an outage a probe
// would see the end of.)
func unreachable(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.ECONNABORTED)
}

// waitReachable returns once the API server at u answers /readyz with a
// status below 500 (up and ready, or up and not letting this client see
// whether it is), or when ctx ends.
func (t *Transport) waitReachable(ctx context.Context, u *url.URL) error {
	t.mu.Lock()
	ch := t.reachable
	if ch == nil {
		ch = make(chan struct{})
		t.reachable = ch
		probe := &url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/readyz"}
		go t.probe(probe.String(), ch)
	}
	t.waiting++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.waiting--
		t.mu.Unlock()
	}()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probe polls until the API server answers, then wakes every waiting read;
// it gives up when no read waits any more.
func (t *Transport) probe(u string, reachable chan struct{}) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 4*t.probeInterval)
		answered := false
		if req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil); err == nil {
			if resp, err := t.next.RoundTrip(req); err == nil {
				resp.Body.Close()
				answered = resp.StatusCode < http.StatusInternalServerError
			}
		}
		cancel()
		t.mu.Lock()
		if answered || t.waiting == 0 {
			t.reachable = nil
			t.mu.Unlock()
			if answered {
				close(reachable)
			}
			return
		}
		t.mu.Unlock()
		time.Sleep(t.probeInterval)
	}
}
