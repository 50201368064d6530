package chart

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/crds"
	"github.com/materializeinc/orchestratord/test/fixture"
	"github.com/materializeinc/orchestratord/test/program"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
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

func startProcess(t *testing.T, bin string, args ...string) {
	t.Helper()
	log, err := os.CreateTemp(t.TempDir(), filepath.Base(bin)+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			raw, err := os.ReadFile(log.Name())
			t.Logf("%s log (%v):\n%s", filepath.Base(bin), err, tail(string(raw), 40))
		}
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := program.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// The chart's own ServiceAccounts, with the chart's RBAC and nothing else,
// run the operator: the webhook creates its CA and patches the caBundle, the
// controllers complete a rollout. The grants no request used are listed.
func TestChartRBACIsEnough(t *testing.T) {
	const release = "rbac"
	restrictedNamespace(t, release)
	objs := render(t, release)
	applyAll(t, objs)
	ctx := context.Background()

	webhookBin := buildBinary(t, "cmd/webhook")
	controllersBin := buildBinary(t, "cmd/controllers")
	env := standin.New()
	env.AutoAdvance = true
	if _, err := env.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer env.Close()

	// Without kube-proxy the API server reaches the webhook by URL; the
	// caBundle is the webhook's to write.
	https := freeAddr(t)
	patch, _ := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/conversion/webhook/clientConfig",
		"value": map[string]any{"url": "https://" + https + "/convert"}}})
	ext := apiextensionsclient.NewForConfigOrDie(cp.Config)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crds.MaterializeCRDName, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	startProcess(t, webhookBin, "--kubeconfig="+serviceAccountKubeconfig(t, release, "orchestratord-webhook"),
		"--namespace="+release, "--service-name=orchestratord-webhook", "--tls-san=127.0.0.1",
		"--listen-address="+https, "--health-address="+freeAddr(t), "--metrics-address="+freeAddr(t), "--shutdown-drain=0s")
	startProcess(t, controllersBin, "--kubeconfig="+serviceAccountKubeconfig(t, release, "orchestratord-controllers"),
		"--leader-election-namespace="+release, "--leader-election-identity=rbac-test",
		"--health-address="+freeAddr(t), "--metrics-address="+freeAddr(t),
		"--environmentd-url-template="+env.URL()+"/mz{{.ResourceID}}-environmentd-{{.Generation}}", "--environmentd-poll-interval=100ms")

	kube := kubernetes.NewForConfigOrDie(cp.Config)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		secret, err := kube.CoreV1().Secrets(release).Get(ctx, "orchestratord-webhook-ca", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crds.MaterializeCRDName, metav1.GetOptions{})
		return err == nil && len(secret.Data["ca.crt"]) > 0 && string(crd.Spec.Conversion.Webhook.ClientConfig.CABundle) == string(secret.Data["ca.crt"]), nil
	}); err != nil {
		t.Fatalf("the webhook, with the chart's RBAC, did not create its CA and patch the caBundle: %v", err)
	}

	tenant := "tenant"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No nodes run balancerd: its Deployment reports Available as one
	// would, so the Console (which waits for the Balancer) follows.
	fixture.KeepDeploymentsAvailable(t, kube, tenant, "-balancerd")
	fixture.KeepStatefulSetsReady(t, kube, tenant) // and environmentd
	if _, err := kube.CoreV1().Secrets(tenant).Create(ctx, fixture.BackendSecret(tenant, "backend"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mz := versioned.NewForConfigOrDie(cp.Config)
	if _, err := mz.MaterializeV1alpha1().Materializes(tenant).Create(ctx, &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "mz", Namespace: tenant},
		Spec:       v1alpha1.MaterializeSpec{EnvironmentdImageRef: "materialize/environmentd:v26.1.0", BackendSecretName: "backend"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := mz.MaterializeV1().Materializes(tenant).Get(ctx, "mz", metav1.GetOptions{}) // read at v1: through the webhook
		if err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(got.Status.Conditions, "UpToDate")
		if c == nil || c.Status != metav1.ConditionTrue || got.Status.ActiveGeneration != 1 {
			return false, nil
		}
		deps, err := kube.AppsV1().Deployments(tenant).List(ctx, metav1.ListOptions{})
		return err == nil && len(deps.Items) == 2, nil // balancerd and console
	}); err != nil {
		t.Fatalf("the controllers, with the chart's RBAC, did not complete a rollout: %v", err)
	}

	for component, prefix := range map[string]string{"webhook": "orchestratord-webhook", "controllers": "orchestratord-controllers"} {
		used := usedVerbs(t, "system:serviceaccount:"+release+":"+prefix)
		if len(used) == 0 {
			t.Fatalf("no request by the %s ServiceAccount in the audit log", component)
		}
		if unused := unusedGrants(objs, prefix, used); len(unused) > 0 {
			t.Logf("%s: granted but not used by this test (group|resource|verb):\n  %s", component, strings.Join(unused, "\n  "))
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
