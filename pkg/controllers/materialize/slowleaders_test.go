package materialize

import (
	"testing"
	"time"
)

func TestSlowLeadersHoldRepeatedSlownessLonger(t *testing.T) {
	const interval = 2 * time.Second
	var s slowLeaders
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	gen := uint64(1)
	step := func(name string, at time.Duration, took, want time.Duration) {
		t.Helper()
		now := t0.Add(at)
		if got := s.answered("ns/mz", gen, now, interval, took); got != want {
			t.Errorf("%s: asked again after %v, want %v", name, got, want)
		}
		held := time.Duration(0)
		if slowPollFactor*took > interval {
			held = want // whatever queues it meanwhile
		}
		if got := s.wait("ns/mz", now); got != held {
			t.Errorf("%s: held for %v, want %v", name, got, held)
		}
	}
	step("a fast answer", 0, 50*time.Millisecond, interval)
	step("a first timeout", time.Minute, 10*time.Second, 10*time.Second)
	step("a fast answer after it", time.Minute+20*time.Second, 50*time.Millisecond, interval)
	// Slow, fast, slow: the second is within slowRecall of the first.
	step("a second timeout", 2*time.Minute, 10*time.Second, 100*time.Second)
	if w := s.wait("ns/mz", t0.Add(2*time.Minute+time.Second)); w != 99*time.Second {
		t.Errorf("held %v after the second timeout, want 99s", w)
	}
	step("a third", 4*time.Minute, 10*time.Second, 100*time.Second)
	gen = 2 // a new rollout
	step("the next generation's first", 5*time.Minute, 10*time.Second, 10*time.Second)
	step("and its second", 6*time.Minute, 10*time.Second, 100*time.Second)
	step("one long after", 6*time.Minute+slowRecall, 10*time.Second, 10*time.Second)
	s.forget("ns/mz")
	step("a timeout after forget", 7*time.Minute+slowRecall, 10*time.Second, 10*time.Second)
	s.forgetAll()
	if w := s.wait("ns/mz", t0.Add(7*time.Minute+slowRecall)); w != 0 {
		t.Errorf("held %v after forgetAll", w)
	}
}
