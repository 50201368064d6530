package fence_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/materializeinc/orchestratord/pkg/leaderelection/fence"
)

// termSince is a term of one Lease that began at a moment.
type termSince struct{ began atomic.Pointer[time.Time] }

func (s *termSince) RecordedInTermOf(_ string, t time.Time) bool { return t.After(*s.began.Load()) }

// heldSink holds the first write until released, and counts every write
// that reaches it; written keeps what passes the fence behind it.
type heldSink struct {
	entered, release chan struct{}
	once             sync.Once
	calls            atomic.Int32
	next             record.EventSink
}

func (s *heldSink) hold() {
	s.once.Do(func() { close(s.entered); <-s.release })
	s.calls.Add(1)
}
func (s *heldSink) Create(e *corev1.Event) (*corev1.Event, error) { s.hold(); return s.next.Create(e) }
func (s *heldSink) Update(e *corev1.Event) (*corev1.Event, error) { s.hold(); return s.next.Update(e) }
func (s *heldSink) Patch(e *corev1.Event, p []byte) (*corev1.Event, error) {
	s.hold()
	return s.next.Patch(e, p)
}

type written struct {
	mu       sync.Mutex
	messages []string
}

func (w *written) Create(e *corev1.Event) (*corev1.Event, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.messages = append(w.messages, e.Message)
	saved := *e
	saved.Name, saved.ResourceVersion = fmt.Sprintf("e%d", len(w.messages)), "1"
	return &saved, nil
}
func (w *written) Update(e *corev1.Event) (*corev1.Event, error)          { return w.Create(e) }
func (w *written) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) { return w.Create(e) }

// Events recorded in a term that is over are dropped when the broadcaster
// gets to them in the next term, the ones client-go combines from similar
// Events ("combined from similar events") included: they carry the time
// the last of them was recorded, not the time they were combined.
func TestCombinedEventsOfATermThatIsOverAreDropped(t *testing.T) {
	terms := &termSince{}
	long := time.Now().Add(-time.Hour)
	terms.began.Store(&long)
	out := &written{}
	held := &heldSink{entered: make(chan struct{}), release: make(chan struct{}), next: fence.Events(out, terms, "materialize", zap.NewNop())}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := record.NewBroadcaster(record.WithContext(ctx))
	defer b.Shutdown()
	w := fence.RecordToSink(ctx, b, held, record.CorrelatorOptions{}, zap.NewNop())
	defer w.Stop()
	recorder := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "orchestratord"})

	// Twelve similar Events about one object (the tenth on are combined),
	// recorded in the term that is about to end.
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mz", Namespace: "ns", UID: "u"}}
	const n = 12
	for i := range n {
		recorder.Eventf(obj, corev1.EventTypeWarning, "FailedApply", "attempt %d failed", i)
	}
	<-held.entered
	// A new term begins before the broadcaster has written any of them.
	now := time.Now()
	terms.began.Store(&now)
	close(held.release)
	for deadline := time.Now().Add(10 * time.Second); held.calls.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the broadcaster wrote %d of %d Events", held.calls.Load(), n)
		}
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if len(out.messages) != 0 {
		t.Errorf("Events of a term that is over written in the next: %q", out.messages)
	}

	// In its own term an Event, combined or not, is written.
	for i := range 3 {
		recorder.Eventf(obj, corev1.EventTypeWarning, "FailedApply", "later attempt %d failed", i)
	}
	out.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		out.mu.Lock()
		got := len(out.messages)
		out.mu.Unlock()
		if got == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Events of the current term written, want 3", got)
		}
	}
	out.mu.Lock()
	if !strings.HasPrefix(out.messages[0], "(combined from similar events)") {
		t.Errorf("the current term's Events were not combined (%q): the test no longer exercises combining", out.messages)
	}
}
