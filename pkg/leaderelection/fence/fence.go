// Package fence keeps a leadership term's writes inside the term: a
// mutating request is refused at the moment it would be sent once its
// term's Lease could have expired (Transport, from the lead context's
// deadline; Gate, for writes without one), a queued Event is written only
// in the term it was recorded in (Events, behind RecordToSink), and a
// term's connections can be reset so that nothing sent before the
// deadline lands after it (Connections). docs/leader-election.md.
package fence

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// ErrFenced is returned for a write attempted after the lease could have
// expired.
var ErrFenced = errors.New("fence: write refused, the lease may have expired")

type writeDeadlineKey struct{}

// WithWriteDeadline marks a lead context with the moment after which its
// lease could have expired: the last successful renewal plus RenewDeadline.
// leaderelection.Run gives lead such a context.
func WithWriteDeadline(ctx context.Context, deadline func() time.Time) context.Context {
	return context.WithValue(ctx, writeDeadlineKey{}, deadline)
}

// WriteDeadline reports the write deadline of a lead context.
func WriteDeadline(ctx context.Context) (time.Time, bool) {
	deadline, ok := ctx.Value(writeDeadlineKey{}).(func() time.Time)
	if !ok {
		return time.Time{}, false
	}
	return deadline(), true
}

// Transport wraps a client's transport so that a mutating request made
// with a lead context is refused at the moment it would be sent if the
// lease's write deadline has passed. The lead context is cancelled at that
// deadline too, but a cancellation races with a goroutine already on its way
// to send (after a process was paused, say); this check does not.
func Transport(rt http.RoundTripper) http.RoundTripper {
	return fenceTransport{next: rt}
}

// Gate wraps a transport so that mutating requests are refused
// while allowed() is false, checked at the moment they would be sent. It
// fences writes made without a lead context, such as Events, which are
// queued and may wait in the client's rate limiter for a while: with
// leaderelection.Terms.WritesAllowed of one Lease, the client of that Lease's
// reconciler writes only during its terms.
func Gate(rt http.RoundTripper, allowed func() bool) http.RoundTripper {
	return fenceTransport{next: rt, allowed: allowed}
}

type fenceTransport struct {
	next    http.RoundTripper
	allowed func() bool
}

func (f fenceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if deadline, ok := WriteDeadline(req.Context()); ok && !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%s %s: %w (deadline %s)", req.Method, req.URL.Path, ErrFenced, deadline.Format(time.RFC3339Nano))
		}
		if f.allowed != nil && !f.allowed() {
			return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ErrFenced)
		}
	}
	return f.next.RoundTrip(req)
}

// Events wraps the Event sink of the controller that leads lease so
// that an Event it recorded is written only during the term it was
// recorded in: one queued before the lease was lost, handed over or
// released is dropped instead of being sent later, under another term
// (the broadcaster retries a failed Event for minutes). Each controller
// has its own broadcaster, sink and client: the terms of the process's
// other Leases say nothing about this one's. Events are stamped when recorded
// (LastTimestamp, full precision in memory).
func Events(sink record.EventSink, terms Terms, lease string, log *zap.Logger) record.EventSink {
	return fencedSink{next: sink, terms: terms, lease: lease, log: log}
}

// Terms says whether something recorded at t on behalf of lease belongs to
// the term of it the process holds now (leaderelection.Terms).
type Terms interface {
	RecordedInTermOf(lease string, t time.Time) bool
}

type fencedSink struct {
	next  record.EventSink
	terms Terms
	lease string
	log   *zap.Logger
}

// stale drops an Event from a term that is over. Reporting success (rather
// than an error) keeps the broadcaster from retrying it or logging it as
// refused.
func (s fencedSink) stale(e *corev1.Event) bool {
	if s.terms.RecordedInTermOf(s.lease, e.LastTimestamp.Time) {
		return false
	}
	s.log.Info("event from a term that is over dropped", zap.String("lease", s.lease), zap.String("reason", e.Reason),
		zap.String("object", e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name), zap.Time("recordedAt", e.LastTimestamp.Time))
	return true
}

func (s fencedSink) Create(e *corev1.Event) (*corev1.Event, error) {
	if s.stale(e) {
		return e, nil
	}
	return s.next.Create(e)
}

func (s fencedSink) Update(e *corev1.Event) (*corev1.Event, error) {
	if s.stale(e) {
		return e, nil
	}
	return s.next.Update(e)
}

func (s fencedSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	if s.stale(e) {
		return e, nil
	}
	return s.next.Patch(e, data)
}
