package balancer

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/util/retry"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/certificates"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/component"
	"github.com/materializeinc/orchestratord/pkg/controllers/recent"
	"github.com/materializeinc/orchestratord/pkg/controllers/unreadable"
	"github.com/materializeinc/orchestratord/test/controllertest"
	"github.com/materializeinc/orchestratord/test/upstream"
)

// balancers is how the helpers of controllertest reach Balancers.
var balancers = controllertest.Kind[*v1alpha1.Balancer]{
	Client: func(t *testing.T, namespace string) controllertest.CRClient[*v1alpha1.Balancer] {
		return controllertest.Admin(t).MZ.MaterializeV1alpha1().Balancers(namespace)
	},
	Status: func(b *v1alpha1.Balancer) v1alpha1.ComponentStatus { return b.Status },
}

func newBalancer(t *testing.T, namespace, name string, mutate func(*v1alpha1.Balancer)) *v1alpha1.Balancer {
	t.Helper()
	b := &v1alpha1.Balancer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.BalancerSpec{
			BalancerdImageRef: "materialize/balancerd:v1",
			StaticRouting: &v1alpha1.StaticRoutingConfig{
				EnvironmentdNamespace: "envs", EnvironmentdServiceName: "mzabc-environmentd",
			},
		},
	}
	if mutate != nil {
		mutate(b)
	}
	return balancers.Create(t, b)
}

func TestChildrenAndReady(t *testing.T) {
	ctrl := startController(t)
	ns := controllertest.NewNamespace(t)
	b := newBalancer(t, ns, "b", func(b *v1alpha1.Balancer) {
		b.Spec.ResourceRequirements = &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("1024Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}
	})
	id := balancers.WaitResourceID(t, ns, "b")
	if !regexp.MustCompile(`^[a-z0-9]{10}$`).MatchString(id) {
		t.Fatalf("generated resourceId %q is not 10 characters of [a-z0-9]", id)
	}
	name := "mz" + id + "-balancerd"
	want := map[string]string{
		"materialize.cloud/organization-name": "b", "materialize.cloud/organization-namespace": ns,
		children.ResourceIDLabel: id, "materialize.cloud/app": "balancerd",
		"app.kubernetes.io/managed-by": "materialize-operator", "app.kubernetes.io/part-of": "materialize",
		"app.kubernetes.io/name": "balancerd", "app": "balancerd",
	}

	d := controllertest.WaitDeployment(t, ns, name)
	controllertest.CheckLabels(t, "Deployment", d.Labels, want)
	controllertest.CheckOwner(t, "Deployment", d, "Balancer", "b", b.UID)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want the default 2", d.Spec.Replicas)
	}
	if got := d.Spec.Selector.MatchLabels; got["materialize.cloud/name"] != name || got["app"] != "balancerd" || got[children.ResourceIDLabel] != id || len(got) != 6 {
		t.Errorf("selector %v, want upstream's: default labels, materialize.cloud/name, app", got)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "materialize/balancerd:v1" || c.Resources.Requests.Cpu().String() != "100m" || c.Resources.Limits.Memory().String() != "1Gi" {
		t.Errorf("container image %s resources %+v", c.Image, c.Resources)
	}

	s := controllertest.WaitService(t, ns, name)
	controllertest.CheckLabels(t, "Service", s.Labels, want)
	controllertest.CheckOwner(t, "Service", s, "Balancer", "b", b.UID)
	if s.Spec.ClusterIP != corev1.ClusterIPNone || len(s.Spec.Ports) != 2 || s.Spec.Selector["materialize.cloud/name"] != name {
		t.Errorf("service %+v, want upstream's headless Service with http and pgwire", s.Spec)
	}

	balancers.ReadyFollowsDeployment(t, ctrl, ns, "b", name, corev1.ConditionFalse, "MinimumReplicasUnavailable")
}

// A new Balancer's first Ready waits for its Deployment, up to QuietFor:
// one status write for Ready in a first rollout, as the Deployment becomes
// available.
func TestFirstReadyIsQuiet(t *testing.T) {
	const quiet = 10 * time.Second
	ctrl := startConfigured(t, func(cfg *Config) { cfg.QuietFor = quiet })
	ns := controllertest.NewNamespace(t)
	balancers.FirstReadyIsQuiet(t, ctrl, quiet, ns,
		func(name string) *v1alpha1.Balancer { return newBalancer(t, ns, name, nil) },
		func(id string) string { return "mz" + id + "-balancerd" })
}

// A Balancer's Deployment and Service made by upstream orchestratord are
// taken over in place: the Deployment's spec is what this operator would
// write (its generation does not move, so no pod restarts), and the field
// manager is the same, so upstream's field sets become this operator's.
func TestAdoptsUpstreamObjects(t *testing.T) {
	ns := controllertest.NewNamespace(t)
	ac := controllertest.Admin(t)
	ctx := context.Background()
	b := newBalancer(t, ns, "adopted", nil)
	b.Status.ResourceID = "up1234abcd"
	if _, err := ac.MZ.MaterializeV1alpha1().Balancers(ns).UpdateStatus(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	owner := upstream.Owner{APIVersion: "materialize.cloud/v1alpha1", Kind: "Balancer", Name: b.Name, Namespace: ns, UID: b.UID, ResourceID: "up1234abcd"}
	name := "mzup1234abcd-balancerd"
	body, opts, err := upstream.ApplyPatch(upstream.BalancerDeployment(owner, upstream.ChartDefaults(corev1.PullAlways),
		b.Spec.BalancerdImageRef, 2, b.Spec.StaticRouting.EnvironmentdServiceName, b.Spec.StaticRouting.EnvironmentdNamespace))
	if err != nil {
		t.Fatal(err)
	}
	before, err := ac.Kube.AppsV1().Deployments(ns).Patch(ctx, name, types.ApplyPatchType, body, opts)
	if err != nil {
		t.Fatal(err)
	}
	if body, opts, err = upstream.ApplyPatch(upstream.BalancerService(owner)); err != nil {
		t.Fatal(err)
	}
	svcBefore, err := ac.Kube.CoreV1().Services(ns).Patch(ctx, name, types.ApplyPatchType, body, opts)
	if err != nil {
		t.Fatal(err)
	}

	ctrl := startUpstreamConfigured(t)
	balancers.WaitReady(t, ns, "adopted", metav1.ConditionFalse, component.ReasonReconciling)
	controllertest.WaitQuiet(t, ctrl.UserAgent)
	after := controllertest.WaitDeployment(t, ns, name)
	if after.Generation != before.Generation {
		t.Errorf("adopting upstream's Deployment changed its spec (generation %d -> %d): %s",
			before.Generation, after.Generation, diff.Diff(before.Spec, after.Spec))
	}
	if after.UID != before.UID {
		t.Error("upstream's Deployment was replaced")
	}
	svcAfter := controllertest.WaitService(t, ns, name)
	if !equality.Semantic.DeepEqual(svcBefore.Spec, svcAfter.Spec) {
		t.Errorf("adopting upstream's Service changed its spec:\nupstream %+v\nnow      %+v", svcBefore.Spec, svcAfter.Spec)
	}
	for _, f := range after.ManagedFields {
		if f.Operation == metav1.ManagedFieldsOperationApply && f.Manager != upstream.FieldManager {
			t.Errorf("apply by field manager %q: upstream's field sets are not taken over", f.Manager)
		}
	}
}

func TestResourceIDOverrides(t *testing.T) {
	ns := controllertest.NewNamespace(t)
	mz := controllertest.Admin(t).MZ.MaterializeV1alpha1().Balancers(ns)
	// status.resourceId wins over spec.resourceId: set both before the controller starts.
	b := newBalancer(t, ns, "from-status", func(b *v1alpha1.Balancer) { b.Spec.ResourceID = "fromspec" })
	b.Status.ResourceID = "fromstatus"
	if _, err := mz.UpdateStatus(context.Background(), b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctrl := startController(t)
	newBalancer(t, ns, "from-spec", func(b *v1alpha1.Balancer) { b.Spec.ResourceID = "fromspec2" })

	controllertest.WaitDeployment(t, ns, "mzfromstatus-balancerd")
	controllertest.WaitService(t, ns, "mzfromstatus-balancerd")
	controllertest.WaitDeployment(t, ns, "mzfromspec2-balancerd")
	controllertest.WaitService(t, ns, "mzfromspec2-balancerd")
	if id := balancers.WaitResourceID(t, ns, "from-spec"); id != "fromspec2" {
		t.Errorf("status.resourceId %q, want spec.resourceId fromspec2", id)
	}
	balancers.WaitReady(t, ns, "from-status", metav1.ConditionFalse, component.ReasonReconciling)
	controllertest.WaitQuiet(t, ctrl.UserAgent)
	if id := balancers.Get(t, ns, "from-status").Status.ResourceID; id != "fromstatus" {
		t.Errorf("status.resourceId changed to %q", id)
	}
	if _, err := controllertest.Admin(t).Kube.AppsV1().Deployments(ns).Get(context.Background(), "mzfromspec-balancerd", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment named after spec.resourceId exists although status.resourceId is set: %v", err)
	}
	if got := ctrl.Events.Reasons(ns, "from-status"); slices.Contains(got, "ResourceIDAssigned") {
		t.Errorf("events %v: an already assigned resourceId was assigned again", got)
	}
	// The id the spec names is recorded with the first Ready condition, not
	// by a status write (and Event) of its own.
	if got := ctrl.Events.Reasons(ns, "from-spec"); slices.Contains(got, "ResourceIDAssigned") {
		t.Errorf("events %v: spec.resourceId written to status on its own", got)
	}
}

func TestSpecChangeDriftAndDeletion(t *testing.T) {
	startController(t)
	ns := controllertest.NewNamespace(t)
	newBalancer(t, ns, "b", nil)
	id := balancers.WaitResourceID(t, ns, "b")
	name := "mz" + id + "-balancerd"
	controllertest.WaitDeployment(t, ns, name)
	balancers.WaitReady(t, ns, "b", metav1.ConditionFalse, component.ReasonReconciling)

	// A spec change is applied and observed.
	mz := controllertest.Admin(t).MZ.MaterializeV1alpha1().Balancers(ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b := balancers.Get(t, ns, "b")
		b.Spec.Replicas = controllertest.Int32Ptr(3)
		b.Spec.BalancerdImageRef = "materialize/balancerd:v2"
		_, err := mz.Update(context.Background(), b, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	deployments := controllertest.Admin(t).Kube.AppsV1().Deployments(ns)
	controllertest.Eventually(t, "spec change applied", func() error {
		d, err := deployments.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 3 || d.Spec.Template.Spec.Containers[0].Image != "materialize/balancerd:v2" {
			return fmt.Errorf("replicas %d image %s", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
		}
		return nil
	})
	if c := balancers.WaitReady(t, ns, "b", metav1.ConditionFalse, component.ReasonReconciling); c.ObservedGeneration != 2 {
		t.Errorf("observedGeneration %d, want 2", c.ObservedGeneration)
	}

	// A hand edit of a field the controller owns is undone, even when the
	// edit also writes the digest annotation of the applied state (the
	// cache's no-op check must not take it from the API server).
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deployments.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		applied, err := apply.OwnedDigest(d, appsv1ac.ExtractDeployment)
		if err != nil {
			return err
		}
		metav1.SetMetaDataAnnotation(&d.ObjectMeta, apply.OwnedDigestAnnotation, applied)
		d.Spec.Replicas = controllertest.Int32Ptr(7)
		_, err = deployments.Update(context.Background(), d, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "drifted replicas corrected", func() error {
		d, err := deployments.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 3 {
			return fmt.Errorf("replicas %d", *d.Spec.Replicas)
		}
		return nil
	})

	// Deleted children come back.
	oldSvc := controllertest.WaitService(t, ns, name)
	if err := controllertest.Admin(t).Kube.CoreV1().Services(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	oldDep := controllertest.WaitDeployment(t, ns, name)
	if err := deployments.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "deleted children recreated", func() error {
		s, err := controllertest.Admin(t).Kube.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d, err := deployments.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.UID == oldSvc.UID || d.UID == oldDep.UID {
			return fmt.Errorf("not recreated yet")
		}
		return nil
	})
}

func TestNoWritesOnResync(t *testing.T) {
	first := startController(t)
	ns := controllertest.NewNamespace(t)
	newBalancer(t, ns, "b", func(b *v1alpha1.Balancer) {
		b.Spec.ResourceRequirements = &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5")},
		}
		b.Spec.PodAnnotations = map[string]string{"example.com/a": "b"}
	})
	id := balancers.WaitResourceID(t, ns, "b")
	name := "mz" + id + "-balancerd"
	controllertest.WaitDeployment(t, ns, name)
	controllertest.WaitService(t, ns, name)
	controllertest.SetAvailable(t, ns, name, corev1.ConditionTrue, "MinimumReplicasAvailable")
	balancers.WaitReady(t, ns, "b", metav1.ConditionTrue, component.ReasonDeploymentStatus)
	controllertest.WaitQuiet(t, first.UserAgent)

	// Changes outside the controller's fields make it reconcile, and write nothing.
	mark := len(controllertest.AuditEvents(t))
	before := first.Reconciles(t)
	annotate := func(get func() (metav1.Object, error), update func(metav1.Object) error) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			obj, err := get()
			if err != nil {
				return err
			}
			obj.SetAnnotations(map[string]string{"example.com/touched": "yes"})
			return update(obj)
		}); err != nil {
			t.Fatal(err)
		}
	}
	ac := controllertest.Admin(t)
	annotate(func() (metav1.Object, error) {
		return ac.MZ.MaterializeV1alpha1().Balancers(ns).Get(context.Background(), "b", metav1.GetOptions{})
	}, func(o metav1.Object) error {
		_, err := ac.MZ.MaterializeV1alpha1().Balancers(ns).Update(context.Background(), o.(*v1alpha1.Balancer), metav1.UpdateOptions{})
		return err
	})
	annotate(func() (metav1.Object, error) {
		return ac.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	}, func(o metav1.Object) error {
		_, err := ac.Kube.AppsV1().Deployments(ns).Update(context.Background(), o.(*appsv1.Deployment), metav1.UpdateOptions{})
		return err
	})
	controllertest.Eventually(t, "reconciles after the touches", func() error {
		if n := first.Reconciles(t); n < before+2 {
			return fmt.Errorf("%v reconciles since the touches", n-before)
		}
		return nil
	})
	controllertest.WaitQuiet(t, first.UserAgent)
	if w := controllertest.WritesBy(t, first.UserAgent, mark); len(w) != 0 {
		t.Errorf("resyncs after unrelated changes wrote: %v", w)
	}

	// A restarted controller re-lists and reconciles everything, and writes nothing.
	first.Stop()
	events := first.Events.Count()
	second := startController(t)
	all, err := ac.MZ.MaterializeV1alpha1().Balancers("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "restarted controller reconciles every Balancer", func() error {
		if n := second.Reconciles(t); n < float64(len(all.Items)) {
			return fmt.Errorf("%v of %d reconciled", n, len(all.Items))
		}
		return nil
	})
	controllertest.WaitQuiet(t, second.UserAgent)
	if w := controllertest.WritesBy(t, second.UserAgent, 0); len(w) != 0 {
		t.Errorf("restarted controller wrote: %v", w)
	}
	if controllertest.RequestsBy(t, second.UserAgent) == 0 {
		t.Fatal("no requests by the restarted controller's user agent: the audit check proves nothing")
	}
	if n := second.Events.Count(); n != 0 || first.Events.Count() != events {
		t.Errorf("%d events on no-op resyncs", n)
	}
}

// A Service with a cluster IP (an earlier version of this operator made
// them) cannot become headless in place: it is replaced.
func TestReplacesAServiceWithAClusterIP(t *testing.T) {
	ns := controllertest.NewNamespace(t)
	ctx := context.Background()
	ac := controllertest.Admin(t)
	b := newBalancer(t, ns, "b", func(b *v1alpha1.Balancer) { b.Spec.ResourceID = "withip" })
	old, err := ac.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "mzwithip-balancerd", Namespace: ns, Labels: map[string]string{children.ResourceIDLabel: "withip"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "materialize.cloud/v1alpha1", Kind: "Balancer", Name: b.Name, UID: b.UID}}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "pgwire", Port: 6875}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if old.Spec.ClusterIP == "" || old.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Fatalf("the API server gave the old Service no cluster IP: %q", old.Spec.ClusterIP)
	}
	startController(t)
	controllertest.Eventually(t, "a headless Service in place of the old one", func() error {
		s, err := ac.Kube.CoreV1().Services(ns).Get(ctx, "mzwithip-balancerd", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.UID == old.UID || s.Spec.ClusterIP != corev1.ClusterIPNone {
			return fmt.Errorf("uid %s cluster IP %s", s.UID, s.Spec.ClusterIP)
		}
		return nil
	})
}

// balancerd's external Certificate follows the Balancer's spec through the
// API server, removed fields included (the check compares the fields this
// operator applied, not a subset of the live object), and balancerd is run
// with the certificate mounted and TLS required.
func TestCertificateFollowsTheSpec(t *testing.T) {
	controllertest.InstallCertificateCRD(t)
	startController(t)
	ns := controllertest.NewNamespace(t)
	ctx := context.Background()
	ac := controllertest.Admin(t)
	newBalancer(t, ns, "b", func(b *v1alpha1.Balancer) {
		b.Spec.ExternalCertificateSpec = &v1alpha1.MaterializeCertSpec{
			DNSNames: []string{"b.example"}, Duration: "2160h",
			IssuerRef:      &v1alpha1.CertificateIssuerRef{Name: "ca", Kind: "ClusterIssuer"},
			SecretTemplate: &v1alpha1.CertificateSecretTemplate{Labels: map[string]string{"team": "db"}},
		}
	})
	id := balancers.WaitResourceID(t, ns, "b")
	certs := ac.Dynamic.Resource(certificates.GVR).Namespace(ns)
	name := "mz" + id + "-balancerd-external"
	spec := func() (map[string]any, error) {
		c, err := certs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		s, _ := c.Object["spec"].(map[string]any)
		return s, nil
	}
	controllertest.Eventually(t, "the Certificate as the spec asks", func() error {
		s, err := spec()
		if err != nil {
			return err
		}
		labels, _ := s["secretTemplate"].(map[string]any)["labels"].(map[string]any)
		if s["duration"] != "2160h" || labels["team"] != "db" || s["secretName"] != "mz"+id+"-balancerd-external-tls" {
			return fmt.Errorf("spec %v", s)
		}
		return nil
	})
	c := controllertest.WaitDeployment(t, ns, "mz"+id+"-balancerd").Spec.Template.Spec
	if !slices.Contains(c.Containers[0].Args, "--tls-mode=require") || len(c.Volumes) != 1 || c.Volumes[0].Secret.SecretName != "mz"+id+"-balancerd-external-tls" {
		t.Errorf("balancerd args %v volumes %+v: want TLS from the certificate's Secret", c.Containers[0].Args, c.Volumes)
	}

	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b := balancers.Get(t, ns, "b")
		b.Spec.ExternalCertificateSpec.Duration = ""
		b.Spec.ExternalCertificateSpec.SecretTemplate = nil
		_, err := ac.MZ.MaterializeV1alpha1().Balancers(ns).Update(ctx, b, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "removed fields gone from the Certificate", func() error {
		s, err := spec()
		if err != nil {
			return err
		}
		labels, _ := s["secretTemplate"].(map[string]any)["labels"].(map[string]any)
		if _, ok := s["duration"]; ok || labels["team"] != nil {
			return fmt.Errorf("spec %v", s)
		}
		return nil
	})
}

// Certificates are not watched: one deleted by hand (the usual way to
// force a reissue) is applied again at the owner's next recheck, when
// nothing else brings a reconcile (apply.CertificateRecheck, an hour).
func TestDeletedCertificateIsAppliedAgain(t *testing.T) {
	controllertest.InstallCertificateCRD(t)
	recheck := apply.CertificateRecheck
	apply.CertificateRecheck = 2 * time.Second
	t.Cleanup(func() { apply.CertificateRecheck = recheck }) // after the controller stops
	ctrl := startController(t)
	ns := controllertest.NewNamespace(t)
	ctx := context.Background()
	ac := controllertest.Admin(t)
	newBalancer(t, ns, "b", func(b *v1alpha1.Balancer) {
		b.Spec.ExternalCertificateSpec = &v1alpha1.MaterializeCertSpec{IssuerRef: &v1alpha1.CertificateIssuerRef{Name: "ca", Kind: "ClusterIssuer"}}
	})
	id := balancers.WaitResourceID(t, ns, "b")
	certs := ac.Dynamic.Resource(certificates.GVR).Namespace(ns)
	name := "mz" + id + "-balancerd-external"
	controllertest.Eventually(t, "the Certificate", func() error {
		_, err := certs.Get(ctx, name, metav1.GetOptions{})
		return err
	})
	// Ready, and no reconcile pending but the recheck.
	controllertest.WaitDeployment(t, ns, "mz"+id+"-balancerd")
	controllertest.SetAvailable(t, ns, "mz"+id+"-balancerd", corev1.ConditionTrue, "MinimumReplicasAvailable")
	balancers.WaitReady(t, ns, "b", metav1.ConditionTrue, component.ReasonDeploymentStatus)
	controllertest.WaitQuiet(t, ctrl.UserAgent)
	if err := certs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "the Certificate applied again", func() error {
		_, err := certs.Get(ctx, name, metav1.GetOptions{})
		return err
	})
}

// The first status holds both fields upstream's status type requires,
// conditions: [] included, so upstream can read every Balancer this
// operator wrote, even one whose children were never created.
func TestFirstStatusIsReadableByUpstream(t *testing.T) {
	ns := controllertest.NewNamespace(t)
	admin := controllertest.Admin(t)
	b := newBalancer(t, ns, "first", nil)
	owner := component.NewOwner(kind(admin.MZ), recent.NewWrites(), nil, 0)
	if _, _, err := owner.ResourceID(context.Background(), ns+"/first", b); err != nil {
		t.Fatal(err)
	}
	raw, err := admin.MZ.MaterializeV1alpha1().RESTClient().Get().Namespace(ns).Resource("balancers").Name("first").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Status map[string]any `json:"status"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	if id, _ := stored.Status["resourceId"].(string); id == "" {
		t.Errorf("status %v: no resourceId", stored.Status)
	}
	if conditions, ok := stored.Status["conditions"].([]any); !ok || len(conditions) != 0 {
		t.Errorf("status %v: want conditions: []", stored.Status)
	}
}

// What only a change to the spec mends is said in a Warning Event on the
// Balancer: a certificate spec cert-manager would refuse (the operator's
// own check), and a Deployment the API server refuses as invalid
// (requests above limits). Before, the Balancer just never got Ready.
func TestRefusedChildrenAreWarningEvents(t *testing.T) {
	ctrl := startController(t)
	ns := controllertest.NewNamespace(t)
	size := int64(4096)
	newBalancer(t, ns, "cert", func(b *v1alpha1.Balancer) {
		b.Spec.ExternalCertificateSpec = &v1alpha1.MaterializeCertSpec{
			IssuerRef:           &v1alpha1.CertificateIssuerRef{Name: "ca", Kind: "Issuer"},
			PrivateKeyAlgorithm: v1alpha1.PrivateKeyECDSA, PrivateKeySize: &size,
		}
	})
	newBalancer(t, ns, "limits", func(b *v1alpha1.Balancer) {
		b.Spec.ResourceRequirements = &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}
	})
	for name, says := range map[string]string{"cert": "ECDSA key size must be one of 256, 384, or 521 bits", "limits": "must be less than or equal to memory limit"} {
		controllertest.Eventually(t, "a Warning FailedApply Event on "+name, func() error {
			for _, e := range ctrl.Events.For(ns, name) {
				if e.Type == corev1.EventTypeWarning && e.Reason == component.ReasonFailedApply && strings.Contains(e.Message, says) {
					return nil
				}
			}
			return fmt.Errorf("Events %v", ctrl.Events.Reasons(ns, name))
		})
	}
}

// A Balancer the operator's types cannot read (a quantity the CRD's pattern
// admits and Go refuses) stalls only itself: the controller reconciles the
// others, says why in a Warning Event, and reconciles it once it is fixed
// (pkg/controllers/unreadable; the Materialize's case is in its package).
func TestUnreadableBalancerStallsOnlyItself(t *testing.T) {
	ns := controllertest.NewNamespace(t)
	newBalancer(t, ns, "bad", nil)
	rest := controllertest.Admin(t).MZ.MaterializeV1alpha1().RESTClient()
	patch := func(cpu string) error {
		body := `{"spec":{"resourceRequirements":{"requests":{"cpu":"` + cpu + `"}}}}`
		return rest.Patch(types.MergePatchType).Namespace(ns).Resource("balancers").Name("bad").Body([]byte(body)).Do(context.Background()).Error()
	}
	// Refused by this CRD's pattern, stored under upstream's.
	controllertest.WithUpstreamQuantities(t, "balancers.materialize.cloud", func() error { return patch("1e1.5") })
	ctrl := startController(t)
	newBalancer(t, ns, "good", nil)
	balancers.WaitResourceID(t, ns, "good")
	controllertest.Eventually(t, "a Warning Unreadable Event for the Balancer that does not read", func() error {
		if reasons := ctrl.Events.Reasons(ns, "bad"); !slices.Contains(reasons, unreadable.ReasonUnreadable) {
			return fmt.Errorf("Events %v", reasons)
		}
		return nil
	})
	if err := patch("1"); err != nil {
		t.Fatal(err)
	}
	balancers.WaitResourceID(t, ns, "bad")
}
