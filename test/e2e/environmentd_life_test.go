//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
)

// What environmentd does once it runs (upstream deployment/preflight.rs),
// played by the stand-in on the cluster: the first generation leads at
// once on a fresh catalog (no promotion) and creates its bootstrap
// replicas' clusterd objects with its own ServiceAccount; a new generation
// is promoted — here by hand through its leader API, as an administrator
// might, while the rollout waits for approval — takes the catalog over and
// halts (exit 166), the kubelet restarts it and it comes back as the
// leader; the old generation, fenced out, exits 0 and sleeps. The operator completes
// the rollout through all of it and tears the old generation down; no pod
// crash-loops.
func TestEnvironmentdHaltsAfterPromotionAndTheOldGenerationIsTornDown(t *testing.T) {
	ctx := context.Background()
	ns := contractNamespace(t, nil)
	mz := &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "mz", Namespace: ns},
		Spec: v1alpha1.MaterializeSpec{EnvironmentdImageRef: standinV26_35, BackendSecretName: "backend",
			RolloutStrategy: v1alpha1.RolloutManuallyPromote, EnvironmentdExtraArgs: quickCatchUp},
	}
	if _, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Create(ctx, mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crashLoops := watchCrashLoops(t, ns)
	first := waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
	id := first.Status.ResourceID
	gen1Pod := fmt.Sprintf("mz%s-environmentd-1-0", id)
	if p := getPod(t, ns, gen1Pod); p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("generation 1 restarted on a fresh catalog: %+v", p.Status.ContainerStatuses[0])
	}
	// Its bootstrap replicas (the chart's flags: mz_catalog_server and quickstart).
	for _, name := range []string{"mz" + id + "-cluster-s2-replica-s1-gen-1", "mz" + id + "-cluster-u1-replica-u1-gen-1"} {
		waitExists(t, "clusterd StatefulSet "+name, func() error {
			_, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}

	// Secrets of user items as environmentd's secrets controller names
	// them, against a catalog that has u1 and allocated ids up to u4: the
	// promoted generation, once it leads, deletes u3's (orphaned) and keeps
	// u1's (live) and u8's (an id the catalog has not allocated).
	prefix := "mz" + id + "-"
	playCatalogItems(t, ns, "u1", 5)
	for _, item := range []string{"u1", "u3", "u8"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: prefix + "user-managed-" + item, Namespace: ns},
			Data: map[string][]byte{"contents": []byte("secret of " + item)}}
		if _, err := c.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// A rollout that waits for approval at ReadyToPromote.
	requestForcedRollout(t, ns)
	waitUpToDate(t, ns, metav1.ConditionUnknown, "ReadyToPromote", 4*time.Minute)

	gen2Pod := fmt.Sprintf("mz%s-environmentd-2-0", id)
	body, err := c.Kube.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(gen2Pod + ":6878").
		SubResource("proxy").Suffix("api/leader/promote").DoRaw(ctx)
	if err != nil || !strings.Contains(string(body), `"Success"`) {
		t.Fatalf("promoting generation 2 by hand: %s %v", body, err)
	}

	done := waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
	if done.Status.ActiveGeneration != 2 {
		t.Errorf("active generation %d, want 2", done.Status.ActiveGeneration)
	}
	st := getPod(t, ns, gen2Pod).Status.ContainerStatuses[0]
	if st.RestartCount < 1 || st.LastTerminationState.Terminated == nil || st.LastTerminationState.Terminated.ExitCode != 166 {
		t.Errorf("generation 2 did not halt (exit 166) after its promotion: %+v", st)
	}
	waitExists(t, "generation 1 torn down", func() error {
		_, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, fmt.Sprintf("mz%s-environmentd-1", id), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there")
	})
	waitExists(t, "generation 1's clusterd dropped, generation 2's created", func() error {
		list, err := c.Kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=clusterd"})
		if err != nil {
			return err
		}
		var names []string
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		if got := strings.Join(names, ","); got != "mz"+id+"-cluster-s2-replica-s1-gen-2,mz"+id+"-cluster-u1-replica-u1-gen-2" {
			return fmt.Errorf("clusterd StatefulSets %s", got)
		}
		return nil
	})
	waitExists(t, "the leader's orphaned Secret cleanup", func() error {
		var left []string
		for _, item := range []string{"u1", "u3", "u8"} {
			if _, err := c.Kube.CoreV1().Secrets(ns).Get(ctx, prefix+"user-managed-"+item, metav1.GetOptions{}); err == nil {
				left = append(left, item)
			}
		}
		if got := strings.Join(left, ","); got != "u1,u8" {
			return fmt.Errorf("Secrets of %s left, want u1,u8", got)
		}
		return nil
	})
	// environmentd reads its replicas' usage from metrics-server as its own
	// ServiceAccount (the environment's Role allows it), and clusterd's
	// heap over the network, under the operator's policies: once a
	// minute, so this waits for the first read after the pods are scraped.
	waitExists(t, "replica metrics read by the leader", func() error {
		log := containerLog(t, ns, gen2Pod)
		if strings.Contains(log, "forbidden") {
			return fmt.Errorf("a metrics read was refused:\n%s", lastLines(log, 20))
		}
		if !strings.Contains(log, `"msg":"replica metrics","pod":"`+prefix+"cluster-u1-replica-u1-gen-2-0") {
			return fmt.Errorf("no replica metrics yet:\n%s", lastLines(log, 5))
		}
		return nil
	})
	if loops := crashLoops(); len(loops) > 0 {
		t.Errorf("pods in CrashLoopBackOff during the rollout: %v", loops)
	}
}

// playCatalogItems writes the user items of ns's stand-in catalog as DDL
// against the leader would leave them: ids (space separated) and the id
// allocator's next.
func playCatalogItems(t *testing.T, ns, ids string, next uint64) {
	t.Helper()
	ctx := context.Background()
	list, err := c.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=standin-catalog"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("the stand-in's catalog Secret: %d found, %v", len(list.Items), err)
	}
	s := list.Items[0]
	s.Data["user-item-ids"] = []byte(ids)
	s.Data["next-user-item-id"] = []byte(strconv.FormatUint(next, 10))
	if _, err := c.Kube.CoreV1().Secrets(ns).Update(ctx, &s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// lastLines is s's last n lines.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// A generation whose catalog a newer one took over exits 0 at boot and, as
// environmentd's image does, sleeps instead of exiting: its pod stays,
// running and not ready, and is never restarted by the kubelet.
func TestFencedOutEnvironmentdSleeps(t *testing.T) {
	ctx := context.Background()
	ns := contractNamespace(t, nil)
	createMaterialize(t, ns, standinV26_35, "")
	mz := waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
	sts, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, fmt.Sprintf("mz%s-environmentd-1", mz.Status.ResourceID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The same environment booted as generation 0, below the catalog's 1.
	spec := *sts.Spec.Template.Spec.DeepCopy()
	for i, a := range spec.Containers[0].Args {
		if strings.HasPrefix(a, "--deploy-generation=") {
			spec.Containers[0].Args[i] = "--deploy-generation=0"
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fenced-environmentd", Namespace: ns, Labels: map[string]string{"test": "fenced"}}, Spec: spec}
	if _, err := c.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitExists(t, "the fenced generation asleep", func() error {
		if !strings.Contains(containerLogSafe(ns, pod.Name), "environmentd exited gracefully; sleeping forever") {
			return fmt.Errorf("not asleep")
		}
		return nil
	})
	time.Sleep(5 * time.Second) // a restart would show by now
	st := getPod(t, ns, pod.Name).Status.ContainerStatuses[0]
	if st.State.Running == nil || st.Ready || st.RestartCount != 0 {
		t.Errorf("fenced generation: running %v, ready %v, restarts %d; want running, not ready, never restarted", st.State.Running != nil, st.Ready, st.RestartCount)
	}
	if log := containerLogSafe(ns, pod.Name); !strings.Contains(log, "this deployment has been fenced out") {
		t.Errorf("log lacks the fencing:\n%s", log)
	}
}

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := c.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s has no container status", name)
	}
	return p
}

func containerLogSafe(ns, pod string) string {
	b, err := c.Kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		return ""
	}
	return string(b)
}

func waitExists(t *testing.T, what string, check func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, last)
	}
}

// watchCrashLoops polls ns's pods until the test ends and returns, when
// called, the containers it saw waiting in CrashLoopBackOff.
func watchCrashLoops(t *testing.T, ns string) func() []string {
	ctx, cancel := context.WithCancel(context.Background())
	seen := make(chan []string, 1)
	go func() {
		var loops []string
		defer func() { seen <- loops }()
		for ctx.Err() == nil {
			list, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, p := range list.Items {
					for _, s := range p.Status.ContainerStatuses {
						if s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff" {
							loops = append(loops, p.Name+"/"+s.Name)
						}
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	var once []string
	var got bool
	t.Cleanup(cancel)
	return func() []string {
		if !got {
			cancel()
			once, got = <-seen, true
		}
		return once
	}
}
