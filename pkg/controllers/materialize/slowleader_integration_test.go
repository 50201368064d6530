package materialize_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
	"github.com/materializeinc/orchestratord/pkg/environmentd"
)

// environmentd's image is the tenant's: one that answers its leader API
// slowly (up to the client's 10 s timeout) is asked again no sooner than
// ten times what its answers took, so a few such tenants cannot hold every
// worker while the others' changes wait; events its owner causes (here an
// annotation written every 200 ms) do not bring the next call sooner. What
// is checked is a lower bound on the spacing of its polls, which a slower
// machine only widens.
func TestSlowEnvironmentdIsPolledLessOften(t *testing.T) {
	const delay = 300 * time.Millisecond
	var (
		mu    sync.Mutex
		polls []time.Time
	)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == environmentd.StatusPath {
			mu.Lock()
			polls = append(polls, time.Now())
			mu.Unlock()
		}
		time.Sleep(delay)
		_, _ = io.WriteString(w, `{"status":"Initializing"}`)
	}))
	t.Cleanup(slow.Close)
	ns := newNamespace(t)
	startController(t, func(o *materialize.Options) {
		o.EnvironmentdURL = func(*v1alpha1.Materialize, string, uint64) string { return slow.URL }
	})
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"touched":"%d"}}}`, i)
			_, _ = mzClient().MaterializeV1alpha1().Materializes(ns).Patch(ctx, "mz", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			time.Sleep(200 * time.Millisecond)
		}
	}()
	waitFor(t, "four polls of environmentd", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(polls) >= 4, nil
	})
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(polls); i++ {
		if gap := polls[i].Sub(polls[i-1]); gap < 10*delay {
			t.Errorf("poll %d came %v after the one before; an environmentd whose answers take %v is asked again after %v at the soonest",
				i, gap.Round(time.Millisecond), delay, 10*delay)
		}
	}
}

// A slow environmentd held back by one term of this process does not hold
// back the next: a replica that loses its Lease and leads again later
// (another replica led meanwhile, and the pod that answered slowly may be
// long gone) polls at once.
func TestANewTermDoesNotInheritSlowHolds(t *testing.T) {
	const delay = time.Second // held for 10 s after each poll
	var (
		mu    sync.Mutex
		polls []time.Time
	)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == environmentd.StatusPath {
			mu.Lock()
			polls = append(polls, time.Now())
			mu.Unlock()
		}
		time.Sleep(delay)
		_, _ = io.WriteString(w, `{"status":"Initializing"}`)
	}))
	t.Cleanup(slow.Close)
	ns := newNamespace(t)
	ctrl := startController(t, func(o *materialize.Options) {
		o.EnvironmentdURL = func(*v1alpha1.Materialize, string, uint64) string { return slow.URL }
	})
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollCount := func() (int, time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if len(polls) == 0 {
			return 0, time.Time{}
		}
		return len(polls), polls[len(polls)-1]
	}
	waitFor(t, "a poll of environmentd", func() (bool, error) { n, _ := pollCount(); return n >= 1, nil })
	// Past the answer, so that the pass has set its hold.
	time.Sleep(3 * delay)
	n, last := pollCount()
	ctrl.newTerm()
	waitFor(t, "the new term's poll", func() (bool, error) { m, _ := pollCount(); return m > n, nil })
	mu.Lock()
	defer mu.Unlock()
	if gap := polls[n].Sub(last); gap >= 5*delay {
		t.Errorf("the new term polled %v after the last poll of the term before: it waited out that term's hold (%v)",
			gap.Round(time.Millisecond), 10*delay)
	}
}
