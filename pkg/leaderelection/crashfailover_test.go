package leaderelection

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/leaderelection/takeover"
)

// slow durations make a takeover at expiry impossible to mistake for one
// triggered by the kubelet's report.
var slow = durations{lease: 30 * time.Second, renew: 20 * time.Second, retry: time.Second}

// holderPod creates the pod a holder runs in (never scheduled: the test
// writes its status as the kubelet would).
func holderPod(t *testing.T, namespace, name string) *corev1.Pod {
	t.Helper()
	// No controller-manager here creates the namespace's default account.
	_, err := adminClient(t).CoreV1().ServiceAccounts(namespace).Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := adminClient(t).CoreV1().Pods(namespace).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "controllers", Image: "controllers"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// reportTerminated writes the container status the kubelet writes once the
// container has exited with message in its termination message file.
func reportTerminated(t *testing.T, pod *corev1.Pod, message string) {
	t.Helper()
	p, err := adminClient(t).CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "controllers", Image: "controllers", RestartCount: 1,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: message}},
	}}
	if _, err := adminClient(t).CoreV1().Pods(pod.Namespace).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func incarnationOf(t *testing.T, pod *corev1.Pod) *takeover.Incarnation {
	t.Helper()
	path := filepath.Join(t.TempDir(), "termination-log")
	inc, err := takeover.NewIncarnation(pod.Namespace, pod.Name, string(pod.UID), path)
	if err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(written), inc.ID) {
		t.Fatalf("termination message %q (%v) does not carry the incarnation %s", written, err, inc.ID)
	}
	return inc
}

// A standby takes the Lease over as soon as the kubelet reports the
// holder's very process terminated, long before the Lease expires; a report
// about another process (an earlier container, a pod of the same name with
// another UID) changes nothing.
func TestStandbyTakesOverWhenTheKubeletReportsTheHolderTerminated(t *testing.T) {
	ns := createNamespace(t, unique("crash-failover"))
	lease := "test-crash-failover"
	pod := holderPod(t, ns, "holder")
	a := newTestCandidate(t, "holder", ns, slow)
	a.cfg.Incarnation = incarnationOf(t, pod)
	b := newTestCandidate(t, "standby", ns, slow)
	b.cfg.WatchHolderPods = true
	la, lb := newRecorder(), newRecorder()
	a.run(t, lease, la.lead)
	recv(t, la.started, "the holder to lead")
	b.run(t, lease, lb.lead)

	l := getLease(t, ns, lease)
	if inc, ok := takeover.ParseHolder(l.Annotations, "holder"); !ok || *inc != *a.cfg.Incarnation {
		t.Fatalf("lease annotation %q, want the holder's incarnation %+v", l.Annotations[takeover.HolderAnnotation], a.cfg.Incarnation)
	}
	// The holder stops reaching the API server, as a dead process does.
	a.fail.Store(true)
	lastRenewal := getLease(t, ns, lease).Spec.RenewTime.Time

	// Reports that do not prove this process dead.
	reportTerminated(t, pod, (&takeover.Incarnation{ID: "0123456789abcdef0123456789abcdef"}).TerminationMessage())
	time.Sleep(3 * slow.retry)
	if got := holder(t, ns, lease); got != "holder" {
		t.Fatalf("lease taken by %q on the report of another incarnation", got)
	}

	reportTerminated(t, pod, a.cfg.Incarnation.TerminationMessage())
	bLeads := recv(t, lb.started, "the standby to take over")
	l = getLease(t, ns, lease)
	if got := deref(l.Spec.HolderIdentity); got != "standby" {
		t.Fatalf("holder = %q, want standby", got)
	}
	if expiry := lastRenewal.Add(slow.lease); !bLeads.Before(expiry) {
		t.Errorf("standby led at %v, not before the lease expired at %v", bLeads, expiry)
	}
	t.Logf("standby leads %v after the holder's last renewal (lease %v)", bLeads.Sub(lastRenewal), slow.lease)
	if _, ok := l.Annotations[takeover.HolderAnnotation]; ok {
		t.Errorf("standby without an incarnation left annotation %q", l.Annotations[takeover.HolderAnnotation])
	}
	if n := b.logs.FilterMessage("lease of a terminated holder claimed").Len(); n != 1 {
		t.Errorf("standby logged the claim %d times, want 1", n)
	}
}

// A holder restarted in its pod (same identity, new incarnation) leads again
// at once, under a new term; the standby that saw the report of its
// predecessor's death does not take a Lease its successor holds.
func TestHolderRestartedInItsPodReclaimsUnderANewTerm(t *testing.T) {
	ns := createNamespace(t, unique("crash-restart"))
	lease := "test-crash-restart"
	pod := holderPod(t, ns, "holder")
	first := newTestCandidate(t, "holder", ns, slow)
	first.cfg.Incarnation = incarnationOf(t, pod)
	lf := newRecorder()
	first.run(t, lease, lf.lead)
	recv(t, lf.started, "the first life to lead")
	before := getLease(t, ns, lease)
	first.fail.Store(true)

	second := newTestCandidate(t, "holder", ns, slow)
	second.cfg.Incarnation = incarnationOf(t, pod)
	ls := newRecorder()
	second.run(t, lease, ls.lead)
	secondLeads := recv(t, ls.started, "the restarted holder to lead")
	if expiry := before.Spec.RenewTime.Add(slow.lease); !secondLeads.Before(expiry) {
		t.Errorf("restarted holder led at %v, not before the lease expired at %v", secondLeads, expiry)
	}
	after := getLease(t, ns, lease)
	if !after.Spec.AcquireTime.After(before.Spec.AcquireTime.Time) || deref32(after.Spec.LeaseTransitions) != deref32(before.Spec.LeaseTransitions)+1 {
		t.Errorf("restart kept the term: acquired %v -> %v, transitions %d -> %d", before.Spec.AcquireTime, after.Spec.AcquireTime,
			deref32(before.Spec.LeaseTransitions), deref32(after.Spec.LeaseTransitions))
	}
	if inc, ok := takeover.ParseHolder(after.Annotations, "holder"); !ok || *inc != *second.cfg.Incarnation {
		t.Errorf("annotation %q, want the second life's incarnation", after.Annotations[takeover.HolderAnnotation])
	}

	// Now a standby hears of the first life's death: the Lease names the
	// second, so it stays.
	b := newTestCandidate(t, "standby", ns, slow)
	b.cfg.WatchHolderPods = true
	lb := newRecorder()
	b.run(t, lease, lb.lead)
	reportTerminated(t, pod, first.cfg.Incarnation.TerminationMessage())
	time.Sleep(3 * slow.retry)
	if got := holder(t, ns, lease); got != "holder" {
		t.Errorf("holder = %q after the first life's death was reported, want the second life", got)
	}
	select {
	case <-lb.started:
		t.Error("the standby led")
	default:
	}
}

func deref32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// A process that lost its Lease and rejoins the election (the controllers
// do, in process) leads under a new term, even with its incarnation on the
// Lease: its lost term has ended, so the Lease's history must show two.
func TestRejoinAfterAFenceIsANewTerm(t *testing.T) {
	ns := createNamespace(t, unique("crash-rejoin"))
	lease := "test-crash-rejoin"
	pod := holderPod(t, ns, "holder")
	d := durations{lease: 6 * time.Second, renew: 2 * time.Second, retry: 500 * time.Millisecond}
	a := newTestCandidate(t, "holder", ns, d)
	a.cfg.Incarnation = incarnationOf(t, pod)
	first := newRecorder()
	r := a.run(t, lease, first.lead)
	recv(t, first.started, "the first term to lead")
	before := getLease(t, ns, lease)

	a.fail.Store(true)
	if err := r.wait(t); !errors.Is(err, ErrLeadershipLost) {
		t.Fatalf("Run = %v, want ErrLeadershipLost", err)
	}
	a.fail.Store(false)
	second := newRecorder()
	a.run(t, lease, second.lead)
	recv(t, second.started, "the rejoined term to lead")
	after := getLease(t, ns, lease)
	if deref(after.Spec.HolderIdentity) != "holder" {
		t.Fatalf("holder = %q, want the rejoined process", deref(after.Spec.HolderIdentity))
	}
	if !after.Spec.AcquireTime.After(before.Spec.AcquireTime.Time) || deref32(after.Spec.LeaseTransitions) != deref32(before.Spec.LeaseTransitions)+1 {
		t.Errorf("the rejoin carried the lost term on: acquired %v -> %v, transitions %d -> %d", before.Spec.AcquireTime, after.Spec.AcquireTime,
			deref32(before.Spec.LeaseTransitions), deref32(after.Spec.LeaseTransitions))
	}
}
