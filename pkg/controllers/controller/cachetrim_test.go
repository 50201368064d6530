package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	mzac "github.com/materializeinc/orchestratord/pkg/client/applyconfiguration/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
)

func TestTrimForCacheKeepsOnlyThisOperatorsManagedFields(t *testing.T) {
	// A kind the operator does not cache as a stub or with a digest.
	d := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d", ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"},
		{Manager: apply.FieldManager, Operation: metav1.ManagedFieldsOperationApply},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate},
		{Manager: apply.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate},
		{Manager: apply.FieldManager, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status"},
	}}}
	out, err := TrimForCache(d)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod).ManagedFields
	if len(got) != 2 || got[0].Operation != metav1.ManagedFieldsOperationApply || got[1].Operation != metav1.ManagedFieldsOperationUpdate {
		t.Errorf("kept %v, want this operator's apply and update entries of the main resource only", got)
	}
	for _, e := range got {
		if e.Manager != apply.FieldManager {
			t.Errorf("kept %s's entry", e.Manager)
		}
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/d", Obj: d}
	if out, err := TrimForCache(tombstone); err != nil || out != any(tombstone) {
		t.Errorf("a tombstone must pass through unchanged: %v, %v", out, err)
	}
}

// owned is a managedFields entry of this operator's apply owning fields.
func owned(fieldsV1 string) []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{
		{Manager: apply.FieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(fieldsV1)}},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:x":{}}}}`)}},
	}
}

// A cached child is a stub whose digest is what the no-op check computes
// for the apply configuration that wrote it, and which keeps the fields the
// reconcilers read.
func TestTrimForCacheStubsChildren(t *testing.T) {
	meta := func(fieldsV1 string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: "c", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 3,
			Labels:          map[string]string{"materialize.cloud/mz-resource-id": "r"},
			Annotations:     map[string]string{"x": "by someone else"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "materialize.cloud/v1alpha1", Kind: "Materialize", Name: "mz", UID: "o"}},
			ManagedFields:   owned(fieldsV1),
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: meta(`{"f:data":{"f:a":{}}}`), Data: map[string]string{"a": "1", "b": "not ours"}}
	out, err := TrimForCache(cm)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*Stub)
	if got.GetManagedFields() != nil || got.GetAnnotations() != nil || got.GetLabels() != nil {
		t.Errorf("the stub kept managedFields, annotations or labels: %+v", got)
	}
	rebuilt := got.meta()
	wantMeta := metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 3,
		OwnerReferences: cm.OwnerReferences, Annotations: rebuilt.Annotations}
	if !equality.Semantic.DeepEqual(rebuilt, wantMeta) || len(rebuilt.Annotations) != 1 {
		t.Errorf("the stub lost metadata the reconcilers read, or kept labels or other annotations: %+v", rebuilt)
	}
	same, err := apply.Digest(corev1ac.ConfigMap("c", "ns").WithData(map[string]string{"a": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	changed, err := apply.Digest(corev1ac.ConfigMap("c", "ns").WithData(map[string]string{"a": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	if digest := got.meta().Annotations[apply.OwnedDigestAnnotation]; digest != same || digest == changed {
		t.Errorf("digest %q: want the apply configuration's %q (and not the changed one's %q)", digest, same, changed)
	}
	// Informers may transform what they hold again: a stub stays as it is.
	if again, err := TrimForCache(got); err != nil || again != any(got) {
		t.Errorf("a stub transformed again: %+v, %v", again, err)
	}
	// An object from the API server with the annotation written on it is
	// not a stub: it has managedFields.
	forged := cm.DeepCopy()
	forged.Annotations = map[string]string{apply.OwnedDigestAnnotation: same}
	forged.Data = map[string]string{"a": "changed"}
	out, err = TrimForCache(forged)
	if err != nil {
		t.Fatal(err)
	}
	if digest := out.(*Stub).meta().Annotations[apply.OwnedDigestAnnotation]; digest == same {
		t.Errorf("a forged digest annotation was trusted")
	}

	replicas := int32(2)
	d := &appsv1.Deployment{
		ObjectMeta: meta(`{"f:spec":{"f:replicas":{}}}`),
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}},
		Status: appsv1.DeploymentStatus{AvailableReplicas: 2, ObservedGeneration: 3, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "ok",
				LastUpdateTime: metav1.Now()},
		}},
	}
	// Readiness reads the Available condition's status, reason and message.
	available := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "ok"}
	out, err = TrimForCache(d)
	if err != nil {
		t.Fatal(err)
	}
	gotD := out.(*Stub).kept.(*deploymentFields).deployment(metav1.ObjectMeta{})
	if *gotD.Spec.Replicas != 2 || !equality.Semantic.DeepEqual(gotD.Spec.Selector, d.Spec.Selector) ||
		gotD.Status.AvailableReplicas != 2 || gotD.Status.ObservedGeneration != 3 ||
		len(gotD.Status.Conditions) != 1 || gotD.Status.Conditions[0] != available {
		t.Errorf("Deployment stub: %+v, status %+v", gotD.Spec, gotD.Status)
	}
	// A selector with expressions is kept as it is.
	d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpExists}}
	out, err = TrimForCache(d)
	if err != nil {
		t.Fatal(err)
	}
	if gotD := out.(*Stub).kept.(*deploymentFields).deployment(metav1.ObjectMeta{}); !equality.Semantic.DeepEqual(gotD.Spec.Selector, d.Spec.Selector) {
		t.Errorf("Deployment stub's selector: %+v", gotD.Spec.Selector)
	}

	sts := &appsv1.StatefulSet{ObjectMeta: meta(`{"f:spec":{"f:replicas":{}}}`), Status: appsv1.StatefulSetStatus{ReadyReplicas: 1, UpdateRevision: "r2"}}
	out, err = TrimForCache(sts)
	if err != nil {
		t.Fatal(err)
	}
	if s := out.(*Stub).kept.(*appsv1.StatefulSetStatus); s.ReadyReplicas != 1 || s.UpdateRevision != "r2" {
		t.Errorf("StatefulSet stub: %+v", s)
	}

	svc := &corev1.Service{ObjectMeta: meta(`{"f:spec":{"f:clusterIP":{}}}`), Spec: corev1.ServiceSpec{ClusterIP: "None", Ports: []corev1.ServicePort{{Port: 1}}}}
	out, err = TrimForCache(svc)
	if err != nil {
		t.Fatal(err)
	}
	if s := out.(*Stub); s.kept != clusterIP("None") {
		t.Errorf("Service stub: %+v", s)
	}

	// NetworkPolicies are listed by the resource id label: their stubs keep
	// it, and only it.
	np := &networkingv1.NetworkPolicy{ObjectMeta: meta(`{"f:spec":{"f:podSelector":{}}}`)}
	np.Labels["other"] = "x"
	out, err = TrimForCache(np)
	if err != nil {
		t.Fatal(err)
	}
	if p := out.(*Stub); len(p.GetLabels()) != 1 || p.GetLabels()["materialize.cloud/mz-resource-id"] != "r" {
		t.Errorf("NetworkPolicy stub: %+v", p)
	}
	out.(*Stub).SetLabels(map[string]string{"other": "x"})
	if p := out.(*Stub); p.GetLabels() != nil {
		t.Errorf("labels without the resource id set on a NetworkPolicy stub: %v", p.GetLabels())
	}

	// Owned fields that cannot be extracted: the object is kept whole
	// (but for other managers' entries) and the no-op check extracts again.
	bad := &corev1.ConfigMap{ObjectMeta: meta(`{"f:data":`), Data: map[string]string{"a": "1"}}
	out, err = TrimForCache(bad)
	if err != nil {
		t.Fatal(err)
	}
	if b := out.(*corev1.ConfigMap); b.Data["a"] != "1" || len(b.ManagedFields) != 1 || b.Annotations[apply.OwnedDigestAnnotation] != "" {
		t.Errorf("an unextractable child must be kept whole: %+v", b)
	}
}

// A Materialize is kept whole without managedFields.
func TestTrimForCacheKeepsMaterializesWhole(t *testing.T) {
	mz := &v1alpha1.Materialize{ObjectMeta: metav1.ObjectMeta{Name: "m", ManagedFields: owned(`{"f:spec":{}}`)},
		Spec: v1alpha1.MaterializeSpec{EnvironmentdImageRef: "e"}}
	out, err := TrimForCache(mz)
	if err != nil {
		t.Fatal(err)
	}
	if m := out.(*v1alpha1.Materialize); m.ManagedFields != nil || m.Spec.EnvironmentdImageRef != "e" {
		t.Errorf("Materialize in the cache: %+v", m)
	}
	// A digest annotation written on it must not pass for a stub's: its
	// status check would compare with it.
	forged := &v1alpha1.Materialize{ObjectMeta: metav1.ObjectMeta{Name: "m",
		Annotations: map[string]string{apply.OwnedDigestAnnotation: "forged", "user": "kept"}}}
	out, err = TrimForCache(forged)
	if err != nil {
		t.Fatal(err)
	}
	if _, stub := apply.CachedDigest(out); stub || out.(*v1alpha1.Materialize).Annotations["user"] != "kept" {
		t.Errorf("forged digest on a Materialize: %+v", out.(*v1alpha1.Materialize).Annotations)
	}
}

// A Balancer (or Console, through the same code) is kept whole but for
// its labels, creation time and managedFields, whose place the digest of
// this operator's fields takes: the materialize reconciler's no-op check
// compares it with the apply configuration's.
func TestTrimForCacheDigestsBalancers(t *testing.T) {
	replicas := int32(2)
	b := &v1alpha1.Balancer{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", CreationTimestamp: metav1.Now(),
			Labels:        map[string]string{"app": "balancerd"},
			Annotations:   map[string]string{"user": "kept", apply.OwnedDigestAnnotation: "forged"},
			ManagedFields: owned(`{"f:spec":{"f:balancerdImageRef":{}}}`)},
		Spec:   v1alpha1.BalancerSpec{BalancerdImageRef: "i", Replicas: &replicas},
		Status: v1alpha1.ComponentStatus{ResourceID: "r"},
	}
	out, err := TrimForCache(b)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*v1alpha1.Balancer)
	if got.ManagedFields != nil || got.Spec.BalancerdImageRef != "i" || *got.Spec.Replicas != 2 || got.Status.ResourceID != "r" ||
		got.Annotations["user"] != "kept" || got.Labels != nil {
		t.Errorf("cached Balancer: %+v", got)
	}
	same, err := apply.Digest(mzac.Balancer("b", "ns").WithSpec(mzac.BalancerSpec().WithBalancerdImageRef("i")))
	if err != nil {
		t.Fatal(err)
	}
	if digest, ok := apply.CachedDigest(got); !ok || digest != same {
		t.Errorf("cached Balancer's digest %q (%v), want %q (only the fields this operator owns)", digest, ok, same)
	}

	// Informers may transform what they hold again: it stays as it is.
	if again, err := TrimForCache(got); err != nil || again != any(got) {
		t.Errorf("a cached Balancer transformed again: %+v, %v", again, err)
	}
	if digest, ok := apply.CachedDigest(got); !ok || digest != same {
		t.Errorf("a cached Balancer transformed again has the digest %q (%v), want %q", digest, ok, same)
	}

	// Owned fields that cannot be extracted: this operator's entries kept.
	bad := &v1alpha1.Balancer{ObjectMeta: metav1.ObjectMeta{Name: "b", ManagedFields: owned(`{"f:spec":`)}}
	out, err = TrimForCache(bad)
	if err != nil {
		t.Fatal(err)
	}
	if kept := out.(*v1alpha1.Balancer); len(kept.ManagedFields) != 1 || kept.ManagedFields[0].Manager != apply.FieldManager {
		t.Errorf("an unextractable Balancer must keep this operator's entries: %+v", kept.ManagedFields)
	}
	if _, ok := apply.CachedDigest(out); ok {
		t.Error("an unextractable Balancer has a digest")
	}
}
