package app_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/test/program"
)

// reflectorFailures is how many times the replica's informers logged a
// failed list or watch, after which they back off. (A watch of a Lease
// stopped with its leadership term logs "context canceled": not a failure.)
func reflectorFailures(t *testing.T, r *replica) int {
	t.Helper()
	return r.logLines(t, func(line string) bool {
		return strings.Contains(line, "Failed to watch") && !strings.Contains(line, "context canceled")
	})
}

// logLines counts the lines of the replica's log that match.
func (r *replica) logLines(t *testing.T, match func(line string) bool) int {
	t.Helper()
	raw, err := os.ReadFile(r.log)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(raw)) {
		if match(line) {
			n++
		}
	}
	return n
}

// The API server is killed and started again (a crash, or a control-plane
// upgrade), not paused: its connections are reset and its port refuses.
// The controllers' reads wait the outage out (pkg/outage), so no read
// fails and the informers have no backoff to sit out: a rollout requested
// right after the API server answers again is acted on as without an
// outage (it once took 21 s after a 15 s outage). The delay is reported;
// E2E-style longer outages: ORCHESTRATORD_TEST_API_OUTAGE=60s.
func TestKilledAPIServerLeavesTheControllersNotBlind(t *testing.T) {
	ns := newNamespace(t, "outage-")
	replicas := startReplicas(t, ns, 1)
	createMaterialize(t, ns, "mz")
	rolledOut(t, ns, "mz", 60*time.Second)
	var r *replica
	for _, only := range replicas {
		r = only
	}
	before := reflectorFailures(t, r)

	outage := 15 * time.Second
	if d, err := time.ParseDuration(os.Getenv("ORCHESTRATORD_TEST_API_OUTAGE")); err == nil && d > 0 {
		outage = d
	}
	cp.KillAPIServer()
	killed := time.Now()
	time.Sleep(outage)
	if err := cp.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	changeEnv(t, ns, "mz", "after-the-outage")
	written := time.Now()

	kube := kubernetes.NewForConfigOrDie(cp.Config)
	var acted time.Time
	waitFor(t, 2*time.Minute, "a StatefulSet of the rollout requested after the outage", func() bool {
		list, err := kube.AppsV1().StatefulSets(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, s := range list.Items {
			if !s.CreationTimestamp.Time.Before(written.Truncate(time.Second)) {
				acted = time.Now()
				return true
			}
		}
		return false
	})
	t.Logf("API server killed for %v; ready again %v after its start; the rollout written %v later, its StatefulSet seen %v after that",
		outage, back.Sub(killed.Add(outage)).Round(time.Millisecond), written.Sub(back).Round(time.Millisecond), acted.Sub(written).Round(time.Millisecond))
	if !r.alive() {
		t.Fatal("the controllers process exited across the outage")
	}
	if failed := reflectorFailures(t, r) - before; failed > 0 {
		t.Errorf("the informers failed %d lists or watches across the outage, and backed off", failed)
	}
	// The informers' watches were cut by the kill: they waited and were
	// sent again, with no backoff in between.
	if resent, err := program.Metric(r.health, "orchestratord_api_reads_resent_total"); err != nil || resent == 0 {
		t.Errorf("no read waited out the outage (%v, %v): the informers retried on their own backoff", resent, err)
	}
	rolledOut(t, ns, "mz", 60*time.Second)
	// Each Lease was lost and led again: the Events of the new terms go out.
	waitFor(t, 30*time.Second, "an Event about the Materialize recorded after the outage", func() bool {
		return materializeEventsSince(t, ns, written) > 0
	})
}
