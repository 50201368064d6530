package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/certificates"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
	"github.com/materializeinc/orchestratord/pkg/crds"
	"github.com/materializeinc/orchestratord/pkg/servingcert"
	"github.com/materializeinc/orchestratord/test/audit"
	"github.com/materializeinc/orchestratord/test/fixture"
	"github.com/materializeinc/orchestratord/test/program"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
	"github.com/materializeinc/orchestratord/test/upstream"
)

func writeKubeconfig(t *testing.T, token string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cp.Config.Host, CertificateAuthorityData: cp.CABundle}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "sa"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func buildBinary(t *testing.T, pkg string) string {
	t.Helper()
	dir := t.TempDir()
	if err := program.Build(dir, pkg); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, filepath.Base(pkg))
}

// startProcess runs bin until the test ends, or until the returned stop,
// which sends SIGTERM and waits for the exit (so a program that releases
// what it holds on SIGTERM has done so when stop returns).
func startProcess(t *testing.T, bin string, args ...string) (stop func()) {
	t.Helper()
	return startProcessEnv(t, nil, bin, args...)
}

// startProcessEnv is startProcess with env added to the test's environment.
func startProcessEnv(t *testing.T, env []string, bin string, args ...string) (stop func()) {
	t.Helper()
	log, err := os.CreateTemp(t.TempDir(), filepath.Base(bin)+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop = sync.OnceFunc(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			raw, err := os.ReadFile(log.Name())
			t.Logf("%s log (%v):\n%s", filepath.Base(bin), err, tail(string(raw), 40))
		}
	})
	t.Cleanup(stop)
	return stop
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := program.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// unexercised are, per component, the grants of the chart that the test's
// run of the programs cannot be relied on to use, each with why it is
// granted anyway. Everything else granted to the webhook's or the
// controllers' ServiceAccount must be used by the run, or the test fails: a
// grant no code path needs is removed, not listed here. An entry the chart
// does not grant fails the test too.
var unexercised = map[string]map[string]string{
	"webhook": {},
	"controllers": {
		// recent.Current: a child the controller wrote in an earlier
		// reconcile that its informer has not delivered yet is read back
		// from the API server (it may have been deleted since). Whether a
		// reconcile runs in that window depends on timing. Without the
		// grant such a reconcile fails and is retried.
		"|services|get":                              "read-your-writes of a Service the cache has not seen yet (recent.Current)",
		"networking.k8s.io|networkpolicies|get":      "read-your-writes of a NetworkPolicy the cache has not seen yet (recent.Current)",
		"apps|statefulsets|get":                      "read-your-writes of environmentd's StatefulSet the cache has not seen yet (recent.Current)",
		"|serviceaccounts|get":                       "read-your-writes of environmentd's ServiceAccount the cache has not seen yet (recent.Current)",
		"rbac.authorization.k8s.io|rolebindings|get": "read-your-writes of environmentd's RoleBinding the cache has not seen yet (recent.Current)",
		// A Balancer or Console the materialize reconciler applies names its
		// resource id in its spec, which is recorded with its first Ready
		// condition; one a user creates without spec.resourceId has a random
		// id assigned on a fresh read (component.Owner.ResourceID).
		"materialize.cloud|balancers|get": "assigning a resource id to a Balancer created without spec.resourceId",
		"materialize.cloud|consoles|get":  "assigning a resource id to a Console created without spec.resourceId",
		// client-go's event recorder sends an Event repeated within its
		// correlator's window as a patch of the first one's count; which
		// Events repeat in a run depends on timing.
		"|events|patch": "a repeated Event (client-go's event correlator)",
		// This run is one process outside a pod: no Lease names a holder
		// pod for a standby to watch. pkg/leaderelection's crash-failover
		// tests make these calls against a real API server.
		// A rollout's pods are read only once it has waited 20 s, which
		// this run's rollouts do not (pkg/controllers/materialize's
		// TestStuckRolloutSaysWhy reads them against a real API server).
		"|pods|list":  "a standby watching the Lease holder's pod (crash failover); a rollout that waits reading its pods",
		"|pods|watch": "a standby watching the Lease holder's pod (crash failover)",
	},
}

// calls are the (verb, API group, resource[/subresource]) triples an
// identity was authorized for, as "group|resource|verb", and the requests
// RBAC refused.
type calls struct {
	used      map[string]bool
	forbidden []audit.Event
}

// callsOf reads the audit log for user's requests. Every response but 403
// means RBAC allowed the request (a 404 Get or a 409 Create was
// authorized). A server-side apply that created its object (201) was also
// authorized as create.
func callsOf(t *testing.T, user string) calls {
	t.Helper()
	events, err := cp.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	c := calls{used: map[string]bool{}}
	for _, ev := range events {
		if ev.User.Username != user || ev.ObjectRef == nil || ev.ResponseStatus == nil {
			continue
		}
		if ev.ResponseStatus.Code == 403 {
			c.forbidden = append(c.forbidden, ev)
			continue
		}
		resource := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			resource += "/" + ev.ObjectRef.Subresource
		}
		c.used[ev.ObjectRef.APIGroup+"|"+resource+"|"+ev.Verb] = true
		if ev.Verb == "patch" && ev.ResponseStatus.Code == 201 {
			c.used[ev.ObjectRef.APIGroup+"|"+resource+"|create"] = true
		}
	}
	return c
}

// grantsTo lists, as "group|resource|verb", what the rendered RBAC grants
// a ServiceAccount: the rules of every (Cluster)Role a rendered
// (Cluster)RoleBinding binds it to.
func grantsTo(t *testing.T, objs []*unstructured.Unstructured, namespace, serviceAccount string) map[string]bool {
	t.Helper()
	roles := map[string]*unstructured.Unstructured{}
	for _, obj := range objs {
		if obj.GetKind() == "ClusterRole" || obj.GetKind() == "Role" {
			roles[obj.GetKind()+"/"+obj.GetNamespace()+"/"+obj.GetName()] = obj
		}
	}
	granted := map[string]bool{}
	for _, obj := range objs {
		if obj.GetKind() != "ClusterRoleBinding" && obj.GetKind() != "RoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &b); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == serviceAccount && s.Namespace == namespace
		}) {
			continue
		}
		ns := ""
		if b.RoleRef.Kind == "Role" {
			ns = obj.GetNamespace()
		}
		role := roles[b.RoleRef.Kind+"/"+ns+"/"+b.RoleRef.Name]
		if role == nil {
			t.Fatalf("%s %s binds %s %s, which the chart does not render", obj.GetKind(), obj.GetName(), b.RoleRef.Kind, b.RoleRef.Name)
		}
		var r rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(role.Object, &r); err != nil {
			t.Fatal(err)
		}
		for _, rule := range r.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						granted[g+"|"+res+"|"+v] = true
					}
				}
			}
		}
	}
	return granted
}

// checkCalls fails the test on a request RBAC refused, and on a grant no
// request used (derived adds uses that are no request of their own).
func checkCalls(t *testing.T, component string, objs []*unstructured.Unstructured, namespace, serviceAccount string, derived map[string]bool) {
	t.Helper()
	c := callsOf(t, "system:serviceaccount:"+namespace+":"+serviceAccount)
	if len(c.used) == 0 {
		t.Fatalf("%s: no request by its ServiceAccount in the audit log", component)
	}
	for _, ev := range c.forbidden {
		t.Errorf("%s: forbidden by the chart's RBAC: %s", component, ev)
	}
	for k := range derived {
		c.used[k] = true
	}
	granted := grantsTo(t, objs, namespace, serviceAccount)
	var unused, excused []string
	for g := range granted {
		if c.used[g] {
			continue
		}
		if why, ok := unexercised[component][g]; ok {
			excused = append(excused, g+": "+why)
			continue
		}
		unused = append(unused, g)
	}
	for g := range unexercised[component] {
		if !granted[g] {
			t.Errorf("%s: unexercised lists %s, which the chart does not grant: remove the entry", component, g)
		}
	}
	sort.Strings(unused)
	sort.Strings(excused)
	if len(unused) > 0 {
		t.Errorf("%s: the chart grants what no call of the run used (group|resource|verb); remove the grant, or if a code path needs it, exercise it or list it in unexercised with why:\n  %s",
			component, strings.Join(unused, "\n  "))
	}
	if len(excused) > 0 {
		t.Logf("%s: granted, not used by this run, listed in unexercised:\n  %s", component, strings.Join(excused, "\n  "))
	}
	var used []string
	for u := range c.used {
		used = append(used, u)
		if !granted[u] {
			t.Errorf("%s: %s was allowed but the chart does not grant it to its ServiceAccount (another grant?)", component, u)
		}
	}
	sort.Strings(used)
	t.Logf("%s: used %d grants:\n  %s", component, len(used), strings.Join(used, "\n  "))
}

// The chart's own ServiceAccounts, with the chart's RBAC and nothing else,
// run the operator through the whole life of a Materialize, under the
// API server's OwnerReferencesPermissionEnforcement; the audit log then
// holds every call each made. No call may be forbidden, and every grant of
// the chart to the webhook (self-signed mode) and to the controllers must
// have been used, but the few listed in unexercised: the chart's RBAC is
// exactly what the programs do. The webhook creates its CA, rotates it and
// writes the caBundle. The controllers, in three runs: create the
// environment with every network policy and certificate, roll out a
// second generation (deleting the first) and apply the Balancer and
// Console; with the policies off, delete them and replace a console
// Deployment's older selector; with balancers and consoles off, delete
// them; release upstream's finalizer when the Materialize is deleted.
func TestChartRBACIsEnough(t *testing.T) {
	const release, tenant = "rbac", "tenant"
	restrictedNamespace(t, release)
	objs := render(t, release)
	applyAll(t, objs)
	ctx := context.Background()
	if err := cp.InstallCertificateCRD(ctx); err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	mz := versioned.NewForConfigOrDie(cp.Config)

	webhookBin := buildBinary(t, "cmd/webhook")
	controllersBin := buildBinary(t, "cmd/controllers")
	env := standin.New()
	env.AutoAdvance = true
	if _, err := env.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer env.Close()

	// The webhook. Without kube-proxy the API server reaches it by URL; the
	// caBundle is the webhook's to write.
	https := freeAddr(t)
	patch, _ := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/conversion/webhook/clientConfig",
		"value": map[string]any{"url": "https://" + https + "/convert"}}})
	ext := apiextensionsclient.NewForConfigOrDie(cp.Config)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crds.MaterializeCRDName, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	startProcess(t, webhookBin, "--kubeconfig="+serviceAccountKubeconfig(t, release, "orchestratord-webhook"),
		"--namespace="+release, "--service-name=orchestratord-webhook", "--tls-san=127.0.0.1", "--cert-resync-period=1s",
		"--listen-address="+https, "--health-address="+freeAddr(t), "--metrics-address="+freeAddr(t), "--shutdown-drain=0s")
	caPublished := func(what string) *corev1.Secret {
		t.Helper()
		var secret *corev1.Secret
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			if secret, err = kube.CoreV1().Secrets(release).Get(ctx, "orchestratord-webhook-ca", metav1.GetOptions{}); err != nil {
				return false, nil
			}
			crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crds.MaterializeCRDName, metav1.GetOptions{})
			return err == nil && len(secret.Data["ca.crt"]) > 0 && string(crd.Spec.Conversion.Webhook.ClientConfig.CABundle) == string(secret.Data["ca.crt"]), nil
		}); err != nil {
			t.Fatalf("the webhook, with the chart's RBAC, did not %s: %v", what, err)
		}
		return secret
	}
	secret := caPublished("create its CA and patch the caBundle")
	// A CA near its expiry is rotated: the webhook updates the Secret.
	old, err := servingcert.NewCA("near-expiry", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{servingcert.SecretKeyCert: old.CertPEM, servingcert.SecretKeyKey: old.KeyPEM, servingcert.SecretKeyBundle: old.CertPEM}
	if _, err := kube.CoreV1().Secrets(release).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := kube.CoreV1().Secrets(release).Get(ctx, "orchestratord-webhook-ca", metav1.GetOptions{})
		return err == nil && string(s.Data[servingcert.SecretKeyPreviousCert]) == string(old.CertPEM), nil
	}); err != nil {
		t.Fatalf("the webhook, with the chart's RBAC, did not rotate a CA near its expiry: %v", err)
	}
	caPublished("publish the rotated CA")

	// The tenant. No nodes run pods: environmentd's StatefulSets report
	// ready, balancerd's and the console's Deployments rolled out.
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fixture.KeepStatefulSetsReady(t, kube, tenant)
	keepDeploymentsRolledOut(t, kube, tenant)
	if _, err := kube.CoreV1().Secrets(tenant).Create(ctx, fixture.BackendSecret(tenant, "backend"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(tenant).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "system-params"},
		Data: map[string]string{materialize.SystemParamsFile: "{}"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The controllers, as the chart runs them, plus the test's addresses.
	rendered := containerArgs(t, find(objs, "Deployment", "orchestratord-controllers"))
	clusterRole := oneFlag(t, rendered, "environmentd-cluster-role")
	kubeconfig := serviceAccountKubeconfig(t, release, "orchestratord-controllers")
	issuer := `{"issuerRef":{"name":"ca","kind":"ClusterIssuer"}}`
	runControllers := func(environ []string, extra ...string) (stop func()) {
		args := append(slices.Clone(rendered), "--kubeconfig="+kubeconfig, "--leader-election-identity=rbac-test",
			"--health-address="+freeAddr(t), "--metrics-address="+freeAddr(t),
			"--environmentd-url-template="+env.URL()+"/mz{{.ResourceID}}-environmentd-{{.Generation}}", "--environmentd-poll-interval=100ms",
			"--default-certificate-specs={\"internal\":"+issuer+",\"balancerdExternal\":"+issuer+",\"consoleExternal\":"+issuer+"}")
		return startProcessEnv(t, environ, controllersBin, append(args, extra...)...)
	}
	// waitUntil fails at once when the controllers were refused a call:
	// they would retry it until the wait times out.
	waitUntil := func(what string, cond func(ctx context.Context) (bool, error)) {
		t.Helper()
		polls := 0
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			if polls++; polls%10 == 0 {
				if refused := callsOf(t, "system:serviceaccount:"+release+":orchestratord-controllers").forbidden; len(refused) > 0 {
					return false, fmt.Errorf("forbidden by the chart's RBAC: %s", refused[0])
				}
			}
			ok, err := cond(ctx)
			return ok && err == nil, nil
		}); err != nil {
			t.Fatalf("the controllers, with the chart's RBAC: %s: %v", what, err)
		}
	}
	rolledOut := func(gen uint64) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			got, err := mz.MaterializeV1().Materializes(tenant).Get(ctx, "mz", metav1.GetOptions{}) // through the webhook
			if err != nil {
				return false, err
			}
			c := meta.FindStatusCondition(got.Status.Conditions, "UpToDate")
			return c != nil && c.Status == metav1.ConditionTrue && got.Status.ActiveGeneration == gen, nil
		}
	}
	count := func(ctx context.Context, gvr schema.GroupVersionResource) int {
		list, err := dynamic.NewForConfigOrDie(cp.Config).Resource(gvr).Namespace(tenant).List(ctx, metav1.ListOptions{})
		if err != nil {
			return -1
		}
		return len(list.Items)
	}
	policies := schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}

	// 1. Every policy and certificate; two generations; Balancer, Console.
	stop := runControllers(nil, "--network-policies-internal-enabled", "--network-policies-ingress-enabled",
		"--network-policies-ingress-cidrs=10.0.0.0/8", "--network-policies-egress-enabled", "--network-policies-egress-cidrs=0.0.0.0/0")
	m := &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "mz", Namespace: tenant, Finalizers: []string{upstream.Finalizer}},
		Spec: v1alpha1.MaterializeSpec{EnvironmentdImageRef: "materialize/environmentd:v26.1.0", BackendSecretName: "backend",
			SystemParameterConfigmapName: "system-params"},
	}
	if _, err := mz.MaterializeV1alpha1().Materializes(tenant).Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil("generation 1 rolled out", rolledOut(1))
	var id string
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := mz.MaterializeV1alpha1().Materializes(tenant).Get(ctx, "mz", metav1.GetOptions{})
		if err != nil {
			return err
		}
		id = live.Status.ResourceID
		live.Spec.EnvironmentdImageRef = "materialize/environmentd:v26.2.0"
		live.Spec.RequestRollout = uuid.NewString()
		_, err = mz.MaterializeV1alpha1().Materializes(tenant).Update(ctx, live, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitUntil("generation 2 rolled out, generation 1 deleted", func(ctx context.Context) (bool, error) {
		if ok, err := rolledOut(2)(ctx); !ok || err != nil {
			return false, err
		}
		_, err := kube.AppsV1().StatefulSets(tenant).Get(ctx, "mz"+id+"-environmentd-1", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	waitUntil("Balancer, Console, every policy and certificate", func(ctx context.Context) (bool, error) {
		deps, err := kube.AppsV1().Deployments(tenant).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		// environmentd's 4 policies and the console's; 3 certificates.
		return len(deps.Items) == 2 && count(ctx, policies) == 5 && count(ctx, certificates.GVR) == 3, nil
	})
	checkEnvironmentdBinding(t, kube, tenant, "mz", "mz"+id+"-environmentd", clusterRole)
	stop()

	// 2. Policies off: deleted. A console Deployment with an older
	// selector (as an earlier upstream left it) is replaced.
	consoleDeployment := "mz" + id + "-console"
	olderSelector(t, kube, tenant, consoleDeployment)
	stop = runControllers(nil)
	waitUntil("the Materialize's policies deleted, the console's selector replaced", func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(tenant).Get(ctx, consoleDeployment, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return count(ctx, policies) == 1 && len(d.Spec.Selector.MatchLabels) > 1 && d.Labels["older-selector"] == "", nil
	})
	stop()

	// 3. Balancers and consoles off: deleted. Then the Materialize, with
	// upstream's finalizer (no garbage collector runs here: its children
	// stay). This run's informers start with a LIST, as client-go's do on
	// an API server without streaming watch-lists (runs 1 and 2 started
	// with a watch that sends the initial list, authorized as watch).
	stop = runControllers([]string{"KUBE_FEATURE_WatchListClient=false"}, "--create-balancers=false", "--create-consoles=false")
	waitUntil("the Balancer and the Console deleted", func(ctx context.Context) (bool, error) {
		b, errB := mz.MaterializeV1alpha1().Balancers(tenant).List(ctx, metav1.ListOptions{})
		c, errC := mz.MaterializeV1alpha1().Consoles(tenant).List(ctx, metav1.ListOptions{})
		return errB == nil && errC == nil && len(b.Items) == 0 && len(c.Items) == 0, nil
	})
	if err := mz.MaterializeV1alpha1().Materializes(tenant).Delete(ctx, "mz", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil("upstream's finalizer released", func(ctx context.Context) (bool, error) {
		_, err := mz.MaterializeV1alpha1().Materializes(tenant).Get(ctx, "mz", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	stop() // releases the Leases, deletes the presence Lease

	checkCalls(t, "webhook", objs, release, "orchestratord-webhook", nil)
	checkCalls(t, "controllers", objs, release, "orchestratord-controllers", writtenWithOwners(t, tenant, clusterRole))
}

func containerArgs(t *testing.T, dep *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	var out []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// keepDeploymentsRolledOut stands in for the deployment controller: every
// Deployment in namespace reports its replicas updated and available for
// its current generation (what a selector replacement waits for). It also
// stands in for the garbage collector's part in a delete that orphans
// (component.FixSelector's): it removes the orphan finalizer.
func keepDeploymentsRolledOut(t *testing.T, kube kubernetes.Interface, namespace string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := kube.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
			for i := 0; err == nil && i < len(list.Items); i++ {
				d := &list.Items[i]
				if d.DeletionTimestamp != nil && slices.Contains(d.Finalizers, metav1.FinalizerOrphanDependents) {
					d.Finalizers = slices.DeleteFunc(d.Finalizers, func(f string) bool { return f == metav1.FinalizerOrphanDependents })
					_, _ = kube.AppsV1().Deployments(namespace).Update(ctx, d, metav1.UpdateOptions{})
					continue
				}
				n := int32(1)
				if d.Spec.Replicas != nil {
					n = *d.Spec.Replicas
				}
				if s := d.Status; s.ObservedGeneration == d.Generation && s.UpdatedReplicas == n && s.AvailableReplicas == n {
					continue
				}
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
					Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
						Reason: "MinimumReplicasAvailable", Message: "set by the test", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
				_, _ = kube.AppsV1().Deployments(namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// olderSelector replaces a Deployment by one as an earlier operator made
// it: a selector of one label (its pods' labels include it) and a pod
// template lacking one of today's labels, owned as before.
func olderSelector(t *testing.T, kube kubernetes.Interface, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	deployments := kube.AppsV1().Deployments(namespace)
	live, err := deployments.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// It has no ReplicaSets here (no deployment controller runs).
	if err := deployments.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := deployments.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal(err)
	}
	const kept = "materialize.cloud/mz-resource-id"
	older := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, OwnerReferences: live.OwnerReferences,
			Labels: map[string]string{kept: live.Labels[kept], "older-selector": "true"}},
		Spec: *live.Spec.DeepCopy(),
	}
	older.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{kept: live.Spec.Template.Labels[kept]}}
	for k := range older.Spec.Template.Labels {
		if k != kept && live.Spec.Selector.MatchLabels[k] != "" {
			delete(older.Spec.Template.Labels, k) // today's template differs: relabelled first
			break
		}
	}
	if _, err := deployments.Create(ctx, older, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkEnvironmentdBinding checks that environmentd's ServiceAccount may do
// in its namespace, by the controllers' RoleBinding, exactly what the
// chart's ClusterRole says, and nothing in another namespace.
func checkEnvironmentdBinding(t *testing.T, kube kubernetes.Interface, namespace, serviceAccount, binding, clusterRole string) {
	t.Helper()
	ctx := context.Background()
	rb, err := kube.RbacV1().RoleBindings(namespace).Get(ctx, binding, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the controllers' RoleBinding of environmentd: %v", err)
	}
	if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != clusterRole {
		t.Errorf("RoleBinding %s refers to %+v, want the ClusterRole %s", binding, rb.RoleRef, clusterRole)
	}
	allowed := func(ns, group, resource, verb string) bool {
		return serviceAccountMay(t, kube, namespace, serviceAccount, ns, group, resource, verb)
	}
	for _, rule := range materialize.EnvironmentdRules() {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					if !allowed(namespace, g, res, v) {
						t.Errorf("environmentd may not %s %s/%s in its namespace", v, g, res)
					}
					if allowed("default", g, res, v) {
						t.Errorf("environmentd may %s %s/%s outside its namespace", v, g, res)
					}
				}
			}
		}
	}
	if allowed(namespace, "", "configmaps", "list") || allowed(namespace, "rbac.authorization.k8s.io", "rolebindings", "create") {
		t.Errorf("environmentd may do more than the ClusterRole says")
	}
}

// serviceAccountMay asks RBAC (a SubjectAccessReview) whether a
// ServiceAccount may verb resource[/subresource] of group in namespace ns.
func serviceAccountMay(t *testing.T, kube kubernetes.Interface, accountNamespace, account, ns, group, resource, verb string) bool {
	t.Helper()
	subresource := ""
	if r, sub, ok := strings.Cut(resource, "/"); ok {
		resource, subresource = r, sub
	}
	review, err := kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + accountNamespace + ":" + account,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + accountNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Group: group, Resource: resource, Subresource: subresource, Verb: verb}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return review.Status.Allowed
}

// controllers.secretNamespaces: the controllers' token reads Secrets in
// those namespaces only, by name, and the rest of their grants stay
// cluster-wide. By default it reads them in every namespace.
func TestSecretNamespacesConfineTheControllersSecretReads(t *testing.T) {
	const release, tenant, other = "secret-reads", "secret-reads-tenant", "secret-reads-other"
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	restrictedNamespace(t, release)
	for _, ns := range []string{tenant, other} {
		if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	may := func(ns, resource, verb string) bool {
		return serviceAccountMay(t, kube, release, "orchestratord-controllers", ns, "", resource, verb)
	}
	// Only the RBAC: the CRDs are shared with the other tests, which point
	// the conversion webhook elsewhere.
	rbacOf := func(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
		return slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool {
			return o.GroupVersionKind().Group != rbacv1.GroupName
		})
	}
	applyAll(t, rbacOf(render(t, release)))
	for _, ns := range []string{tenant, other, release} {
		if !may(ns, "secrets", "get") {
			t.Errorf("by default, the controllers may not get Secrets in %s", ns)
		}
	}
	// Upgraded in place, as helm upgrade would: the ClusterRole's rule goes.
	applyAll(t, rbacOf(render(t, release, "--set-json", `controllers.secretNamespaces=["`+tenant+`"]`)))
	if !may(tenant, "secrets", "get") {
		t.Errorf("the controllers may not get Secrets in %s, which controllers.secretNamespaces names", tenant)
	}
	for _, ns := range []string{other, release} {
		if may(ns, "secrets", "get") {
			t.Errorf("the controllers may get Secrets in %s, which controllers.secretNamespaces leaves out", ns)
		}
	}
	for _, verb := range []string{"list", "watch"} {
		if may(tenant, "secrets", verb) {
			t.Errorf("the controllers may %s Secrets in %s", verb, tenant)
		}
	}
	if !may(other, "services", "create") {
		t.Error("the controllers' other grants no longer reach every namespace")
	}
}

// writtenWithOwners are the grants the controllers used without a request
// of their own, shown by what they wrote in namespace: update on an owner
// kind's finalizers, which OwnerReferencesPermissionEnforcement requires
// of a write setting blockOwnerDeletion on an owner reference to that kind,
// and bind on environmentd's ClusterRole, which RBAC requires of a write of
// a RoleBinding to it.
func writtenWithOwners(t *testing.T, namespace, clusterRole string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	derived := map[string]bool{}
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "apps", Version: "v1", Resource: "statefulsets"}, {Group: "apps", Version: "v1", Resource: "deployments"},
		{Version: "v1", Resource: "services"}, {Version: "v1", Resource: "configmaps"}, {Version: "v1", Resource: "serviceaccounts"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, certificates.GVR,
	} {
		list, err := dyn.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range list.Items {
			if !slices.ContainsFunc(obj.GetManagedFields(), func(f metav1.ManagedFieldsEntry) bool { return f.Manager == apply.FieldManager }) {
				continue
			}
			for _, ref := range obj.GetOwnerReferences() {
				if ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion && strings.HasPrefix(ref.APIVersion, "materialize.cloud/") {
					derived["materialize.cloud|"+strings.ToLower(ref.Kind)+"s/finalizers|update"] = true
				}
			}
			if ref, _, _ := unstructured.NestedStringMap(obj.Object, "roleRef"); gvr.Resource == "rolebindings" &&
				ref["kind"] == "ClusterRole" && ref["name"] == clusterRole {
				derived["rbac.authorization.k8s.io|clusterroles|bind"] = true
			}
		}
	}
	return derived
}

// environmentd's ClusterRole is materialize.EnvironmentdRules (upstream's
// Role rules plus statefulsets/finalizers), the controllers are told its
// name, and they may bind it and no other.
func TestEnvironmentdClusterRole(t *testing.T) {
	objs := render(t, "ops")
	name := oneFlag(t, containerArgs(t, find(objs, "Deployment", "orchestratord-controllers")), "environmentd-cluster-role")
	if name != materialize.DefaultEnvironmentdClusterRole {
		t.Errorf("--environmentd-cluster-role=%s, want %s (the binary's default, the default release name's)", name, materialize.DefaultEnvironmentdClusterRole)
	}
	role := find(objs, "ClusterRole", name)
	if role == nil {
		t.Fatalf("no ClusterRole %s", name)
	}
	var r rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(role.Object, &r); err != nil {
		t.Fatal(err)
	}
	if want := materialize.EnvironmentdRules(); !reflect.DeepEqual(r.Rules, want) {
		t.Errorf("ClusterRole %s rules:\n got %+v\nwant %+v (materialize.EnvironmentdRules)", name, r.Rules, want)
	}
	for _, obj := range objs {
		if obj.GetKind() == "ClusterRoleBinding" || obj.GetKind() == "RoleBinding" {
			if ref, _, _ := unstructured.NestedString(obj.Object, "roleRef", "name"); ref == name {
				t.Errorf("%s %s binds environmentd's ClusterRole: only the controllers bind it, per environment", obj.GetKind(), obj.GetName())
			}
		}
	}
	var controllers rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "ClusterRole", "orchestratord-controllers").Object, &controllers); err != nil {
		t.Fatal(err)
	}
	var binds []rbacv1.PolicyRule
	for _, rule := range controllers.Rules {
		if slices.Contains(rule.Verbs, "bind") || slices.Contains(rule.Verbs, "escalate") || slices.Contains(rule.Verbs, "*") ||
			slices.Contains(rule.Resources, "roles") || slices.Contains(rule.Resources, "clusterroles") {
			binds = append(binds, rule)
		}
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"},
		ResourceNames: []string{name}, Verbs: []string{"bind"}}}
	if !reflect.DeepEqual(binds, want) {
		t.Errorf("the controllers' rules on roles: %+v, want only bind on %s", binds, name)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
