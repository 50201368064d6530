package leaderelection

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/leaderelection/fence"
)

type sinkCalls struct{ created []string }

func (s *sinkCalls) Create(e *corev1.Event) (*corev1.Event, error) {
	s.created = append(s.created, e.Reason)
	return e, nil
}
func (s *sinkCalls) Update(e *corev1.Event) (*corev1.Event, error)          { return s.Create(e) }
func (s *sinkCalls) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) { return s.Create(e) }

// An Event is written only in the term of its controller's Lease it was
// recorded in: one queued before that Lease was lost is dropped, even
// once the process leads again, and so is one queued before it was handed
// over while the process still leads another Lease.
func TestFenceEventsDropsEventsOfATermThatIsOver(t *testing.T) {
	health := NewTerms()
	inner := &sinkCalls{}
	sink := fence.Events(inner, health, "materialize", zap.NewNop())
	var renewed atomic.Pointer[time.Time]
	now := time.Now()
	renewed.Store(&now)
	untrack := health.track("materialize", "me", time.Hour, time.Hour, func() time.Time { return *renewed.Load() })
	event := func(reason string) *corev1.Event {
		return &corev1.Event{Reason: reason, LastTimestamp: metav1.NewTime(time.Now())}
	}

	firstTerm := event("FirstTerm")
	if _, err := sink.Create(event("Sent")); err != nil {
		t.Fatal(err)
	}
	// Past the renew deadline the term is over, before lead has returned.
	overdue := now.Add(-2 * time.Hour)
	renewed.Store(&overdue)
	if _, err := sink.Create(firstTerm); err != nil {
		t.Fatal(err)
	}
	untrack()
	// Leading another Lease does not revive the materialize Lease's Events.
	untrackBalancer := health.track("balancer", "me", time.Hour, time.Hour, func() time.Time { return time.Now() })
	if _, err := sink.Update(firstTerm); err != nil { // the broadcaster's retry
		t.Fatal(err)
	}
	untrack = health.track("materialize", "me", time.Hour, time.Hour, func() time.Time { return time.Now() })
	if _, err := sink.Update(firstTerm); err != nil { // nor does leading it again
		t.Fatal(err)
	}
	secondTerm := event("SecondTerm")
	if _, err := sink.Patch(secondTerm, nil); err != nil {
		t.Fatal(err)
	}
	// Handed over without a fence, while the balancer Lease is still led:
	// the second term's queued Event stays unsent.
	handedOver := event("HandedOver")
	untrack()
	if _, err := sink.Create(handedOver); err != nil {
		t.Fatal(err)
	}
	untrackBalancer()
	if got := strings.Join(inner.created, ","); got != "Sent,SecondTerm" {
		t.Errorf("events written: %s, want Sent,SecondTerm (FirstTerm and HandedOver were recorded in terms that are over)", got)
	}
}

// One Lease past its renew deadline fences the writes of its own term
// only: the process's other Lease still writes, and its Events go out.
func TestOneLeasePastItsDeadlineFencesOnlyItsOwnTerm(t *testing.T) {
	health := NewTerms()
	lost := time.Now().Add(-time.Minute)
	defer health.track("balancer", "me", time.Hour, 10*time.Second, func() time.Time { return lost })()
	defer health.track("materialize", "me", time.Hour, 10*time.Second, time.Now)()
	if health.WritesAllowed("balancer") {
		t.Error("the balancer Lease is past its renew deadline: its writes must be refused")
	}
	if !health.WritesAllowed("materialize") {
		t.Error("the materialize Lease is renewed: its writes must go on")
	}
	if health.WritesAllowed("console") {
		t.Error("a Lease the process does not hold allows no write")
	}
	inner := &sinkCalls{}
	if _, err := fence.Events(inner, health, "materialize", zap.NewNop()).Create(&corev1.Event{Reason: "Kept", LastTimestamp: metav1.NewTime(time.Now())}); err != nil {
		t.Fatal(err)
	}
	if _, err := fence.Events(inner, health, "balancer", zap.NewNop()).Create(&corev1.Event{Reason: "Dropped", LastTimestamp: metav1.NewTime(time.Now())}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(inner.created, ","); got != "Kept" {
		t.Errorf("events written: %s, want Kept", got)
	}
	gated := fence.Gate(roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	}), func() bool { return health.WritesAllowed("balancer") })
	req, _ := http.NewRequest(http.MethodPost, "https://api.invalid/apis/apps/v1/namespaces/x/deployments", nil)
	if _, err := gated.RoundTrip(req); !errors.Is(err, fence.ErrFenced) {
		t.Errorf("a write of the lost term: %v, want fence.ErrFenced", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
