package chart

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The controllers' ClusterRole lets them write Deployments and RoleBindings
// in every namespace; the chart's ValidatingAdmissionPolicy holds their
// ServiceAccount to what a Materialize owns, and the real API server
// enforces it. Each write is a server-side dry run (admission runs, nothing
// is stored), as the controllers' ServiceAccount.
func TestControllersAdmissionPolicyRefusesWritesOutsideMaterializes(t *testing.T) {
	const release, tenant, unlabelled = "vap", "vap-tenant", "vap-unlabelled"
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	for _, ns := range []string{release, tenant, unlabelled} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	applyAll(t, render(t, release, "--set", "controllers.admissionPolicy.enabled=false"))
	cfg, err := clientcmd.BuildConfigFromFlags("", serviceAccountKubeconfig(t, release, "orchestratord-controllers"))
	if err != nil {
		t.Fatal(err)
	}
	controllers := kubernetes.NewForConfigOrDie(cfg)
	dryRun := []string{metav1.DryRunAll}

	owner := func(kind, name string, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "materialize.cloud/v1alpha1", Kind: kind, Name: name,
			UID: types.UID("00000000-0000-4000-8000-00000000000" + string(rune('0'+len(name)%10))), Controller: &controller}}
	}
	podSpec := func(account string) corev1.PodSpec {
		return corev1.PodSpec{ServiceAccountName: account, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}
	}
	deploymentAs := func(ns string, owners []metav1.OwnerReference, account string) error {
		labels := map[string]string{"app": "x"}
		_, err := controllers.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns, OwnerReferences: owners},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec(account),
			}},
		}, metav1.CreateOptions{DryRun: dryRun})
		return err
	}
	deployment := func(ns string, owners []metav1.OwnerReference) error { return deploymentAs(ns, owners, "") }
	// statefulSetWith creates environmentd's StatefulSet changed by change
	// (the pod spec and the StatefulSet).
	statefulSetInWith := func(ns string, owners []metav1.OwnerReference, account string, change func(*corev1.PodSpec, *appsv1.StatefulSetSpec)) error {
		labels := map[string]string{"app": "x"}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns, OwnerReferences: owners},
			Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec(account),
			}},
		}
		change(&sts.Spec.Template.Spec, &sts.Spec)
		_, err := controllers.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{DryRun: dryRun})
		return err
	}
	statefulSetWith := func(owners []metav1.OwnerReference, account string, change func(*corev1.PodSpec, *appsv1.StatefulSetSpec)) error {
		return statefulSetInWith(tenant, owners, account, change)
	}
	statefulSetAs := func(owners []metav1.OwnerReference, account string) error {
		return statefulSetWith(owners, account, func(*corev1.PodSpec, *appsv1.StatefulSetSpec) {})
	}
	// A Deployment someone else made, to delete. (Taking over a
	// ServiceAccount, which the policy refuses too, is refused here by the
	// OwnerReferencesPermissionEnforcement plugin already: the controllers
	// cannot delete ServiceAccounts.)
	if _, err := admin.AppsV1().Deployments(tenant).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: tenant},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "y"}}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "y"}}, Spec: podSpec(""),
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const environmentdRole = "orchestratord-controllers-environmentd"
	bindingIn := func(ns string, owners []metav1.OwnerReference, subjects ...rbacv1.Subject) error {
		_, err := controllers.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns, OwnerReferences: owners},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: environmentdRole},
			Subjects:   subjects,
		}, metav1.CreateOptions{DryRun: dryRun})
		return err
	}
	binding := func(owners []metav1.OwnerReference, subjects ...rbacv1.Subject) error {
		return bindingIn(tenant, owners, subjects...)
	}
	account := func(ns, name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}
	}
	serviceAccount := func(name string) error {
		_, err := controllers.CoreV1().ServiceAccounts(tenant).Create(ctx, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant, OwnerReferences: owner("Materialize", "mz", true)},
		}, metav1.CreateOptions{DryRun: dryRun})
		return err
	}
	mz := owner("Materialize", "mz", true)
	writes := []struct {
		what  string
		write func() error
		// allowed: by the policy (RBAC allows every one of them).
		allowed, allowedWithExisting bool
	}{
		{"a Deployment a Materialize controls", func() error { return deployment(tenant, mz) }, true, true},
		{"a Deployment a Console controls", func() error { return deployment(tenant, owner("Console", "mz", true)) }, true, true},
		{"a Deployment nothing owns", func() error { return deployment(tenant, nil) }, false, false},
		// Upstream's owner references name no controller.
		{"a Deployment a Materialize owns, as upstream writes it", func() error { return deployment(tenant, owner("Materialize", "mz", false)) }, true, true},
		{"a Deployment another kind controls besides", func() error {
			return deployment(tenant, append(owner("Materialize", "mz", false), metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet",
				Name: "rs", UID: "00000000-0000-4000-8000-0000000000aa", Controller: ptr(true)}))
		}, false, false},
		{"a Deployment two Materializes own", func() error {
			return deployment(tenant, append(owner("Materialize", "mz", true), owner("Materialize", "other", false)...))
		}, false, false},
		{"a Deployment in kube-system", func() error { return deployment("kube-system", mz) }, false, false},
		// Owned by a Materialize named after the account, which need not
		// exist: the operator's own namespace is denied whatever the owner.
		{"pods as the webhook's ServiceAccount, in the operator's namespace", func() error {
			return statefulSetInWith(release, owner("Materialize", "orchestratord-webhook", true), "orchestratord-webhook",
				func(*corev1.PodSpec, *appsv1.StatefulSetSpec) {})
		}, false, false},
		{"environmentd's role bound to the controllers' own ServiceAccount, in the operator's namespace", func() error {
			return bindingIn(release, owner("Materialize", "orchestratord-controllers", true), account(release, "orchestratord-controllers"))
		}, false, false},
		{"environmentd's binding to the Materialize's own ServiceAccount", func() error { return binding(mz, account(tenant, "mz")) }, true, true},
		{"a binding to another ServiceAccount of the namespace (spec.serviceAccountName)", func() error { return binding(mz, account(tenant, "default")) }, false, true},
		{"a binding to a ServiceAccount of another namespace", func() error { return binding(mz, account(release, "mz")) }, false, false},
		{"a binding to two ServiceAccounts", func() error { return binding(mz, account(tenant, "mz"), account(tenant, "default")) }, false, false},
		{"a binding a Balancer controls", func() error { return binding(owner("Balancer", "mz", true), account(tenant, "mz")) }, false, false},
		{"a binding nothing owns", func() error { return binding(nil, account(tenant, "mz")) }, false, false},
		{"the Materialize's own ServiceAccount", func() error { return serviceAccount("mz") }, true, true},
		{"balancerd's pods as another ServiceAccount", func() error { return deploymentAs(tenant, owner("Balancer", "mz", true), "privileged") }, false, false},
		{"environmentd's pods as the Materialize's own ServiceAccount", func() error { return statefulSetAs(mz, "mz") }, true, true},
		{"environmentd's pods as another ServiceAccount (spec.serviceAccountName)", func() error { return statefulSetAs(mz, "privileged") }, false, true},
		// Whatever owner a reference names (the policy cannot see it
		// exists), no pod reaches into its node.
		{"a privileged container", func() error {
			return statefulSetWith(mz, "mz", func(s *corev1.PodSpec, _ *appsv1.StatefulSetSpec) {
				s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
			})
		}, false, false},
		{"an init container adding a capability", func() error {
			return statefulSetWith(mz, "mz", func(s *corev1.PodSpec, _ *appsv1.StatefulSetSpec) {
				s.InitContainers = []corev1.Container{{Name: "i", Image: "busybox", SecurityContext: &corev1.SecurityContext{
					Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}}}
			})
		}, false, false},
		{"a hostPath volume", func() error {
			return statefulSetWith(mz, "mz", func(s *corev1.PodSpec, _ *appsv1.StatefulSetSpec) {
				s.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			})
		}, false, false},
		{"the node's network", func() error {
			return statefulSetWith(mz, "mz", func(s *corev1.PodSpec, _ *appsv1.StatefulSetSpec) { s.HostNetwork = true })
		}, false, false},
		{"a host port", func() error {
			return statefulSetWith(mz, "mz", func(s *corev1.PodSpec, _ *appsv1.StatefulSetSpec) {
				s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
			})
		}, false, false},
		{"a claim bound to a chosen PersistentVolume", func() error {
			return statefulSetWith(mz, "mz", func(_ *corev1.PodSpec, sts *appsv1.StatefulSetSpec) {
				sts.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "a-local-volume", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}
			})
		}, false, false},
		{"dropping every capability, as the operator's pods do", func() error {
			return statefulSetWith(mz, "mz", func(s *corev1.PodSpec, _ *appsv1.StatefulSetSpec) {
				s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
			})
		}, true, true},
		{"deleting a Deployment nothing owns", func() error {
			return controllers.AppsV1().Deployments(tenant).Delete(ctx, "theirs", metav1.DeleteOptions{DryRun: dryRun})
		}, false, false},
		{"a ServiceAccount named otherwise", func() error { return serviceAccount("other") }, false, false},
	}
	find := func(what string) (found struct {
		what  string
		write func() error
		// allowed: by the policy (RBAC allows every one of them).
		allowed, allowedWithExisting bool
	}) {
		for _, w := range writes {
			if w.what == what {
				return w
			}
		}
		t.Fatalf("no write %q", what)
		return found
	}
	// Without the policy RBAC lets the controllers make every one of them.
	for _, w := range writes {
		if err := w.write(); err != nil {
			t.Fatalf("without the policy, %s: %v (RBAC should allow it)", w.what, err)
		}
	}

	refusedByPolicy := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
	}
	for _, allowExisting := range []bool{false, true} {
		applyAll(t, render(t, release, "--set", "controllers.admissionPolicy.allowExistingServiceAccounts="+map[bool]string{true: "true", false: "false"}[allowExisting]))
		// The API server loads a policy within a second or so.
		probe := find("a Deployment nothing owns")
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return refusedByPolicy(probe.write()), nil
		}); err != nil {
			t.Fatalf("the policy never refused %s", probe.what)
		}
		if allowExisting {
			w := find("a binding to another ServiceAccount of the namespace (spec.serviceAccountName)")
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return w.write() == nil, nil
			}); err != nil {
				t.Fatalf("with allowExistingServiceAccounts the policy still refuses %s", w.what)
			}
		}
		for _, w := range writes {
			want := w.allowed
			if allowExisting {
				want = w.allowedWithExisting
			}
			err := w.write()
			switch {
			case want && err != nil:
				t.Errorf("allowExistingServiceAccounts=%v: %s refused: %v", allowExisting, w.what, err)
			case !want && !refusedByPolicy(err):
				t.Errorf("allowExistingServiceAccounts=%v: %s not refused by the policy: %v", allowExisting, w.what, err)
			case !want:
				t.Logf("refused: %s: %v", w.what, err)
			}
		}
	}

	// namespaceLabels: only namespaces so labelled take the controllers'
	// writes, whatever owner they name.
	if _, err := admin.CoreV1().Namespaces().Patch(ctx, tenant, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"materialize.cloud/environments":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	applyAll(t, render(t, release, "--set-json", `controllers.admissionPolicy.namespaceLabels={"materialize.cloud/environments":"true"}`))
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = deployment(unlabelled, mz)
		return refusedByPolicy(last), nil
	}); err != nil {
		t.Fatalf("namespaceLabels: a Deployment a Materialize controls in an unlabelled namespace: %v", last)
	}
	if !strings.Contains(last.Error(), "controllers.admissionPolicy.namespaceLabels") {
		t.Errorf("the refusal does not name the value to change: %v", last)
	}
	for _, what := range []string{"a Deployment a Materialize controls", "environmentd's pods as the Materialize's own ServiceAccount", "the Materialize's own ServiceAccount"} {
		if err := find(what).write(); err != nil {
			t.Errorf("namespaceLabels: %s in the labelled namespace refused: %v", what, err)
		}
	}
	if err := find("a Deployment nothing owns").write(); !refusedByPolicy(err) {
		t.Errorf("namespaceLabels: the other rules no longer hold: %v", err)
	}
}

// --allow-existing-service-accounts is off only under the policy: it is
// what holds environmentd to the account the operator makes, by its name.
// Without the policy the controllers use an existing account as upstream
// does, and never take one over.
func TestExistingServiceAccountsFollowThePolicy(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   bool
	}{
		{nil, false},
		{[]string{"--set", "controllers.admissionPolicy.allowExistingServiceAccounts=true"}, true},
		{[]string{"--set", "controllers.admissionPolicy.enabled=false"}, true},
	} {
		if got := slices.Contains(controllersArgs(t, c.values...), "--allow-existing-service-accounts"); got != c.want {
			t.Errorf("%v: --allow-existing-service-accounts passed %v, want %v", c.values, got, c.want)
		}
	}
}
