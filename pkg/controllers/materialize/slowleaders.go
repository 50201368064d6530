package materialize

import (
	"sync"
	"time"
)

// slowPollFactor spaces the polls of an environmentd that answers slowly
// again and again: the next one comes no sooner than this many times what
// the calls to it took. The image is the tenant's; one that stalls each
// call up to the client's timeout would otherwise hold a worker most of
// the time, and a few such tenants every worker, while other tenants'
// changes wait.
const slowPollFactor = 10

// slowRecall is how long a slow answer counts against the next one of the
// same generation. A rollout's first slow answer in that time is waited out
// once (a new pod the network policy agent does not know yet, a node under
// load) rather than ten times over; a generation slow again within it, or
// one that alternates slow and fast answers, is spaced by slowPollFactor.
// A new generation starts afresh: requesting one costs a tenant a new pod.
const slowRecall = 10 * time.Minute

// slowLeaders holds, per Materialize whose environmentd answered slowly,
// the time before which no pass asks it again: without it, events its
// owner causes would bring the next call at once.
type slowLeaders struct {
	mu      sync.Mutex
	leaders map[string]slowLeader
}

type slowLeader struct {
	until      time.Time // no pass before
	lastSlow   time.Time // the last slow answer
	generation uint64    // whose answer it was
}

// answered records a pass whose calls to key's environmentd generation gen
// took leaderTime, ending at now, and returns when the rollout asks again:
// after interval, after as long again as the calls took for a first slow
// answer, or slowPollFactor times that for one slow within slowRecall of
// the last. A pass is slow when slowPollFactor times its calls exceed
// interval.
func (s *slowLeaders) answered(key string, gen uint64, now time.Time, interval, leaderTime time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, known := s.leaders[key]
	recalled := known && prev.generation == gen && now.Sub(prev.lastSlow) < slowRecall
	if slowPollFactor*leaderTime <= interval {
		if recalled {
			s.leaders[key] = slowLeader{lastSlow: prev.lastSlow, generation: gen}
		} else {
			delete(s.leaders, key)
		}
		return interval
	}
	after := max(interval, leaderTime)
	if recalled {
		after = max(interval, slowPollFactor*leaderTime)
	}
	if s.leaders == nil {
		s.leaders = map[string]slowLeader{}
	}
	s.leaders[key] = slowLeader{until: now.Add(after), lastSlow: now, generation: gen}
	return after
}

// wait is how long key's passes are still held back at now.
func (s *slowLeaders) wait(key string, now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, known := s.leaders[key]
	if !known || !now.Before(l.until) {
		return 0
	}
	return l.until.Sub(now)
}

func (s *slowLeaders) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.leaders, key)
}

// forgetAll lets every pass go.
func (s *slowLeaders) forgetAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.leaders)
}
