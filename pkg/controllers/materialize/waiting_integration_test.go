package materialize_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/certificates"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
	"github.com/materializeinc/orchestratord/test/fixture"
)

// A pod as the kubelet and scheduler would report it (no kubelet runs here).
func makePod(t *testing.T, kube kubernetes.Interface, ns, name string, labels map[string]string, status corev1.PodStatus) {
	t.Helper()
	ctx := context.Background()
	// No controller-manager makes the namespace's default ServiceAccount.
	_, _ = kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	p, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: new(bool), ServiceAccountName: "default",
			Containers: []corev1.Container{{Name: "c", Image: "c"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = status
	if _, err := kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A rollout that waits says for what, from the generation's pods: an
// environmentd pod the scheduler cannot place; then, environmentd catching
// up, how many clusterd replica pods are Ready and why one is not (a
// crash loop with its exit code's meaning; a kubelet message of a tenant's
// making is cut to a bound). The gauge counts it by what it waits for, and
// forgets it once the rollout ends.
func TestStuckRolloutSaysWhy(t *testing.T) {
	env.SetAutoAdvance(false)
	ns := newNamespaceWithoutPods(t)
	fixture.KeepBalancersReady(t, mzClient(), ns)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	waiting := materialize.NewWaiting()
	// The gauge counts every namespace's rollouts (other tests' too):
	// this one's is read by name.
	gauge := func(kind string) float64 {
		if waiting.Of(ns, "mz") == kind {
			return 1
		}
		return 0
	}
	startController(t, func(o *materialize.Options) { o.Waiting = waiting; o.WaitingAfter = -1 })
	ctx := context.Background()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var id string
	waitFor(t, "generation 1 created", func() (bool, error) {
		id = get(t, ns, "mz").Status.ResourceID
		return id != "" && stsExists(t, ns, id, 1), nil
	})
	env.SetStatus(prefix(id, 1), mzenv.CatchingUp)

	makePod(t, kube, ns, prefix(id, 1)+"-0", map[string]string{"materialize.cloud/mz-resource-id": id,
		"materialize.cloud/name": prefix(id, 1), "materialize.cloud/app": "environmentd"},
		corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient memory."}}})
	want := "Applying changes for generation 1: waiting for its pod to be ready: environmentd generation 1 Pending: 0/1 nodes are available: 1 Insufficient memory."
	waitFor(t, "the condition naming the unschedulable pod", func() (bool, error) {
		c := upToDate(get(t, ns, "mz"))
		return c != nil && c.Message == want, nil
	})
	if g := gauge(materialize.WaitingEnvironmentdPod); g != 1 {
		t.Errorf("waiting_for=environmentd_pod %v, want 1", g)
	}

	// environmentd runs and catches up; one clusterd replica is Ready, the
	// other crash-loops, a third cannot pull its image. environmentd
	// before 26.27 (this one is 26.1) labels clusterd's pods without their
	// generation, which only their names carry: a Ready pod left from
	// generation 0 is not counted.
	fixture.KeepStatefulSetsReady(t, kube, ns)
	clusterd := func(replica string) map[string]string {
		return map[string]string{"materialize.cloud/mz-resource-id": id, "environmentd.materialize.cloud/namespace": "cluster",
			"cluster.environmentd.materialize.cloud/replica-id": replica}
	}
	name := func(replica string) string { return fmt.Sprintf("mz%s-cluster-u1-replica-%s-gen-1-0", id, replica) }
	makePod(t, kube, ns, fmt.Sprintf("mz%s-cluster-u1-replica-u1-gen-0-0", id), clusterd("u1"), corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}})
	makePod(t, kube, ns, name("u1"), clusterd("u1"), corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}})
	makePod(t, kube, ns, name("u2"), clusterd("u2"), corev1.PodStatus{Phase: corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "c", ImageID: "c", RestartCount: 3,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 166, Reason: "Error"}}}}})
	makePod(t, kube, ns, name("u3"), clusterd("u3"), corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "c", ImageID: "c",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: strings.Repeat("x", 50000)}}}}})
	want = fmt.Sprintf("Applying changes for generation 1: environmentd is Initializing (catching up: clusterd replica pods 1/3 ready; clusterd replica %s crash-looping: exit 166 (halt: DDL during catch-up, or the restart after promotion))", name("u2"))
	waitFor(t, "the condition counting clusterd's pods", func() (bool, error) {
		c := upToDate(get(t, ns, "mz"))
		return c != nil && c.Message == want, nil
	})
	if g := gauge(materialize.WaitingClusterdPods); g != 1 {
		t.Errorf("waiting_for=clusterd_pods %v, want 1", g)
	}
	// The crash-looping pod recovers: the image pull is named, cut.
	if err := kube.CoreV1().Pods(ns).Delete(ctx, name("u2"), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the condition naming the image pull, bounded", func() (bool, error) {
		c := upToDate(get(t, ns, "mz"))
		return c != nil && strings.Contains(c.Message, "1/2 ready; clusterd replica "+name("u3")+" ErrImagePull: xxx") && strings.HasSuffix(c.Message, "…(cut))") && len(c.Message) < 600, nil
	})

	env.SetStatus(prefix(id, 1), mzenv.ReadyToPromote)
	env.SetAutoAdvance(true)
	waitRolledOut(t, ns, "mz", 1)
	for _, kind := range []string{materialize.WaitingEnvironmentdPod, materialize.WaitingClusterdPods, materialize.WaitingHydration, materialize.WaitingEnvironmentd} {
		if g := gauge(kind); g != 0 {
			t.Errorf("waiting_for=%s %v after the rollout, want 0", kind, g)
		}
	}
}

// environmentd's pod waits in ContainerCreating for its cert-manager
// Certificate's Secret, which the pod's status does not say: a rollout
// waiting on a Certificate that is not Ready names it, with cert-manager's
// reason, and says nothing more once it is.
func TestRolloutWaitingForItsCertificateSaysWhich(t *testing.T) {
	env.SetAutoAdvance(false)
	t.Cleanup(func() { env.SetAutoAdvance(true) })
	ctx := context.Background()
	if err := cp.InstallCertificateCRD(ctx); err != nil {
		t.Fatal(err)
	}
	ns := newNamespaceWithoutPods(t)
	fixture.KeepBalancersReady(t, mzClient(), ns)
	startController(t, func(o *materialize.Options) { o.WaitingAfter = -1 })
	mz := newMaterialize(ns, "mz")
	mz.Spec.InternalCertificateSpec = &v1alpha1.MaterializeCertSpec{IssuerRef: &v1alpha1.CertificateIssuerRef{Name: "ca", Kind: "ClusterIssuer"}}
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var id string
	waitFor(t, "generation 1 created", func() (bool, error) {
		id = get(t, ns, "mz").Status.ResourceID
		return id != "" && stsExists(t, ns, id, 1), nil
	})
	name := "mz" + id + "-environmentd-external"
	makePod(t, kubernetes.NewForConfigOrDie(cp.Config), ns, prefix(id, 1)+"-0", map[string]string{"materialize.cloud/mz-resource-id": id,
		"materialize.cloud/name": prefix(id, 1), "materialize.cloud/app": "environmentd"},
		corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "c",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}})
	want := "waiting for its pod to be ready: environmentd generation 1 is being created; its Certificate " + name + " is not issued yet"
	waitFor(t, "the condition naming the Certificate", func() (bool, error) {
		c := upToDate(get(t, ns, "mz"))
		return c != nil && strings.HasSuffix(c.Message, want), nil
	})
	certs := dynamic.NewForConfigOrDie(cp.Config).Resource(certificates.GVR).Namespace(ns)
	setReady := func(status, reason, message string) {
		t.Helper()
		cert, err := certs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cond := map[string]any{"type": "Ready", "status": status, "reason": reason, "message": message}
		if err := unstructured.SetNestedSlice(cert.Object, []any{cond}, "status", "conditions"); err != nil {
			t.Fatal(err)
		}
		if _, err := certs.Update(ctx, cert, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setReady("False", "DoesNotExist", "Issuing certificate as Secret does not exist")
	want = "environmentd generation 1 is being created; its Certificate " + name + " is not Ready: DoesNotExist: Issuing certificate as Secret does not exist"
	waitFor(t, "the condition with cert-manager's reason", func() (bool, error) {
		c := upToDate(get(t, ns, "mz"))
		return c != nil && strings.HasSuffix(c.Message, want), nil
	})
	setReady("True", "Ready", "Certificate is up to date and has not expired")
	waitFor(t, "the condition no longer naming the Certificate", func() (bool, error) {
		c := upToDate(get(t, ns, "mz"))
		return c != nil && !strings.Contains(c.Message, "Certificate"), nil
	})
}
