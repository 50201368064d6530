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
	"k8s.io/apimachinery/pkg/util/wait"
)

// clientAttempt is one line of `netprobe watch` (test/netprobe).
type clientAttempt struct {
	At    time.Time `json:"at"` // when the attempt began
	Kind  string    `json:"kind"`
	Took  float64   `json:"took"` // seconds
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
}

// watchClients runs a client of the environment with resource ID id in ns,
// through balancerd's Service as a user's would connect: a pgwire login and
// an HTTP request every 200 ms, and one through the console's API proxy (to
// balancerd, by the name the operator gives it), each on a new connection,
// given up after clientTimeout. It returns once both have succeeded; attempts reads every
// attempt so far.
func watchClients(t *testing.T, ns, id string) (attempts func() []clientAttempt) {
	t.Helper()
	buildNetprobeImage(t)
	ctx := context.Background()
	// Fully qualified: a name of four dots under ndots 5 would first be
	// tried under each search domain, four lookups where one does, and a
	// dropped answer costs a resolver timeout of the client's budget.
	host := fmt.Sprintf("mz%s-balancerd.%s.svc.cluster.local.", id, ns)
	consoleHost := fmt.Sprintf("mz%s-console.%s.svc.cluster.local.", id, ns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sql-and-http-client", Namespace: ns},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptrTo[int64](1),
			Containers: []corev1.Container{{
				Name: "netprobe", Image: netprobeImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"watch", "-every", "200ms", "-timeout", clientTimeout.String(),
					"-pgwire", host + ":6875", "-http", "http://" + host + ":6876/",
					"-console", "http://" + consoleHost + ":8080/api/sql"},
			}},
		},
	}
	if _, err := c.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	read := func() []clientAttempt {
		raw, err := c.Kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return nil
		}
		var out []clientAttempt
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			var a clientAttempt
			if json.Unmarshal(sc.Bytes(), &a) == nil {
				out = append(out, a)
			}
		}
		return out
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		ok := map[string]bool{}
		for _, a := range read() {
			ok[a.Kind] = ok[a.Kind] || a.OK
		}
		return ok["pgwire"] && ok["http"] && ok["console"], nil
	})
	if err != nil {
		// Each kind's last failure says which hop is broken.
		lastError := map[string]string{}
		for _, a := range read() {
			if !a.OK {
				lastError[a.Kind] = a.Error
			} else {
				delete(lastError, a.Kind)
			}
		}
		t.Fatalf("the client did not reach environmentd through balancerd over pgwire and HTTP, and through the console, in 3 min: still failing %q; balancerd said %q; the console said %q",
			lastError, podsSaid(t, ns, "balancerd", "slow", "failed"), podsSaid(t, ns, "console", "upstream", "invalid URL"))
	}
	return read
}

// podsSaid returns the lines of the logs of the pods of app (balancerd,
// console) in ns that contain any of words: what they say of a client's
// failure.
func podsSaid(t *testing.T, ns, app string, words ...string) []string {
	t.Helper()
	ctx := context.Background()
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "materialize.cloud/app=" + app})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, p := range pods.Items {
		raw, err := c.Kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			out = append(out, p.Name+": "+err.Error())
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			for _, w := range words {
				if strings.Contains(line, w) {
					out = append(out, p.Name+": "+line)
					break
				}
			}
		}
	}
	return out
}

// clientTimeout is how long a client attempt may take: as a user's client
// would wait, long enough for one DNS retry (resolv.conf's 5 s) on the
// local cluster, whose policy agent queues every new flow.
const clientTimeout = 10 * time.Second

// slowAttempts counts the attempts that succeeded but took over a second.
func slowAttempts(attempts []clientAttempt) int {
	n := 0
	for _, a := range attempts {
		if a.OK && a.Took > 1 {
			n++
		}
	}
	return n
}

// clientFailures are the failed attempts begun in a span of time.
type clientFailures struct {
	ByKind      map[string]int
	First, Last time.Time // when the first and the last of them began
	FirstError  string
}

// failedBetween gathers the failed attempts begun in [from, to).
func failedBetween(attempts []clientAttempt, from, to time.Time) clientFailures {
	f := clientFailures{ByKind: map[string]int{}}
	for _, a := range attempts {
		if a.OK || a.At.Before(from) || !a.At.Before(to) {
			continue
		}
		f.ByKind[a.Kind]++
		if f.First.IsZero() {
			f.First, f.FirstError = a.At, a.Kind+": "+a.Error
		}
		f.Last = a.At
	}
	return f
}
