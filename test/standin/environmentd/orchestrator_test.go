package environmentd

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/materializeinc/orchestratord/test/standin/clap"
)

// The clusterd StatefulSets are OnDelete, so environmentd syncs their pods
// itself at each EnsureReplica: a pod of the current template gets the
// template's annotations applied, one of an older template is deleted
// (its StatefulSet makes it anew), a missing one is left to the
// StatefulSet.
func TestEnsureReplicaSyncsItsPods(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	o := &Orchestrator{Kube: kube, Namespace: "ns", Prefix: "mzx-", Args: &clap.Matches{Values: map[string][]string{
		"cluster-replica-sizes": {`{"two":{"scale":2,"workers":1,"credits_per_hour":"1","disk_limit":"0","memory_limit":"64MiB"}}`},
		"clusterd-image":        {"materialize/clusterd:v26.35.0"}}}}
	r := Replica{ClusterID: "u1", ClusterName: "quickstart", ReplicaID: "u1", ReplicaName: "r1", Size: "two", Role: "user"}
	const name = "mzx-cluster-u1-replica-u1-gen-2"
	if err := o.EnsureReplica(ctx, r, 2); err != nil {
		t.Fatal(err)
	}
	sts, err := kube.AppsV1().StatefulSets("ns").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hash := sts.Spec.Template.Annotations[podTemplateHashAnnotation]
	if hash == "" {
		t.Fatalf("template annotations %v lack the hash", sts.Spec.Template.Annotations)
	}
	// Pod 0 of this template, made before its annotations were; pod 1 of
	// an older one.
	for i, h := range []string{hash, "older"} {
		if _, err := kube.CoreV1().Pods("ns").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: name + "-" + string(rune('0'+i)), Namespace: "ns", Annotations: map[string]string{podTemplateHashAnnotation: h}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.EnsureReplica(ctx, r, 2); err != nil {
		t.Fatal(err)
	}
	current, err := kube.CoreV1().Pods("ns").Get(ctx, name+"-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pod of the current template: %v", err)
	}
	for k, v := range sts.Spec.Template.Annotations {
		if current.Annotations[k] != v {
			t.Errorf("pod of the current template: annotation %s = %q, want the template's %q", k, current.Annotations[k], v)
		}
	}
	if _, err := kube.CoreV1().Pods("ns").Get(ctx, name+"-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod of an older template: %v, want it deleted", err)
	}
}
