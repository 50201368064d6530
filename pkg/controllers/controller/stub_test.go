package controller

import (
	"context"
	"crypto/sha256"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	mzfake "github.com/materializeinc/orchestratord/pkg/client/clientset/versioned/fake"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
)

// The listers give the reconcilers the typed objects they read, rebuilt
// from the cached stubs: the fields they read, and the digest the no-op
// check compares.
func TestListersRebuildTheTypedObjectsFromStubs(t *testing.T) {
	meta := func(name, fieldsV1 string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID("u-" + name), ResourceVersion: "7", Generation: 3,
			Labels:          map[string]string{children.ResourceIDLabel: "r"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "materialize.cloud/v1alpha1", Kind: "Materialize", Name: "mz", UID: "o"}},
			ManagedFields:   owned(fieldsV1),
		}
	}
	replicas := int32(2)
	dep := &appsv1.Deployment{
		ObjectMeta: meta("d", `{"f:spec":{"f:replicas":{}}}`),
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}},
		Status: appsv1.DeploymentStatus{Replicas: 2, AvailableReplicas: 2, ObservedGeneration: 3, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
		}},
	}
	inRange := &networkingv1.NetworkPolicy{ObjectMeta: meta("in", `{"f:spec":{}}`)}
	other := &networkingv1.NetworkPolicy{ObjectMeta: meta("other", `{"f:spec":{}}`)}
	other.Labels[children.ResourceIDLabel] = "s"
	// Owned fields that cannot be extracted: kept whole.
	whole := &corev1.ConfigMap{ObjectMeta: meta("whole", `{"f:data":`), Data: map[string]string{"a": "1"}}

	kubeInformers, _ := NewInformers(fake.NewClientset(dep, inRange, other, whole), mzfake.NewClientset())
	deployments := DeploymentLister(kubeInformers)
	policies := NetworkPolicyLister(kubeInformers)
	configMaps := ConfigMapLister(kubeInformers)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kubeInformers.Start(ctx.Done())
	for typ, ok := range kubeInformers.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	if _, isStub := deployments.Informer().GetStore().List()[0].(*Stub); !isStub {
		t.Fatal("the informer cached the whole Deployment, not a stub")
	}

	got, err := deployments.In("ns").Get("d")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "d" || got.UID != "u-d" || got.Generation != 3 || len(got.OwnerReferences) != 1 || got.Labels != nil ||
		*got.Spec.Replicas != 2 || got.Spec.Selector.MatchLabels["a"] != "b" || len(got.Spec.Template.Spec.Containers) != 0 ||
		got.Status.AvailableReplicas != 2 || got.Status.Conditions[0].Reason != "MinimumReplicasAvailable" {
		t.Errorf("rebuilt Deployment: %+v", got)
	}
	want, err := apply.Digest(appsv1ac.Deployment("d", "ns").WithSpec(appsv1ac.DeploymentSpec().WithReplicas(2)))
	if err != nil {
		t.Fatal(err)
	}
	if digest, isStub := apply.CachedDigest(got); !isStub || digest != want {
		t.Errorf("rebuilt Deployment's digest %q (stub %v), want %q", digest, isStub, want)
	}
	// Each read has its own annotations: a reader cannot change the cache.
	got.Annotations[apply.OwnedDigestAnnotation] = "changed"
	if again, _ := deployments.In("ns").Get("d"); again.Annotations[apply.OwnedDigestAnnotation] != want {
		t.Error("a change to a read object reached the cache")
	}

	if _, err := deployments.In("ns").Get("missing"); !apierrors.IsNotFound(err) {
		t.Errorf("a missing child: %v, want NotFound", err)
	}
	if _, err := deployments.In("elsewhere").Get("d"); !apierrors.IsNotFound(err) {
		t.Errorf("another namespace's child: %v, want NotFound", err)
	}

	// No kind keeps the namespace index (a set of every key, per
	// namespace); a kind is still listed by namespace, by a scan.
	for kind, inf := range map[string]cache.SharedIndexInformer{
		"Deployments":     deployments.Informer(),
		"NetworkPolicies": policies.Informer(),
	} {
		if _, indexed := inf.GetIndexer().GetIndexers()[cache.NamespaceIndex]; indexed {
			t.Errorf("the %s' informer keeps the namespace index", kind)
		}
	}
	if all, err := deployments.In("ns").List(labels.Everything()); err != nil || len(all) != 1 || all[0].Name != "d" {
		t.Errorf("Deployments in ns: %v, %v", all, err)
	}
	if none, err := deployments.In("elsewhere").List(labels.Everything()); err != nil || len(none) != 0 {
		t.Errorf("Deployments in another namespace: %v, %v", none, err)
	}

	// NetworkPolicies are found by resource id from an index (no scan of
	// the namespace's): a stub's label, in its namespace only.
	listed, err := policies.In("ns").WithResourceID("r")
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Name != "in" {
		t.Errorf("NetworkPolicies of resource id r: %v", listed)
	}
	if elsewhere, err := policies.In("elsewhere").WithResourceID("r"); err != nil || len(elsewhere) != 0 {
		t.Errorf("NetworkPolicies of resource id r in another namespace: %v, %v", elsewhere, err)
	}

	w, err := configMaps.In("ns").Get("whole")
	if err != nil {
		t.Fatal(err)
	}
	if w.Data["a"] != "1" || len(w.ManagedFields) != 1 {
		t.Errorf("a child kept whole must be read whole: %+v", w)
	}
	if _, isStub := apply.CachedDigest(w); isStub {
		t.Error("a child kept whole read as a stub")
	}
}

// The informers' event handlers find a stub's owner as a typed object's.
func TestStubsAreObjects(t *testing.T) {
	controller := true
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "materialize.cloud/v1alpha1", Kind: "Materialize", Name: "mz", UID: "o", Controller: &controller},
		{APIVersion: "v1", Kind: "Other", Name: "x", UID: "p"},
	}}}
	s, err := newStub(cm, strings.Repeat("00", sha256.Size), nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := cache.MetaNamespaceKeyFunc(s)
	if err != nil || key != "ns/d" {
		t.Errorf("key %q, %v", key, err)
	}
	var obj any = s
	o, ok := obj.(metav1.Object)
	if !ok {
		t.Fatal("a stub is not a metav1.Object")
	}
	if !equality.Semantic.DeepEqual(o.GetOwnerReferences(), cm.OwnerReferences) {
		t.Errorf("owner references %+v, want %+v", o.GetOwnerReferences(), cm.OwnerReferences)
	}
	// Each read has its own: a reader cannot change the stub's.
	*o.GetOwnerReferences()[0].Controller = false
	if ref := metav1.GetControllerOfNoCopy(o); ref == nil || ref.Name != "mz" {
		t.Errorf("controller %+v after a reader changed its copy", ref)
	}
	// Children of one owner share its interned reference.
	other, err := newStub(cm, strings.Repeat("00", sha256.Size), nil)
	if err != nil {
		t.Fatal(err)
	}
	if other.owners[0] != s.owners[0] {
		t.Error("two children of one owner do not share its reference")
	}
	if _, err := newStub(cm, "not hex", nil); err == nil {
		t.Error("a digest that is not a hex SHA-256 made a stub")
	}
}
