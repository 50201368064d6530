package gke

import (
	"sort"
	"sync"
	"time"
)

// maxArmedPools bounds the pools armed at once; notifications choose them
// (GKE allows far fewer pools per cluster in practice).
const maxArmedPools = 256

// armedPools are the pools whose upgrade is being followed, each with when
// it was armed. The subscriber arms, the scan arms and disarms.
type armedPools struct {
	mu    sync.Mutex
	pools map[string]time.Time
}

// arm arms pool unless it is armed already (its arming time is kept, so a
// stream of notifications never postpones the 14-day disarm). It reports
// whether pool was newly armed, and refused when the bound is reached.
func (a *armedPools) arm(pool string, now time.Time) (armed, refused bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pools[pool]; ok {
		return false, false
	}
	if len(a.pools) >= maxArmedPools {
		return false, true
	}
	if a.pools == nil {
		a.pools = map[string]time.Time{}
	}
	a.pools[pool] = now
	return true, false
}

func (a *armedPools) disarm(pool string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.pools, pool)
}

func (a *armedPools) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pools)
}

// list returns the armed pools, sorted, each with when it was armed.
func (a *armedPools) list() ([]string, map[string]time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	names := make([]string, 0, len(a.pools))
	at := make(map[string]time.Time, len(a.pools))
	for p, t := range a.pools {
		names = append(names, p)
		at[p] = t
	}
	sort.Strings(names)
	return names, at
}

// expired reports whether a pool armed at armedAt has been armed too long.
func expired(armedAt, now time.Time) bool { return now.Sub(armedAt) > MaxArmed }
