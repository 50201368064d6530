// Package nodeupgradetest builds, on a real API server, what the node
// rollout triggers (pkg/nodeupgrade) look at: Nodes, environments (a
// namespace holding a Materialize whose last rollout completed) and their
// pods, labelled as upstream labels them.
package nodeupgradetest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/nodeupgrade"
)

// Settled is the requestRollout of every Materialize made here, recorded
// as completed: no rollout is in progress.
const Settled = "0b8f0e6f-6f35-4e8c-9d7e-2a3a3c4c1f10"

// World makes and reads the objects; every failure fails the test.
type World struct {
	t    testing.TB
	Kube kubernetes.Interface
	MZ   versioned.Interface
}

// New is a World on the API server cfg reaches.
func New(t testing.TB, cfg *rest.Config) *World {
	return &World{t: t, Kube: kubernetes.NewForConfigOrDie(cfg), MZ: versioned.NewForConfigOrDie(cfg)}
}

// Node creates a Node.
func (w *World) Node(name string, labels map[string]string, spec corev1.NodeSpec) {
	w.t.Helper()
	if _, err := w.Kube.CoreV1().Nodes().Create(context.Background(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// Namespace creates a namespace named name, or generated from prefix when
// name is empty, with its default ServiceAccount (no controller manager
// makes it), and returns its name.
func (w *World) Namespace(name, prefix string) string {
	w.t.Helper()
	ctx := context.Background()
	ns, err := w.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.Kube.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	return ns.Name
}

// Materialize creates a Materialize whose last rollout (Settled) has
// completed.
func (w *World) Materialize(ns, name string) *v1alpha1.Materialize {
	w.t.Helper()
	created, err := w.MZ.MaterializeV1alpha1().Materializes(ns).Create(context.Background(), &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.MaterializeSpec{EnvironmentdImageRef: "materialize/environmentd:v26.1.0", BackendSecretName: "backend",
			RequestRollout: Settled},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return w.CompleteRollout(created)
}

// Environment creates namespace ns holding a settled Materialize "mz".
func (w *World) Environment(ns string) string {
	w.t.Helper()
	ns = w.Namespace(ns, "")
	w.Materialize(ns, "mz")
	return ns
}

// CompleteRollout records m's requested rollout as completed, as the
// materialize reconciler would once it had run.
func (w *World) CompleteRollout(m *v1alpha1.Materialize) *v1alpha1.Materialize {
	w.t.Helper()
	m.Status.LastCompletedRolloutRequest = m.Spec.RequestRollout
	out, err := w.MZ.MaterializeV1alpha1().Materializes(m.Namespace).UpdateStatus(context.Background(), m, metav1.UpdateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// Pod binds a pod of app (environmentd, clusterd, balancerd) of the
// namespace's Materialize "mz" to node, labelled as upstream labels them.
func (w *World) Pod(ns, name, app, node string) {
	w.t.Helper()
	if _, err := w.Kube.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"app.kubernetes.io/name": app, "materialize.cloud/organization-name": "mz", "materialize.cloud/organization-namespace": ns}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: app, Image: app}}},
	}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// Get reads the Materialize "mz" of namespace ns.
func (w *World) Get(ns string) *v1alpha1.Materialize {
	w.t.Helper()
	m, err := w.MZ.MaterializeV1alpha1().Materializes(ns).Get(context.Background(), "mz", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return m
}

// ForceRollout is the force-rollout annotation of namespace ns's
// Materialize "mz" (empty when never triggered).
func (w *World) ForceRollout(ns string) string {
	return w.Get(ns).Annotations[nodeupgrade.ForceRolloutAnnotation]
}
