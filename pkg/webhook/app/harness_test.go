package app_test

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/crds"
	"github.com/materializeinc/orchestratord/test/controlplane"
	"github.com/materializeinc/orchestratord/test/program"
)

var (
	cp         *controlplane.ControlPlane
	webhookBin string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "webhook-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	webhookBin = filepath.Join(dir, "webhook")
	if err := program.Build(dir, "cmd/webhook"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cp, err = controlplane.Start(context.Background(), controlplane.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cp.Stop()
	return m.Run()
}

// webhookProcess is one running webhook binary.
type webhookProcess struct {
	cmd                    *exec.Cmd
	https, health, metrics string
	log                    string
	exited                 chan struct{}
	exitErr                error
}

func freePort(t testing.TB) string {
	t.Helper()
	addr, err := program.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func newNamespace(t testing.TB) string {
	t.Helper()
	ns, err := kubernetes.NewForConfigOrDie(cp.Config).CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "webhook-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// startWebhook runs the binary and waits until it is ready. A port taken
// between picking it and the bind (tests of other packages run alongside)
// is picked again.
func startWebhook(t testing.TB, namespace string, extra ...string) *webhookProcess {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, err := launchWebhook(t, namespace, extra...)
		if err == nil {
			return p
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("webhook not ready: %v", err)
		}
	}
}

func launchWebhook(t testing.TB, namespace string, extra ...string) (*webhookProcess, error) {
	t.Helper()
	p := &webhookProcess{https: freePort(t), health: freePort(t), metrics: freePort(t), exited: make(chan struct{})}
	args := append([]string{
		"--kubeconfig=" + cp.KubeconfigPath,
		"--namespace=" + namespace,
		"--tls-san=127.0.0.1",
		"--listen-address=" + p.https,
		"--health-address=" + p.health,
		"--metrics-address=" + p.metrics,
		"--profiling",
		"--shutdown-drain=0s",
		"--cert-resync-period=200ms",
		"--ca-propagation-delay=1s",
	}, extra...)
	logFile, err := os.CreateTemp(t.TempDir(), "webhook-*.log")
	if err != nil {
		t.Fatal(err)
	}
	p.log = logFile.Name()
	p.cmd = exec.Command(webhookBin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exitErr = p.cmd.Wait(); logFile.Close(); close(p.exited) }()
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			raw, _ := os.ReadFile(p.log)
			return false, fmt.Errorf("webhook exited: %v\n%s", p.exitErr, raw)
		default:
		}
		return p.get("/readyz") == http.StatusOK, nil
	})
	if err != nil {
		p.stop(t)
		raw, _ := os.ReadFile(p.log)
		return nil, fmt.Errorf("%w\nwebhook log:\n%s", err, raw)
	}
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			raw, _ := os.ReadFile(p.log)
			t.Logf("webhook log:\n%s", raw)
		}
	})
	return p, nil
}

func (p *webhookProcess) get(path string) int {
	resp, err := http.Get("http://" + p.health + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (p *webhookProcess) stop(t testing.TB) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("webhook did not exit within 30s of SIGTERM")
	}
}

// servingCert returns the certificate the process presents.
func (p *webhookProcess) servingCert(t *testing.T) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", p.https, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // inspecting, not trusting
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// pointCRDAt sends the Materialize CRD's conversions to url, keeping the
// caBundle, in one write so no conversion sees a half-changed config.
func pointCRDAt(t testing.TB, url string) {
	t.Helper()
	clientConfig := map[string]any{"url": url}
	if bundle := crdCABundle(t); len(bundle) > 0 {
		clientConfig["caBundle"] = bundle
	}
	patch, _ := json.Marshal([]map[string]any{{
		"op": "replace", "path": "/spec/conversion/webhook/clientConfig", "value": clientConfig,
	}})
	_, err := apiextensionsclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions().
		Patch(context.Background(), crds.MaterializeCRDName, types.JSONPatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func crdCABundle(t testing.TB) []byte {
	t.Helper()
	crd, err := apiextensionsclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions().
		Get(context.Background(), crds.MaterializeCRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Conversion.Webhook.ClientConfig.CABundle
}

func verifies(bundle []byte, cert *x509.Certificate) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return fmt.Errorf("caBundle holds no certificate")
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"})
	return err
}

// waitConverting creates a probe object and waits until reading it at v1
// (a conversion through the API server) succeeds: the API server must have
// picked up the new clientConfig and caBundle.
func waitConverting(t *testing.T, namespace string) {
	t.Helper()
	mz := versioned.NewForConfigOrDie(cp.Config)
	probe := &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: namespace},
		Spec:       v1alpha1.MaterializeSpec{EnvironmentdImageRef: "mz:probe", BackendSecretName: "s"},
	}
	if _, err := mz.MaterializeV1alpha1().Materializes(namespace).Create(context.Background(), probe, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := mz.MaterializeV1().Materializes(namespace).Get(ctx, "probe", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("conversions never succeeded: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// postReview sends a ConversionReview straight to the process.
func postReview(t *testing.T, p *webhookProcess) int {
	t.Helper()
	body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"1","desiredAPIVersion":"materialize.cloud/v1",
	  "objects":[{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize","metadata":{"name":"x"},"spec":{}}]}}`
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test
	resp, err := client.Post("https://"+p.https+"/convert", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func marshalKey(key crypto.PrivateKey) ([]byte, error) { return x509.MarshalPKCS8PrivateKey(key) }
