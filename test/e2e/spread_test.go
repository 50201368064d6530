//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/test/cluster"
)

// With three controllers pods each leads one of the three Leases, after
// they start, after a rollout restart and after a SIGKILL (the Deployment
// replaces the pod): leadership spreads instead of piling up on the first
// pod, so one crash stops one reconciler, not three.
func TestLeadershipSpreadsOverThreeControllerPods(t *testing.T) {
	ctx := context.Background()
	scaleFor(t, controllers, 3)

	oneEach := func(after string) {
		t.Helper()
		start := time.Now()
		var holders map[string]string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 4*leaseDuration+time.Minute, true, func(ctx context.Context) (bool, error) {
			holders = map[string]string{}
			pods := map[string]bool{}
			for _, name := range []string{leaderelection.LeaseMaterialize, leaderelection.LeaseBalancer, leaderelection.LeaseConsole} {
				l, err := c.HeldByRunningPod(ctx, name)
				if err != nil {
					return false, nil
				}
				holders[name] = cluster.Holder(l)
				pods[cluster.Holder(l)] = true
			}
			return len(pods) == 3, nil
		})
		if err != nil {
			t.Fatalf("%s: the leases did not spread one per pod: %v", after, holders)
		}
		t.Logf("%s: one lease per pod %v later: %v", after, time.Since(start).Round(time.Millisecond), holders)
	}
	oneEach("scaled to 3")

	if err := c.RolloutRestart(ctx, controllers); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, controllers)
	oneEach("after a rollout restart")

	crash, err := c.CrashHolder(ctx, leaderelection.LeaseMaterialize)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILLed %s", crash.Holder)
	waitRolledOut(t, controllers)
	oneEach("after a SIGKILL")
	requestRolloutAndWait(t) // and the controllers still reconcile
}
