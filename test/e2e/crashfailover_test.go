//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/test/cluster"
)

// The materialize leader's process is SIGKILLed and its pod left to the
// kubelet: a new term begins as soon as the kubelet reports that process
// terminated (a standby's claim) or restarts it (the restarted process
// reclaims its Lease), not when the Lease expires; the rollout completes and
// the dead process wrote nothing once the new term began.
func TestChaosMaterializeLeaderSIGKILLed(t *testing.T) { crashFailover(t, false) }

// The same with every process of the leader's pod killed at once, its
// sandbox included.
func TestChaosMaterializeLeaderPodKilledWhole(t *testing.T) { crashFailover(t, true) }

func crashFailover(t *testing.T, wholePod bool) {
	ctx := context.Background()
	l := startLoad(t)
	crash, err := c.KillHolder(ctx, leaderelection.LeaseMaterialize, wholePod)
	if err != nil {
		t.Fatal(err)
	}
	term, err := c.WaitNewTerm(ctx, leaderelection.LeaseMaterialize, crash, 3*leaseDuration)
	if err != nil {
		t.Fatal(err)
	}
	began := term.Spec.AcquireTime.Time
	how := "its restarted process reclaimed it"
	if h := cluster.Holder(term); h != crash.Holder {
		how = "standby " + h + " claimed it"
	}
	t.Logf("killed %s (whole pod: %v): a new term began %v after the kill, %v after its last renewal (lease %v); %s",
		crash.Holder, wholePod, began.Sub(crash.Killed).Round(time.Millisecond), began.Sub(crash.LastRenewal).Round(time.Millisecond), leaseDuration, how)
	if !began.Before(crash.LastRenewal.Add(leaseDuration)) {
		t.Errorf("the new term began %v after the last renewal: at expiry, not on the kubelet's report", began.Sub(crash.LastRenewal))
	}
	l.finish(t, time.Now(), controllers)
	deadProcessWroteNothing(t, crash, began)
	newLeaderActed(t, cluster.Holder(term), crash, began, l.activeBefore+1)
}

// newLeaderActed reports what a user sees of the failover: the first write
// (not a Lease's, not an Event) the new holder made in its term, carrying
// on the rollout that was in progress, timed from the kill. There must be
// one, unless the term ended (the placement hands a Lease over two lease
// durations in) before the new generation's environmentd was ready to be
// promoted: until then a rollout already reported as waiting for its pod
// may have nothing to write. A leader that sat idle with a promotion to
// make still fails.
func newLeaderActed(t *testing.T, holder string, crash cluster.Crash, began time.Time, generation uint64) {
	t.Helper()
	ua := cluster.UserAgent(holder)
	events, _, err := cluster.AuditLog(ua)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if !ev.By(ua) || !ev.IsWrite() || !ev.Succeeded() || ev.ObjectRef == nil ||
			ev.ObjectRef.Resource == "leases" || ev.ObjectRef.Resource == "events" || ev.RequestReceivedTimestamp.Before(began) {
			continue
		}
		t.Logf("the new leader's first write, %v, %v after the kill", ev, ev.RequestReceivedTimestamp.Sub(crash.Killed).Round(time.Millisecond))
		return
	}
	ended, ready := materializeTermEnded(t, holder, began), readyToPromoteAt(t, generation)
	// The leader polls environmentd every second or two while it waits,
	// and promotes it once it is ready: a write.
	if ready.IsZero() {
		// The rollout completed, so it was announced: its log is gone.
		t.Fatalf("%s wrote nothing in its new term, and when generation %d's environmentd was ready to promote cannot be told", holder, generation)
	}
	if !ended.IsZero() && ready.After(ended.Add(-5*time.Second)) {
		t.Logf("%s wrote nothing in its term, which ended %v after the kill by a hand-over; generation %d's environmentd was ready to promote only %v after the kill: nothing to write before",
			holder, ended.Sub(crash.Killed).Round(time.Millisecond), generation, ready.Sub(crash.Killed).Round(time.Millisecond))
		return
	}
	t.Errorf("%s wrote nothing in its new term (ended %v, generation %d's environmentd ready to promote %v): the rollout in progress was not carried on",
		holder, ended, generation, ready)
}

// materializeTermEnded is when the replica released the materialize Lease
// after began, from its log; zero if it did not.
func materializeTermEnded(t *testing.T, pod string, began time.Time) time.Time {
	t.Helper()
	return operatorLogLine(t, pod, func(msg, lease string, at time.Time) bool {
		return msg == "released lease" && strings.HasSuffix(lease, "/"+leaderelection.LeaseMaterialize) && at.After(began)
	})
}

// operatorLogLine is the time of the first line of a controllers pod's log
// (its current container's) that match accepts; zero if none does.
func operatorLogLine(t *testing.T, pod string, match func(msg, lease string, at time.Time) bool) time.Time {
	t.Helper()
	raw, err := c.Kube.CoreV1().Pods(operatorNS).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct{ TS, Msg, Lease string }
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if at, err := time.Parse("2006-01-02T15:04:05.000Z0700", line.TS); err == nil && match(line.Msg, line.Lease, at) {
			return at
		}
	}
	return time.Time{}
}

// readyToPromoteAt is when the generation's environmentd announced itself
// ready to be promoted, from its log (its previous container's, once the
// promotion restarted it); zero if it did not.
func readyToPromoteAt(t *testing.T, generation uint64) time.Time {
	t.Helper()
	ctx := context.Background()
	list, err := c.Kube.AppsV1().StatefulSets(cluster.SampleNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if !strings.HasSuffix(s.Name, fmt.Sprintf("-environmentd-%d", generation)) {
			continue
		}
		for _, previous := range []bool{true, false} {
			raw, err := c.Kube.CoreV1().Pods(cluster.SampleNamespace).GetLogs(s.Name+"-0", &corev1.PodLogOptions{Previous: previous}).DoRaw(ctx)
			if err != nil {
				continue // no previous container
			}
			sc := bufio.NewScanner(bytes.NewReader(raw))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				var line struct {
					Time time.Time `json:"time"`
					Msg  string    `json:"msg"`
				}
				if json.Unmarshal(sc.Bytes(), &line) == nil && strings.HasPrefix(line.Msg, "announced as ready to promote") {
					return line.Time
				}
			}
		}
	}
	return time.Time{}
}

// deadProcessWroteNothing checks the audit log for writes by the killed
// process: none received after the kill until its pod's restarted process
// first led, and none that was in flight at the kill and completed after the
// new term began. Lease writes are the election's own.
func deadProcessWroteNothing(t *testing.T, crash cluster.Crash, newTerm time.Time) {
	t.Helper()
	revived := operatorLogLine(t, crash.Holder, func(msg, _ string, _ time.Time) bool { return msg == "acquired lease" })
	if revived.IsZero() {
		revived = time.Now().Add(time.Hour) // the restarted process never led
	}
	events, since, err := cluster.AuditLog(cluster.UserAgent(crash.Holder))
	if err != nil {
		t.Fatal(err)
	}
	if since.After(crash.Killed) {
		t.Fatalf("the audit log begins at %v, after the kill", since)
	}
	ua := cluster.UserAgent(crash.Holder)
	checked := 0
	for _, ev := range events {
		if !ev.By(ua) || !ev.IsWrite() || !ev.Succeeded() || (ev.ObjectRef != nil && ev.ObjectRef.Resource == "leases") {
			continue
		}
		checked++
		received := ev.RequestReceivedTimestamp
		afterKill := !received.Before(crash.Killed) && received.Before(revived)
		inFlight := received.Before(crash.Killed) && ev.Stage == "ResponseComplete" && ev.StageTimestamp.After(newTerm)
		if afterKill || inFlight {
			t.Errorf("the killed process of %s wrote after its end: %v (killed %v, new term %v, its pod led again %v)",
				crash.Holder, ev, crash.Killed.Format(time.RFC3339Nano), newTerm.Format(time.RFC3339Nano), revived.Format(time.RFC3339Nano))
		}
	}
	t.Logf("audit log: %d writes by %s checked, none by its killed process after the kill", checked, crash.Holder)
}
