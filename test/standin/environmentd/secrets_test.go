package environmentd

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// The leader deletes the Secrets of user items its catalog no longer has,
// keeps those of items it has and those with ids it has not allocated (a
// newer generation's), and leaves Secrets that are not its own alone.
func TestCleanupOrphanedSecrets(t *testing.T) {
	ctx := context.Background()
	var objs []runtime.Object
	for _, name := range []string{"mzx-user-managed-u1", "mzx-user-managed-u2", "mzx-user-managed-u9",
		"mzx-user-managed-s1", "user-managed-u2", "mzx-tls"} {
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}})
	}
	kube := fake.NewClientset(objs...)
	catalog := &MemoryCatalog{}
	catalog.DDL()
	catalog.DDL()
	catalog.DDL() // u1, u2, u3
	catalog.Drop(2)
	p := &Process{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Catalog: catalog,
		Orchestrator: &Orchestrator{Kube: kube, Namespace: "ns", Prefix: "mzx-"}}
	p.cleanupOrphanedSecrets(ctx)

	list, err := kube.CoreV1().Secrets("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, s := range list.Items {
		left = append(left, s.Name)
	}
	slices.Sort(left)
	want := []string{"mzx-tls", "mzx-user-managed-s1", "mzx-user-managed-u1", "mzx-user-managed-u9", "user-managed-u2"}
	if !slices.Equal(left, want) {
		t.Errorf("Secrets left %q, want %q", left, want)
	}
}
