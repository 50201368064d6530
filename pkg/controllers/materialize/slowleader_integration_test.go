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

// slowEnvironmentd is an environmentd whose every answer takes delay: a
// rollout in ns is started against it under a new controller, and polls
// returns when its status was asked for so far.
func slowEnvironmentd(t *testing.T, delay time.Duration) (ns string, ctrl *running, polls func() []time.Time) {
	t.Helper()
	var (
		mu    sync.Mutex
		asked []time.Time
	)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == environmentd.StatusPath {
			mu.Lock()
			asked = append(asked, time.Now())
			mu.Unlock()
		}
		time.Sleep(delay)
		_, _ = io.WriteString(w, `{"status":"Initializing"}`)
	}))
	t.Cleanup(slow.Close)
	ns = newNamespace(t)
	ctrl = startController(t, func(o *materialize.Options) {
		o.EnvironmentdURL = func(*v1alpha1.Materialize, string, uint64) string { return slow.URL }
	})
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns, ctrl, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), asked...)
	}
}

// environmentd's image is the tenant's: one that answers its leader API
// slowly again and again (up to the client's 10 s timeout) is asked again
// no sooner than ten times what its answers took, so a few such tenants
// cannot hold every worker while the others' changes wait; its first slow
// answer is waited out once. Events its owner causes (here an annotation
// written every 200 ms) do not bring the next call sooner. What is checked
// is a lower bound on the spacing of its polls, which a slower machine only
// widens.
func TestSlowEnvironmentdIsPolledLessOften(t *testing.T) {
	const delay = 300 * time.Millisecond
	ns, _, polls := slowEnvironmentd(t, delay)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"touched":"%d"}}}`, i)
			_, _ = mzClient().MaterializeV1alpha1().Materializes(ns).Patch(ctx, "mz", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			time.Sleep(200 * time.Millisecond)
		}
	}()
	waitFor(t, "four polls of environmentd", func() (bool, error) { return len(polls()) >= 4, nil })
	got := polls()
	for i := 1; i < len(got); i++ {
		least := 10 * delay
		if i == 1 {
			least = 2 * delay // its answer, then as long again
		}
		if gap := got[i].Sub(got[i-1]); gap < least {
			t.Errorf("poll %d came %v after the one before; an environmentd whose answers take %v is asked again after %v at the soonest",
				i, gap.Round(time.Millisecond), delay, least)
		}
	}
}

// A slow environmentd held back by one term of this process does not hold
// back the next: a replica that loses its Lease and leads again later
// (another replica led meanwhile, and the pod that answered slowly may be
// long gone) polls at once.
func TestANewTermDoesNotInheritSlowHolds(t *testing.T) {
	const delay = time.Second // held for 10 s after each poll from the second
	_, ctrl, polls := slowEnvironmentd(t, delay)
	waitFor(t, "two polls of environmentd", func() (bool, error) { return len(polls()) >= 2, nil })
	// Past the answer, so that the pass has set its hold.
	time.Sleep(3 * delay)
	before := polls()
	ctrl.newTerm()
	waitFor(t, "the new term's poll", func() (bool, error) { return len(polls()) > len(before), nil })
	if gap := polls()[len(before)].Sub(before[len(before)-1]); gap >= 5*delay {
		t.Errorf("the new term polled %v after the last poll of the term before: it waited out that term's hold (%v)",
			gap.Round(time.Millisecond), 10*delay)
	}
}
