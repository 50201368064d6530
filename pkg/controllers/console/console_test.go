package console

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/component"
	"github.com/materializeinc/orchestratord/test/controllertest"
	"github.com/materializeinc/orchestratord/test/upstream"
)

// consoles is how the helpers of controllertest reach Consoles.
var consoles = controllertest.Kind[*v1alpha1.Console]{
	Client: func(t *testing.T, namespace string) controllertest.CRClient[*v1alpha1.Console] {
		return controllertest.Admin(t).MZ.MaterializeV1alpha1().Consoles(namespace)
	},
	Status: func(c *v1alpha1.Console) v1alpha1.ComponentStatus { return c.Status },
}

func newConsole(t *testing.T, namespace, name string, mutate func(*v1alpha1.Console)) *v1alpha1.Console {
	t.Helper()
	c := &v1alpha1.Console{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.ConsoleSpec{
			ConsoleImageRef: "materialize/console:v1",
			Balancerd:       v1alpha1.BalancerdRef{ServiceName: "mzabc-balancerd", Namespace: "envs"},
		},
	}
	if mutate != nil {
		mutate(c)
	}
	return consoles.Create(t, c)
}

func TestChildrenAndReady(t *testing.T) {
	ctrl := startController(t)
	ns := controllertest.NewNamespace(t)
	c := newConsole(t, ns, "c", func(c *v1alpha1.Console) {
		c.Spec.AuthenticatorKind = v1alpha1.AuthenticatorPassword
		c.Spec.Balancerd.Scheme = v1alpha1.SchemeHTTPS
		c.Spec.Balancerd.DNSNames = []string{"balancerd.example.com"}
	})
	id := consoles.WaitResourceID(t, ns, "c")
	if !regexp.MustCompile(`^[a-z0-9]{10}$`).MatchString(id) {
		t.Fatalf("generated resourceId %q is not 10 characters of [a-z0-9]", id)
	}
	name := "mz" + id + "-console"
	want := map[string]string{
		"materialize.cloud/organization-name": "c", "materialize.cloud/organization-namespace": ns,
		children.ResourceIDLabel: id, "materialize.cloud/app": "console",
		"app.kubernetes.io/managed-by": "materialize-operator", "app.kubernetes.io/part-of": "materialize",
		"app.kubernetes.io/name": "console", "app": "console",
	}

	cm := controllertest.WaitConfigMap(t, ns, name)
	controllertest.CheckLabels(t, "ConfigMap", cm.Labels, want)
	controllertest.CheckOwner(t, "ConfigMap", cm, "Console", "c", c.UID)
	if got, want := cm.Data[AppConfigKey], `{"version":"v1","auth":{"mode":"Password"},"balancerd_dns_names":["balancerd.example.com"]}`; got != want {
		t.Errorf("app-config.json %s, want %s", got, want)
	}

	d := controllertest.WaitDeployment(t, ns, name)
	controllertest.CheckLabels(t, "Deployment", d.Labels, want)
	controllertest.CheckOwner(t, "Deployment", d, "Console", "c", c.UID)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want the default 2", d.Spec.Replicas)
	}
	if got := d.Spec.Selector.MatchLabels; got["materialize.cloud/name"] != name || got["app"] != "console" || len(got) != 6 {
		t.Errorf("selector %v, want upstream's: default labels, materialize.cloud/name, app", got)
	}
	ctr := d.Spec.Template.Spec.Containers[0]
	for _, e := range []corev1.EnvVar{
		{Name: EndpointEnv, Value: "https://mzabc-balancerd.envs.svc.cluster.local:6876"},
		{Name: ListenerEnv, Value: "listen 8080;"},
	} {
		if !slices.Contains(ctr.Env, e) {
			t.Errorf("env %+v lacks %+v", ctr.Env, e)
		}
	}
	if len(ctr.VolumeMounts) != 1 || ctr.VolumeMounts[0].MountPath != AppConfigMountPath {
		t.Errorf("mounts %+v, want app-config at %s", ctr.VolumeMounts, AppConfigMountPath)
	}
	if v := d.Spec.Template.Spec.Volumes; len(v) != 1 || v[0].ConfigMap == nil || v[0].ConfigMap.Name != name {
		t.Errorf("volumes %+v, want ConfigMap %s", v, name)
	}

	s := controllertest.WaitService(t, ns, name)
	controllertest.CheckLabels(t, "Service", s.Labels, want)
	controllertest.CheckOwner(t, "Service", s, "Console", "c", c.UID)
	if s.Spec.ClusterIP != corev1.ClusterIPNone || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 8080 || s.Spec.Ports[0].TargetPort != intstr.FromInt32(8080) {
		t.Errorf("service spec %+v, want upstream's headless Service on 8080", s.Spec)
	}

	np := controllertest.WaitNetworkPolicy(t, ns, name+"-ingress")
	controllertest.CheckLabels(t, "NetworkPolicy", np.Labels, want)
	controllertest.CheckOwner(t, "NetworkPolicy", np, "Console", "c", c.UID)
	if got := np.Spec.PodSelector.MatchLabels; len(got) != 4 || got["materialize.cloud/app"] != "console" || got[children.ResourceIDLabel] != id {
		t.Errorf("network policy pod selector %v, want the console's default labels", got)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != 8080 ||
		len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].IPBlock.CIDR != "0.0.0.0/0" ||
		!slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("network policy spec %+v, want ingress from 0.0.0.0/0 to 8080", np.Spec)
	}

	consoles.ReadyFollowsDeployment(t, ctrl, ns, "c", name, corev1.ConditionUnknown, "Probing")
}

// A new Console's first Ready waits for its Deployment, up to QuietFor:
// one status write for Ready in a first rollout, as the Deployment becomes
// available.
func TestFirstReadyIsQuiet(t *testing.T) {
	const quiet = 10 * time.Second
	ctrl := startConfigured(t, func(cfg *Config) { cfg.QuietFor = quiet })
	ns := controllertest.NewNamespace(t)
	consoles.FirstReadyIsQuiet(t, ctrl, quiet, ns,
		func(name string) *v1alpha1.Console { return newConsole(t, ns, name, nil) },
		func(id string) string { return "mz" + id + "-console" })
}

// A Console's ConfigMap, Deployment and Service made by upstream
// orchestratord are taken over in place (see the balancer's test).
func TestAdoptsUpstreamObjects(t *testing.T) {
	ns := controllertest.NewNamespace(t)
	ac := controllertest.Admin(t)
	ctx := context.Background()
	c := newConsole(t, ns, "adopted", nil)
	c.Status.ResourceID = "up1234abcd"
	if _, err := ac.MZ.MaterializeV1alpha1().Consoles(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	owner := upstream.Owner{APIVersion: "materialize.cloud/v1alpha1", Kind: "Console", Name: c.Name, Namespace: ns, UID: c.UID, ResourceID: "up1234abcd"}
	name := "mzup1234abcd-console"
	apply := func(obj any, patch func([]byte, metav1.PatchOptions) (metav1.Object, error)) metav1.Object {
		t.Helper()
		body, opts, err := upstream.ApplyPatch(obj)
		if err != nil {
			t.Fatal(err)
		}
		out, err := patch(body, opts)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	apply(upstream.ConsoleConfigMap(owner, c.Spec.ConsoleImageRef, "v1", "None"), func(b []byte, o metav1.PatchOptions) (metav1.Object, error) {
		return ac.Kube.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.ApplyPatchType, b, o)
	})
	before := apply(upstream.ConsoleDeployment(owner, upstream.ChartDefaults(corev1.PullAlways), c.Spec.ConsoleImageRef, 2, c.Spec.Balancerd.ServiceName, c.Spec.Balancerd.Namespace),
		func(b []byte, o metav1.PatchOptions) (metav1.Object, error) {
			return ac.Kube.AppsV1().Deployments(ns).Patch(ctx, name, types.ApplyPatchType, b, o)
		})
	svcBefore := apply(upstream.ConsoleService(owner), func(b []byte, o metav1.PatchOptions) (metav1.Object, error) {
		return ac.Kube.CoreV1().Services(ns).Patch(ctx, name, types.ApplyPatchType, b, o)
	}).(*corev1.Service)
	cmBefore := controllertest.WaitConfigMap(t, ns, name)

	ctrl := startUpstreamConfigured(t)
	consoles.WaitReady(t, ns, "adopted", metav1.ConditionFalse, component.ReasonReconciling)
	controllertest.WaitQuiet(t, ctrl.UserAgent)
	after := controllertest.WaitDeployment(t, ns, name)
	if after.Generation != before.GetGeneration() || after.UID != before.GetUID() {
		t.Errorf("adopting upstream's Deployment changed its spec (generation %d -> %d): %s",
			before.GetGeneration(), after.Generation, diff.Diff(before.(*appsv1.Deployment).Spec, after.Spec))
	}
	if svc := controllertest.WaitService(t, ns, name); !equality.Semantic.DeepEqual(svc.Spec, svcBefore.Spec) {
		t.Errorf("adopting upstream's Service changed its spec:\nupstream %+v\nnow      %+v", svcBefore.Spec, svc.Spec)
	}
	if cm := controllertest.WaitConfigMap(t, ns, name); !equality.Semantic.DeepEqual(cm.Data, cmBefore.Data) {
		t.Errorf("adopting upstream's ConfigMap changed app-config.json: %v -> %v", cmBefore.Data, cm.Data)
	}
}

func TestResourceIDOverrides(t *testing.T) {
	ns := controllertest.NewNamespace(t)
	mz := controllertest.Admin(t).MZ.MaterializeV1alpha1().Consoles(ns)
	// status.resourceId wins over spec.resourceId: set both before the controller starts.
	c := newConsole(t, ns, "from-status", func(c *v1alpha1.Console) { c.Spec.ResourceID = "fromspec" })
	c.Status.ResourceID = "fromstatus"
	if _, err := mz.UpdateStatus(context.Background(), c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctrl := startController(t)
	newConsole(t, ns, "from-spec", func(c *v1alpha1.Console) { c.Spec.ResourceID = "fromspec2" })

	for _, id := range []string{"fromstatus", "fromspec2"} {
		name := "mz" + id + "-console"
		controllertest.WaitConfigMap(t, ns, name)
		controllertest.WaitDeployment(t, ns, name)
		controllertest.WaitService(t, ns, name)
		controllertest.WaitNetworkPolicy(t, ns, name+"-ingress")
	}
	if id := consoles.WaitResourceID(t, ns, "from-spec"); id != "fromspec2" {
		t.Errorf("status.resourceId %q, want spec.resourceId fromspec2", id)
	}
	consoles.WaitReady(t, ns, "from-status", metav1.ConditionFalse, component.ReasonReconciling)
	controllertest.WaitQuiet(t, ctrl.UserAgent)
	if id := consoles.Get(t, ns, "from-status").Status.ResourceID; id != "fromstatus" {
		t.Errorf("status.resourceId changed to %q", id)
	}
	if _, err := controllertest.Admin(t).Kube.AppsV1().Deployments(ns).Get(context.Background(), "mzfromspec-console", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
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
	newConsole(t, ns, "c", nil)
	id := consoles.WaitResourceID(t, ns, "c")
	name := "mz" + id + "-console"
	controllertest.WaitDeployment(t, ns, name)
	consoles.WaitReady(t, ns, "c", metav1.ConditionFalse, component.ReasonReconciling)

	// A spec change is applied; the configuration reaches the pods through
	// their ConfigMap volume, without a restart (as upstream).
	mz := controllertest.Admin(t).MZ.MaterializeV1alpha1().Consoles(ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c := consoles.Get(t, ns, "c")
		c.Spec.Replicas = controllertest.Int32Ptr(3)
		c.Spec.ConsoleImageRef = "materialize/console:v2"
		c.Spec.AuthenticatorKind = v1alpha1.AuthenticatorOidc
		_, err := mz.Update(context.Background(), c, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	deployments := controllertest.Admin(t).Kube.AppsV1().Deployments(ns)
	controllertest.Eventually(t, "spec change applied", func() error {
		cm, err := controllertest.Admin(t).Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d, err := deployments.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 3 || d.Spec.Template.Spec.Containers[0].Image != "materialize/console:v2" ||
			cm.Data[AppConfigKey] != `{"version":"v2","auth":{"mode":"Oidc"}}` {
			return fmt.Errorf("replicas %d image %s config %s", *d.Spec.Replicas,
				d.Spec.Template.Spec.Containers[0].Image, cm.Data[AppConfigKey])
		}
		return nil
	})
	if c := consoles.WaitReady(t, ns, "c", metav1.ConditionFalse, component.ReasonReconciling); c.ObservedGeneration != 2 {
		t.Errorf("observedGeneration %d, want 2", c.ObservedGeneration)
	}

	// Hand edits of fields the controller owns are undone.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deployments.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Replicas = controllertest.Int32Ptr(7)
		_, err = deployments.Update(context.Background(), d, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	configMaps := controllertest.Admin(t).Kube.CoreV1().ConfigMaps(ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := configMaps.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data[AppConfigKey] = "{}"
		_, err = configMaps.Update(context.Background(), cm, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "drift corrected", func() error {
		d, err := deployments.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm, err := configMaps.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 3 || cm.Data[AppConfigKey] == "{}" {
			return fmt.Errorf("replicas %d config %s", *d.Spec.Replicas, cm.Data[AppConfigKey])
		}
		return nil
	})

	// Deleted children come back.
	old := map[string]metav1.Object{
		"ConfigMap": controllertest.WaitConfigMap(t, ns, name), "Deployment": controllertest.WaitDeployment(t, ns, name),
		"Service": controllertest.WaitService(t, ns, name), "NetworkPolicy": controllertest.WaitNetworkPolicy(t, ns, name+"-ingress"),
	}
	kube := controllertest.Admin(t).Kube
	ctx := context.Background()
	for _, err := range []error{
		kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}),
		kube.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{}),
		kube.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}),
		kube.NetworkingV1().NetworkPolicies(ns).Delete(ctx, name+"-ingress", metav1.DeleteOptions{}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	controllertest.Eventually(t, "deleted children recreated", func() error {
		var now []metav1.Object
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		now = append(now, cm)
		d, err2 := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		now = append(now, d)
		s, err3 := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		now = append(now, s)
		np, err4 := kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, name+"-ingress", metav1.GetOptions{})
		now = append(now, np)
		for _, err := range []error{err, err2, err3, err4} {
			if err != nil {
				return err
			}
		}
		for i, kind := range []string{"ConfigMap", "Deployment", "Service", "NetworkPolicy"} {
			if now[i].GetUID() == old[kind].GetUID() {
				return fmt.Errorf("%s not recreated yet", kind)
			}
		}
		return nil
	})
}

func TestNoWritesOnResync(t *testing.T) {
	first := startController(t)
	ns := controllertest.NewNamespace(t)
	newConsole(t, ns, "c", func(c *v1alpha1.Console) {
		c.Spec.ResourceRequirements = &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.25")},
		}
		c.Spec.PodAnnotations = map[string]string{"example.com/a": "b"}
	})
	id := consoles.WaitResourceID(t, ns, "c")
	name := "mz" + id + "-console"
	controllertest.WaitConfigMap(t, ns, name)
	controllertest.WaitDeployment(t, ns, name)
	controllertest.WaitService(t, ns, name)
	controllertest.WaitNetworkPolicy(t, ns, name+"-ingress")
	controllertest.SetAvailable(t, ns, name, corev1.ConditionTrue, "MinimumReplicasAvailable")
	consoles.WaitReady(t, ns, "c", metav1.ConditionTrue, component.ReasonDeploymentStatus)
	controllertest.WaitQuiet(t, first.UserAgent)

	// Changes outside the controller's fields make it reconcile, and write nothing.
	mark := len(controllertest.AuditEvents(t))
	before := first.Reconciles(t)
	ac := controllertest.Admin(t)
	ctx := context.Background()
	touch := func(update func() error) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, update); err != nil {
			t.Fatal(err)
		}
	}
	touched := map[string]string{"example.com/touched": "yes"}
	touch(func() error {
		c, err := ac.MZ.MaterializeV1alpha1().Consoles(ns).Get(ctx, "c", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Annotations = touched
		_, err = ac.MZ.MaterializeV1alpha1().Consoles(ns).Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
	touch(func() error {
		cm, err := ac.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Annotations = touched
		_, err = ac.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	touch(func() error {
		np, err := ac.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, name+"-ingress", metav1.GetOptions{})
		if err != nil {
			return err
		}
		np.Annotations = touched
		_, err = ac.Kube.NetworkingV1().NetworkPolicies(ns).Update(ctx, np, metav1.UpdateOptions{})
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
	all, err := ac.MZ.MaterializeV1alpha1().Consoles("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, "restarted controller reconciles every Console", func() error {
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

func TestAppConfigJSON(t *testing.T) {
	for _, c := range []struct {
		spec v1alpha1.ConsoleSpec
		want string
	}{
		{v1alpha1.ConsoleSpec{ConsoleImageRef: "materialize/console:26.5.0"}, `{"version":"26.5.0","auth":{"mode":"None"}}`},
		// The version is what follows the last ':', a digest's hex included.
		{v1alpha1.ConsoleSpec{ConsoleImageRef: "registry:5000/console@sha256:abc", AuthenticatorKind: v1alpha1.AuthenticatorFrontegg},
			`{"version":"abc","auth":{"mode":"Frontegg"}}`},
		{v1alpha1.ConsoleSpec{ConsoleImageRef: "console", Balancerd: v1alpha1.BalancerdRef{DNSNames: []string{"a<b", "c"}}},
			`{"version":"console","auth":{"mode":"None"},"balancerd_dns_names":["a<b","c"]}`},
	} {
		if got := AppConfigJSON(c.spec); got != c.want {
			t.Errorf("AppConfigJSON(%+v) = %s, want %s", c.spec, got, c.want)
		}
	}
	if got := DefaultConfig().Endpoint(v1alpha1.BalancerdRef{ServiceName: "b", Namespace: "n"}); got != "http://b.n.svc.cluster.local:6876" {
		t.Errorf("Endpoint with the default scheme = %s", got)
	}
}

// A Deployment the API server refuses as invalid (requests above limits)
// is said in a Warning Event on the Console (component.ReportRefused).
func TestRefusedDeploymentIsAWarningEvent(t *testing.T) {
	ctrl := startController(t)
	ns := controllertest.NewNamespace(t)
	newConsole(t, ns, "limits", func(c *v1alpha1.Console) {
		c.Spec.ResourceRequirements = &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}
	})
	controllertest.Eventually(t, "a Warning FailedApply Event", func() error {
		for _, e := range ctrl.Events.For(ns, "limits") {
			if e.Type == corev1.EventTypeWarning && e.Reason == component.ReasonFailedApply && strings.Contains(e.Message, "must be less than or equal to memory limit") {
				return nil
			}
		}
		return fmt.Errorf("Events %v", ctrl.Events.Reasons(ns, "limits"))
	})
}
