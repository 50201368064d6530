package fence

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/record/util"
)

// Retries of an Event the API server did not answer, as client-go's.
const (
	eventTries      = 12
	eventRetryAfter = 10 * time.Second
)

// RecordToSink writes the Events recorded on b to sink, as client-go's
// StartRecordingToSink does, but with a correlator whose clock reads the
// time each Event was recorded, not the time it is processed: an Event
// client-go combines from similar ones ("combined from similar events")
// then carries the record time of the last of them, so Events drops it
// when that term is over instead of writing it in the next. ctx ends the
// retries of an Event the API server did not answer.
func RecordToSink(ctx context.Context, b record.EventBroadcaster, sink record.EventSink, opts record.CorrelatorOptions, log *zap.Logger) watch.Interface {
	clock := &recordClock{}
	opts.Clock = clock
	correlator := record.NewEventCorrelatorWithOptions(opts)
	// The watcher handles one Event at a time, in one goroutine: the
	// clock is set and read there only.
	return b.StartEventWatcher(func(recorded *corev1.Event) {
		e := *recorded // other watchers may hold it
		clock.now = e.LastTimestamp.Time
		result, err := correlator.EventCorrelate(&e)
		if err != nil {
			log.Warn("event correlation failed", zap.Error(err))
		}
		if result == nil || result.Skip {
			return
		}
		writeEvent(ctx, sink, correlator, result, log)
	})
}

// recordClock is a clock.PassiveClock at the record time of the Event
// being correlated.
type recordClock struct{ now time.Time }

func (c *recordClock) Now() time.Time                  { return c.now }
func (c *recordClock) Since(t time.Time) time.Duration { return c.now.Sub(t) }

// writeEvent is client-go's recordToSink and recordEvent: a repeat
// patches the Event it repeats (created again if it is gone), an error the
// API server answered drops it, and one it did not answer is retried.
func writeEvent(ctx context.Context, sink record.EventSink, correlator *record.EventCorrelator, r *record.EventCorrelateResult, log *zap.Logger) {
	e := r.Event
	for tries := 1; ; tries++ {
		var saved *corev1.Event
		var err error
		repeat := e.Count > 1
		if repeat {
			saved, err = sink.Patch(e, r.Patch)
		}
		if !repeat || util.IsKeyNotFoundError(err) {
			e.ResourceVersion = ""
			saved, err = sink.Create(e)
		}
		if err == nil {
			correlator.UpdateState(saved)
			return
		}
		var status *apierrors.StatusError
		var construction *rest.RequestConstructionError
		switch {
		case apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			return
		case errors.As(err, &status) || errors.As(err, &construction):
			log.Warn("event refused", zap.String("reason", e.Reason),
				zap.String("object", e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name), zap.Error(err))
			return
		case tries >= eventTries:
			log.Warn("event not written: retries exhausted", zap.String("reason", e.Reason),
				zap.String("object", e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name), zap.Error(err))
			return
		}
		delay := eventRetryAfter
		if tries == 1 { // spread the clients that failed together
			delay = time.Duration(rand.Float64() * float64(delay))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}
