package app_test

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/servingcert"
)

// writePair issues a CA and a serving certificate for 127.0.0.1 and writes
// them the way a mounted kubernetes.io/tls Secret looks: replaced atomically.
func writePair(t *testing.T, dir string) *servingcert.CA {
	t.Helper()
	ca, err := servingcert.NewCA("test-ca", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueServing([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := marshalKey(leaf.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		"ca.crt":  ca.CertPEM,
	}
	for name, data := range files {
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return ca
}

func TestSecretModeReloadsFilesAndPublishesCA(t *testing.T) {
	ns := newNamespace(t)
	dir := t.TempDir()
	first := writePair(t, dir)
	hook := startWebhook(t, ns, "--tls-mode=secret",
		"--tls-cert-file="+filepath.Join(dir, "tls.crt"), "--tls-key-file="+filepath.Join(dir, "tls.key"),
		"--tls-ca-file="+filepath.Join(dir, "ca.crt"))
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return string(crdCABundle(t)) == string(first.CertPEM), nil
	})
	if err != nil {
		t.Fatalf("caBundle never became the --tls-ca-file content")
	}
	pointCRDAt(t, "https://"+hook.https+"/convert")
	waitConverting(t, ns)

	second := writePair(t, dir)
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return hook.servingCert(t).Issuer.CommonName == second.Cert.Subject.CommonName &&
			string(crdCABundle(t)) == string(second.CertPEM), nil
	})
	if err != nil {
		t.Fatalf("new files not picked up without a restart: %v", err)
	}
	waitConverting(t, ns)
	if hook.get("/readyz") != 200 {
		t.Error("not ready after the reload")
	}
}

func TestCertManagerModeLeavesCABundleAlone(t *testing.T) {
	ns := newNamespace(t)
	dir := t.TempDir()
	writePair(t, dir)
	before := crdCABundle(t)
	hook := startWebhook(t, ns, "--tls-mode=cert-manager",
		"--tls-cert-file="+filepath.Join(dir, "tls.crt"), "--tls-key-file="+filepath.Join(dir, "tls.key"))
	if hook.get("/readyz") != 200 {
		t.Fatal("not ready")
	}
	time.Sleep(500 * time.Millisecond)
	if string(crdCABundle(t)) != string(before) {
		t.Error("cert-manager mode must leave the caBundle to cert-manager's CA injector")
	}
}

func TestBadConfigurationExitsWithAClearMessage(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"unknown TLS mode":     {[]string{"--tls-mode=magic", "--namespace=x"}, `--tls-mode: "magic" is not one of`},
		"secret mode no files": {[]string{"--tls-mode=secret"}, "needs --tls-cert-file and --tls-key-file"},
		"missing cert file": {[]string{"--tls-mode=cert-manager", "--tls-cert-file=/nonexistent/tls.crt", "--tls-key-file=/nonexistent/tls.key",
			"--listen-address=127.0.0.1:0", "--health-address=127.0.0.1:0", "--metrics-address=127.0.0.1:0"}, "--tls-cert-file: open /nonexistent/tls.crt"},
		"bad env value": {[]string{"--tls-mode=self-signed"}, "ORCHESTRATORD_SHUTDOWN_DRAIN"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(webhookBin, tc.args...)
			cmd.Env = append(os.Environ(), "POD_NAMESPACE=")
			if name == "bad env value" {
				cmd.Env = append(cmd.Env, "ORCHESTRATORD_SHUTDOWN_DRAIN=soon")
			}
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("exited 0; output:\n%s", out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output does not say %q:\n%s", tc.want, out)
			}
		})
	}
}

// In secret mode without --tls-ca-file the webhook never calls the API
// server, so it starts without any client configuration (here: none given,
// and not in a pod). Before, it refused to start.
func TestSecretModeWithoutCAFileNeedsNoCluster(t *testing.T) {
	dir := t.TempDir()
	writePair(t, dir)
	hook := startWebhook(t, "unused", "--kubeconfig=", "--tls-mode=secret",
		"--tls-cert-file="+filepath.Join(dir, "tls.crt"), "--tls-key-file="+filepath.Join(dir, "tls.key"))
	if status := postReview(t, hook); status != http.StatusOK {
		t.Errorf("POST /convert: %d", status)
	}
}
