package materialize

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/controlplane"
	"github.com/materializeinc/orchestratord/test/standin/clusterd"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

// kubeStandIn boots the environmentd stand-in on the generation this
// operator renders, in namespace "envs" of cp, as environmentd's
// ServiceAccount with the RoleBinding this operator makes, to a ClusterRole
// of EnvironmentdRules as the chart ships it (editRules may change the
// rules first): what real environmentd does with its pod's token. It
// returns the process's leader API state and its exit.
func kubeStandIn(t *testing.T, cp *controlplane.ControlPlane, editRules func([]rbacv1.PolicyRule) []rbacv1.PolicyRule, retryFor time.Duration) (
	e env, sts types.UID, d *standin.Deployment, exit <-chan error, logged *standinLog) {
	t.Helper()
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	mz := testMaterialize("materialize/environmentd:v26.35.0", v1alpha1.AuthenticatorNone)
	mz.Spec.SystemParameterConfigmapName = ""
	e = testEnv(mz)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns()}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	opts := metav1.ApplyOptions{FieldManager: "test", Force: true}
	if _, err := admin.CoreV1().ServiceAccounts(e.ns()).Apply(ctx, e.serviceAccount(), opts); err != nil {
		t.Fatal(err)
	}
	const clusterRole = "standin-environmentd"
	rules := EnvironmentdRules()
	if editRules != nil {
		rules = editRules(rules)
	}
	if err := admin.RbacV1().ClusterRoles().Delete(ctx, clusterRole, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: clusterRole}, Rules: rules},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(e.ns()).Apply(ctx, e.roleBinding(clusterRole), opts); err != nil {
		t.Fatal(err)
	}
	waitForAuthorizer(t, admin, e, rules)
	g := e.generation(1)
	live, err := admin.AppsV1().StatefulSets(e.ns()).Apply(ctx, g.statefulSet, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The pod the StatefulSet controller would make (no controller runs here).
	podName := live.Name + "-0"
	truth := true
	_ = admin.CoreV1().Pods(e.ns()).Delete(ctx, podName, metav1.DeleteOptions{})
	if _, err := admin.CoreV1().Pods(e.ns()).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1",
			Kind: "StatefulSet", Name: live.Name, UID: live.UID, Controller: &truth, BlockOwnerDeletion: &truth}}},
		Spec: corev1.PodSpec{ServiceAccountName: e.serviceAccountName(), AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "environmentd", Image: "environmentd"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	rendered, cms := render(t, e, 1)
	argv, lookup, read := podInput(t, rendered, cms, secrets())
	plan, exitErr := standin.Check(imageref.MustParseVersion("26.35.0"), argv, lookup, read)
	if exitErr != nil {
		t.Fatal(exitErr)
	}
	plan.Listeners = &standin.Listeners{} // the leader API is driven directly: no ports bound
	sa := rest.CopyConfig(cp.Config)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + e.ns() + ":" + e.serviceAccountName(),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + e.ns(), "system:authenticated"}}
	logged = &standinLog{t: t}
	log := slog.New(slog.NewTextHandler(logged, nil))
	p, err := standin.KubeProcess(ctx, log, plan, "26.35.0", "", sa, e.ns(), podName)
	if err != nil {
		t.Fatal(err)
	}
	p.RetryFor = retryFor
	p.Deployment = standin.NewDeployment()
	runCtx, cancel := context.WithCancel(ctx)
	done, finished := make(chan error, 1), make(chan struct{})
	go func() { done <- p.Run(runCtx, plan); close(finished) }()
	t.Cleanup(func() { cancel(); <-finished })
	return e, live.UID, p.Deployment, done, logged
}

// What environmentd does with its ServiceAccount once it runs, played by the
// stand-in against a real API server: with environmentd's ClusterRole
// (EnvironmentdRules) bound as this operator binds it, under
// OwnerReferencesPermissionEnforcement, with its name prefix and the installed VpcEndpoint CRD it lists VpcEndpoints, keeps its
// catalog, creates the clusterd Service and StatefulSet of each bootstrap
// replica under the generation's StatefulSet (so tearing the generation
// down removes them); without the CRD or the vpcendpoints rule it fails as
// environmentd would.
func TestStandInBootsAsEnvironmentdsServiceAccount(t *testing.T) {
	cp := controlplane.ForTest(t, controlplane.Options{})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Config)

	t.Run("boots", func(t *testing.T) {
		// A clusterd pod of an older template, left from an earlier boot:
		// environmentd deletes it (OnDelete: its StatefulSet makes it anew).
		pre := testEnv(testMaterialize("materialize/environmentd:v26.35.0", v1alpha1.AuthenticatorNone))
		stale := "mz" + pre.id + "-cluster-u1-replica-u1-gen-1-0"
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pre.ns()}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if _, err := admin.CoreV1().ServiceAccounts(pre.ns()).Apply(ctx, pre.serviceAccount(), metav1.ApplyOptions{FieldManager: "test", Force: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CoreV1().Pods(pre.ns()).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: stale, Annotations: map[string]string{"environmentd.materialize.cloud/pod-template-hash": "older"}},
			Spec: corev1.PodSpec{ServiceAccountName: pre.serviceAccountName(), AutomountServiceAccountToken: new(bool),
				Containers: []corev1.Container{{Name: "clusterd", Image: "clusterd"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e, owner, d, exit, _ := kubeStandIn(t, cp, nil, time.Minute)
		waitFor(t, exit, func() bool {
			_, err := admin.CoreV1().Pods(e.ns()).Get(ctx, stale, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, "the clusterd pod of an older template deleted")
		// The operator's bootstrap flags: mz_catalog_server (s2) and
		// quickstart (u1), one replica each; the other builtins at 0.
		want := []string{"mz" + e.id + "-cluster-s2-replica-s1-gen-1", "mz" + e.id + "-cluster-u1-replica-u1-gen-1"}
		for _, name := range want {
			waitFor(t, exit, func() bool {
				_, err := admin.CoreV1().Services(e.ns()).Get(ctx, name, metav1.GetOptions{})
				_, stsErr := admin.AppsV1().StatefulSets(e.ns()).Get(ctx, name, metav1.GetOptions{})
				return err == nil && stsErr == nil
			}, "Service and StatefulSet "+name)
			sts, err := admin.AppsV1().StatefulSets(e.ns()).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if refs := sts.OwnerReferences; len(refs) != 1 || refs[0].UID != owner {
				t.Errorf("%s owners %v, want the generation's StatefulSet %s", name, refs, owner)
			}
			pod := sts.Spec.Template.Spec
			if pod.DeprecatedServiceAccount != "prod" || pod.SecurityContext.FSGroup == nil || *pod.SecurityContext.FSGroup != 999 {
				t.Errorf("%s: service account %q, fs group %v", name, pod.DeprecatedServiceAccount, pod.SecurityContext.FSGroup)
			}
			// environmentd's scheduling, accepted by the API server; the
			// operator turns the zone spread off outside the clouds (a
			// node without a zone label would take no clusterd).
			if a := pod.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
				t.Errorf("%s: affinity %+v, want environmentd's anti-affinity between the cluster's replicas", name, pod.Affinity)
			}
			if len(pod.TopologySpreadConstraints) != 0 {
				t.Errorf("%s: topology spread %+v outside the clouds", name, pod.TopologySpreadConstraints)
			}
			if got := pod.Containers[0].Image; got != "materialize/clusterd:v26.35.0" {
				t.Errorf("%s: image %s", name, got)
			}
			if sts.Spec.Selector.MatchLabels["materialize.cloud/mz-resource-id"] != e.id {
				t.Errorf("%s: selector %v lacks the service labels", name, sts.Spec.Selector.MatchLabels)
			}
			// clusterd (its stand-in, with clusterd's own clap table)
			// accepts the command line environmentd gives it, in its pod.
			inPod := func(k string) (string, bool) {
				switch k {
				case "KUBERNETES_SERVICE_HOST":
					return "10.96.0.1", true
				case "HOSTNAME":
					return name + "-0", true
				}
				return "", false
			}
			cd, err := clusterd.Check(imageref.MustParseVersion("26.35.0"), pod.Containers[0].Args, inPod)
			if err != nil {
				t.Errorf("%s: clusterd refuses its command line: %v\n%q", name, err, pod.Containers[0].Args)
			} else if cd.Process != 0 || cd.ComputeCtl != "0.0.0.0:2101" || cd.EnvironmentID == "" {
				t.Errorf("%s: clusterd plan %+v", name, cd)
			}
		}
		if got := d.Status(); got != mzenv.IsLeader {
			t.Errorf("fresh catalog: status %s, want IsLeader", got)
		}
		secrets, err := admin.CoreV1().Secrets(e.ns()).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=standin-catalog"})
		if err != nil || len(secrets.Items) != 1 || string(secrets.Items[0].Data["deploy-generation"]) != "1" {
			t.Errorf("catalog Secrets %v (%v), want one at generation 1", secrets, err)
		}
		list, err := admin.AppsV1().StatefulSets(e.ns()).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 3 {
			t.Errorf("%d StatefulSets (%v), want the generation's and two clusterd", len(list.Items), err)
		}
	})

	t.Run("without the vpcendpoints rule", func(t *testing.T) {
		_, _, _, exit, _ := kubeStandIn(t, cp, func(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
			var kept []rbacv1.PolicyRule
			for _, rule := range rules {
				if rule.Resources[0] != "vpcendpoints" {
					kept = append(kept, rule)
				}
			}
			return kept
		}, time.Second)
		wantFatal(t, exit, "list vpc endpoints", "forbidden")
	})

	// The API server runs OwnerReferencesPermissionEnforcement: the
	// clusterd StatefulSets' blockOwnerDeletion needs this rule.
	t.Run("without the statefulsets/finalizers rule", func(t *testing.T) {
		// The plugin checks owner references as they are added: the
		// clusterd objects an earlier subtest made must go first.
		ns := testEnv(testMaterialize("materialize/environmentd:v26.35.0", v1alpha1.AuthenticatorNone)).ns()
		if err := admin.AppsV1().StatefulSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		services, err := admin.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, svc := range services.Items {
			if err := admin.CoreV1().Services(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		_, _, _, exit, logged := kubeStandIn(t, cp, func(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
			var kept []rbacv1.PolicyRule
			for _, rule := range rules {
				if rule.Resources[0] != "statefulsets/finalizers" {
					kept = append(kept, rule)
				}
			}
			return kept
		}, time.Second)
		// environmentd retries a refused orchestrator call without end.
		waitFor(t, exit, func() bool {
			return logged.contains("cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on")
		}, "the clusterd objects refused")
	})

	t.Run("without the VpcEndpoint CRD", func(t *testing.T) {
		ext := apiextensionsclient.NewForConfigOrDie(cp.Config)
		crds := ext.ApiextensionsV1().CustomResourceDefinitions()
		if err := crds.Delete(ctx, "vpcendpoints.materialize.cloud", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// A terminating CRD is still served until its instances are gone.
		waitFor(t, nil, func() bool {
			_, err := crds.Get(ctx, "vpcendpoints.materialize.cloud", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, "the VpcEndpoint CRD deleted")
		_, _, _, exit, _ := kubeStandIn(t, cp, nil, time.Second)
		wantFatal(t, exit, "list vpc endpoints", "the server could not find the requested resource")
	})
}

// waitForAuthorizer waits until the API server's RBAC authorizer, which
// reads roles from its own informer, answers for environmentd's
// ServiceAccount as rules say: the ClusterRole an earlier subtest wrote
// under the same name must not still grant a rule removed since, nor a
// role not seen yet refuse a kept one.
func waitForAuthorizer(t *testing.T, admin kubernetes.Interface, e env, rules []rbacv1.PolicyRule) {
	t.Helper()
	user := "system:serviceaccount:" + e.ns() + ":" + e.serviceAccountName()
	granted := func(group, resource, verb string) bool {
		for _, r := range rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for _, rule := range EnvironmentdRules() {
		for _, resource := range rule.Resources {
			group, verb := rule.APIGroups[0], rule.Verbs[0]
			name, sub, _ := strings.Cut(resource, "/")
			want := granted(group, resource, verb)
			waitFor(t, nil, func() bool {
				review, err := admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
					Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"},
						ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: e.ns(), Group: group, Resource: name, Subresource: sub, Verb: verb}},
				}, metav1.CreateOptions{})
				return err == nil && review.Status.Allowed == want
			}, fmt.Sprintf("the authorizer to answer %v for %s %s/%s", want, verb, group, resource))
		}
	}
}

func waitFor(t *testing.T, exit <-chan error, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-exit:
			t.Fatalf("stand-in exited waiting for %s: %v", what, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s", what)
		}
	}
}

func wantFatal(t *testing.T, exit <-chan error, contains ...string) {
	t.Helper()
	select {
	case err := <-exit:
		var e *standin.ExitError
		if !errors.As(err, &e) || e.Code != standin.ExitPanic {
			t.Fatalf("exit %v, want environmentd's fatal exit", err)
		}
		for _, c := range contains {
			if !strings.Contains(e.Message, c) {
				t.Errorf("exit %q does not say %q", e.Message, c)
			}
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the stand-in did not fail")
	}
}

// standinLog sends the stand-in's log to the test's, and keeps it.
type standinLog struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
}

func (w *standinLog) Write(b []byte) (int, error) {
	line := strings.TrimSpace(string(b))
	w.t.Log(line)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, line)
	return len(b), nil
}

func (w *standinLog) contains(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.lines, func(l string) bool { return strings.Contains(l, s) })
}
