package cluster

import (
	"context"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Readers GET the sample at v1 in a loop. It is stored as v1alpha1 and a GET
// reads etcd, so every read converts through the webhook Service. (A LIST
// would not do: the API server's watch cache of the v1 storage holds objects
// converted when they were watched.)
type Readers struct {
	stop       context.CancelFunc
	wg         sync.WaitGroup
	ok, failed atomic.Int64
	// conversionFailed counts the failures the API server reported as the
	// conversion webhook's; the rest did not get that far (the API server
	// itself was down, say).
	conversionFailed atomic.Int64

	mu       sync.Mutex
	failures []string
	// byCause counts failures by FailureCause; lastFailure is when the
	// latest one happened.
	byCause     map[string]int64
	lastFailure time.Time
	// examples holds the first error of each cause.
	examples map[string]string
	// conversionFailures holds the first conversion failures other than
	// unresolved ones, with when each happened; lastConversionFailure is
	// when the latest of all did.
	conversionFailures    []TimedFailure
	lastConversionFailure time.Time
	// unresolved counts the conversion failures in which the API server
	// could not resolve the webhook's Service: its own informers were not
	// synced yet (a just-started API server serves before they are), so
	// the webhook was never called. lastUnresolved is when the latest was.
	unresolved     int64
	lastUnresolved time.Time
}

// TimedFailure is a failed read's error and when it failed.
type TimedFailure struct {
	At  time.Time
	Err string
}

func (f TimedFailure) String() string { return f.At.UTC().Format("15:04:05.000") + " " + f.Err }

// Causes of a failed read, as the API server reports the webhook call's
// error (FailureCause).
const (
	// CauseCut: the connection was reset while the request was on it (in
	// flight when the webhook process died).
	CauseCut = "cut"
	// CauseClosed: the request was sent on a connection already closed by
	// the peer (EOF), a race with the API server noticing the close.
	CauseClosed = "closed"
	// CauseRefused: a new connection reached a pod with no listener.
	CauseRefused = "refused"
	// CauseOther: anything else (the API server itself down, a timeout).
	CauseOther = "other"
)

// FailureCause classifies a failed read's error.
func FailureCause(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "connection refused") && strings.Contains(msg, "conversion webhook"):
		return CauseRefused
	case strings.Contains(msg, "connection reset by peer"), strings.Contains(msg, "broken pipe"):
		return CauseCut
	case strings.HasSuffix(msg, ": EOF") || strings.Contains(msg, ": EOF "):
		return CauseClosed
	}
	return CauseOther
}

// serviceUnresolved reports a conversion failure the API server's Service
// resolver made (`service "orchestratord-webhook" not found`): the API
// server did not call the webhook at all.
func serviceUnresolved(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "conversion webhook") && strings.Contains(msg, `: service "`) && strings.Contains(msg, `" not found`)
}

// ReadResult counts the reads of a Readers run.
type ReadResult struct {
	OK, Failed int64
	// ConversionFailed is how many of the failures were the conversion
	// webhook's.
	ConversionFailed int64
	// ConversionFailures holds the first few of them that are not
	// Unresolved, and LastConversionFailure is when the latest of all
	// happened.
	ConversionFailures    []TimedFailure
	LastConversionFailure time.Time
	// Unresolved is how many of the conversion failures were the API
	// server's own: it could not resolve the webhook's Service (its
	// informers not synced after a start). LastUnresolved is when the
	// latest happened.
	Unresolved     int64
	LastUnresolved time.Time
	// Failures holds the first few errors, for the report.
	Failures []string
}

// Total is the number of reads that ran.
func (r ReadResult) Total() int64 { return r.OK + r.Failed }

// StartReaders starts n readers; Stop ends them.
func (c *Clients) StartReaders(n int) *Readers {
	ctx, stop := context.WithCancel(context.Background())
	r := &Readers{stop: stop, byCause: map[string]int64{}, examples: map[string]string{}}
	for range n {
		r.wg.Go(func() {
			for ctx.Err() == nil {
				_, err := c.Materialize.MaterializeV1().Materializes(SampleNamespace).Get(ctx, Sample, metav1.GetOptions{})
				switch {
				case err == nil:
					r.ok.Add(1)
				case ctx.Err() == nil: // not an error of our own cancellation
					r.failed.Add(1)
					now := time.Now()
					r.mu.Lock()
					if strings.Contains(err.Error(), "conversion webhook") {
						r.conversionFailed.Add(1)
						r.lastConversionFailure = now
						switch {
						case serviceUnresolved(err):
							r.unresolved++
							r.lastUnresolved = now
						case len(r.conversionFailures) < 5:
							r.conversionFailures = append(r.conversionFailures, TimedFailure{At: now, Err: err.Error()})
						}
					}
					if len(r.failures) < 5 {
						r.failures = append(r.failures, err.Error())
					}
					cause := FailureCause(err)
					if r.byCause[cause] == 0 {
						r.examples[cause] = err.Error()
					}
					r.byCause[cause]++
					r.lastFailure = now
					r.mu.Unlock()
					// An API server that refuses connections fails a read
					// at once: do not spin.
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	return r
}

// Failed is the number of failed reads so far.
func (r *Readers) Failed() int64 { return r.failed.Load() }

// ConversionFailed is the number of reads failed by the conversion webhook
// so far.
func (r *Readers) ConversionFailed() int64 { return r.conversionFailed.Load() }

// Causes returns the failures so far by FailureCause, and when the latest
// happened (zero if none).
func (r *Readers) Causes() (map[string]int64, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.byCause), r.lastFailure
}

// Examples returns the first error of each cause seen so far.
func (r *Readers) Examples() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.examples)
}

// Total is the number of reads so far.
func (r *Readers) Total() int64 { return r.ok.Load() + r.failed.Load() }

// Stop ends the readers and returns what they saw.
func (r *Readers) Stop() ReadResult {
	r.stop()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return ReadResult{
		OK: r.ok.Load(), Failed: r.failed.Load(), ConversionFailed: r.conversionFailed.Load(),
		Failures:           append([]string(nil), r.failures...),
		ConversionFailures: append([]TimedFailure(nil), r.conversionFailures...), LastConversionFailure: r.lastConversionFailure,
		Unresolved: r.unresolved, LastUnresolved: r.lastUnresolved,
	}
}

// WebhookRolloutUnderReads runs `rollout restart` of the webhook while
// readers GET the sample, from two seconds before the restart until the
// rollout is complete (old pods gone) and at least minReads ran. It returns
// what the readers saw and how long the rollout took.
func (c *Clients) WebhookRolloutUnderReads(ctx context.Context, readers int, minReads int64, timeout time.Duration) (ReadResult, time.Duration, error) {
	r := c.StartReaders(readers)
	time.Sleep(2 * time.Second)
	start := time.Now()
	if err := c.RolloutRestart(ctx, WebhookDeployment); err != nil {
		return r.Stop(), 0, err
	}
	if err := c.WaitRolledOut(ctx, WebhookDeployment, timeout); err != nil {
		return r.Stop(), 0, err
	}
	took := time.Since(start)
	for r.Total() < minReads && time.Since(start) < timeout {
		time.Sleep(100 * time.Millisecond)
	}
	return r.Stop(), took, nil
}
