// Package recent remembers a reconciler's own writes until its informers
// have seen them (read-your-writes), so that a reconcile running before the
// cache catches up neither repeats a write nor decides twice on a state it
// has moved past. Every reconciler uses it.
package recent

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Writes remembers objects as this controller's own writes returned
// them, per owner, so that a reconcile running before the informers have
// seen those writes neither repeats them nor, for status, computes a
// transition (and emits its Event) twice. An entry goes when the cache has
// caught up with it, when its owner is gone, or after writeTTL: a
// write the informers never see (an object they do not watch, a key not
// looked up again) is not kept for ever.
type Writes struct {
	mu   sync.Mutex
	objs map[string]map[string]write // owner key -> object key -> write
	// swept is when expired entries were last dropped.
	swept time.Time
	now   func() time.Time
}

type write struct {
	obj metav1.Object
	at  time.Time
}

// writeTTL is how long a write is remembered: the informers see a
// write within seconds, and after a longer outage they list again.
const writeTTL = 2 * time.Minute

// NewWrites returns an empty Writes.
func NewWrites() *Writes {
	return &Writes{objs: map[string]map[string]write{}, now: time.Now}
}

// Put remembers obj, as a write of this controller returned it, under the
// owner's key and the object's key.
func (r *Writes) Put(owner, key string, obj metav1.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.swept) > writeTTL/2 {
		r.sweepLocked(now)
	}
	if r.objs[owner] == nil {
		r.objs[owner] = map[string]write{}
	}
	r.objs[owner][key] = write{obj: obj, at: now}
}

// sweepLocked drops the expired entries; run at most twice per TTL, so
// each Put costs amortised constant time.
func (r *Writes) sweepLocked(now time.Time) {
	r.swept = now
	for owner, writes := range r.objs {
		for key, w := range writes {
			if now.Sub(w.at) > writeTTL {
				delete(writes, key)
			}
		}
		if len(writes) == 0 {
			delete(r.objs, owner)
		}
	}
}

func (r *Writes) get(owner, key string) (metav1.Object, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.objs[owner][key]
	if ok && r.now().Sub(w.at) > writeTTL {
		return nil, false
	}
	return w.obj, ok
}

// Len is how many writes are remembered.
func (r *Writes) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, writes := range r.objs {
		n += len(writes)
	}
	return n
}

func (r *Writes) drop(owner, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.objs[owner], key)
	if len(r.objs[owner]) == 0 {
		delete(r.objs, owner)
	}
}

// Forget drops everything remembered for an owner that is gone.
func (r *Writes) Forget(owner string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.objs, owner)
}

// Current returns the newest known state of an object: the informer's copy
// (cached, found) or the copy this controller last wrote, whichever has the
// later resourceVersion. When only the written copy is known, get asks the
// API server, since the object may have been deleted since.
func Current[T metav1.Object](ctx context.Context, r *Writes, owner, key string, cached T, found bool,
	get func(context.Context) (T, error),
) (T, bool, error) {
	w, ok := r.get(owner, key)
	if !ok {
		return cached, found, nil
	}
	written := w.(T)
	if !found {
		live, err := get(ctx)
		switch {
		case apierrors.IsNotFound(err):
			r.drop(owner, key)
			return cached, false, nil
		case err != nil:
			return cached, false, err
		}
		cached = live
	}
	if cmp, err := resourceversion.CompareResourceVersion(written.GetResourceVersion(), cached.GetResourceVersion()); err == nil && cmp > 0 {
		return written, true, nil
	}
	r.drop(owner, key) // the cache has caught up
	return cached, true, nil
}
