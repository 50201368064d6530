//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// clientAttempt is one line of `netprobe watch` (test/netprobe).
type clientAttempt struct {
	At    time.Time `json:"at"` // when the attempt began
	Kind  string    `json:"kind"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
}

// watchClients runs a client of the environment with resource ID id in ns,
// through balancerd's Service as a user's would connect: a pgwire login and
// an HTTP request every 200 ms, each on a new connection. It returns once
// both have succeeded; attempts reads every attempt so far.
func watchClients(t *testing.T, ns, id string) (attempts func() []clientAttempt) {
	t.Helper()
	buildNetprobeImage(t)
	ctx := context.Background()
	host := fmt.Sprintf("mz%s-balancerd.%s.svc.cluster.local", id, ns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sql-and-http-client", Namespace: ns},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptrTo[int64](1),
			Containers: []corev1.Container{{
				Name: "netprobe", Image: netprobeImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"watch", "-every", "200ms", "-timeout", "2s",
					"-pgwire", host + ":6875", "-http", "http://" + host + ":6876/"},
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
	var last []clientAttempt
	poll(t, "the client to reach environmentd through balancerd over pgwire and HTTP", 3*time.Minute, func() (bool, error) {
		last = read()
		ok := map[string]bool{}
		for _, a := range last {
			ok[a.Kind] = ok[a.Kind] || a.OK
		}
		return ok["pgwire"] && ok["http"], nil
	})
	return read
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
