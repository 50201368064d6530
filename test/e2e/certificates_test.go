//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/certificates"
)

// TLS as upstream sets it up, with cert-manager's controller (built from its
// Go module, hack/tools/cert-manager) issuing: the Materialize names the
// local CA ClusterIssuer for environmentd's internal and balancerd's and the
// console's external certificates; the operator makes the Certificates,
// cert-manager issues them with the keys asked for, the pods mount them, and
// the stand-ins, which load the certificate as environmentd, balancerd and
// nginx do, serve TLS.
func TestCertManagerCertificatesAreMountedAndServed(t *testing.T) {
	ctx := context.Background()
	ns := contractNamespace(t, nil)
	dyn := dynamicClient(t)
	issuer := &v1alpha1.CertificateIssuerRef{Name: "orchestratord-local-ca", Kind: "ClusterIssuer"}
	clusterIssuers := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "clusterissuers"}
	if _, err := dyn.Resource(clusterIssuers).Get(ctx, issuer.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("cert-manager's ClusterIssuer %s: %v; hack/cluster/run.sh installs it with RUN_CERT_MANAGER=1 (make e2e sets it)", issuer.Name, err)
	}
	mz := &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "mz", Namespace: ns},
		Spec: v1alpha1.MaterializeSpec{
			EnvironmentdImageRef: standinV26_35, BackendSecretName: "backend", EnvironmentdExtraArgs: quickCatchUp,
			BalancerdExternalCertificateSpec: &v1alpha1.MaterializeCertSpec{DNSNames: []string{"balancerd.example.com"}, IssuerRef: issuer},
			ConsoleExternalCertificateSpec: &v1alpha1.MaterializeCertSpec{DNSNames: []string{"console.example.com"}, IssuerRef: issuer,
				PrivateKeyAlgorithm: v1alpha1.PrivateKeyRSA, PrivateKeySize: ptrTo[int64](2048)},
			InternalCertificateSpec: &v1alpha1.MaterializeCertSpec{IssuerRef: issuer},
		},
	}
	if _, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Create(ctx, mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
	id := got.Status.ResourceID
	waitComponentReady(t, ns, "Balancer")
	waitComponentReady(t, ns, "Console")

	for _, want := range []struct {
		name, secret, algorithm string
		size                    int64
		dnsName                 string
	}{
		{"mz" + id + "-balancerd-external", "mz" + id + "-balancerd-external-tls", "ECDSA", 256, "balancerd.example.com"},
		{"mz" + id + "-console-external", "mz" + id + "-console-external-tls", "RSA", 2048, "console.example.com"},
		{"mz" + id + "-environmentd-external", "mz" + id + "-environmentd-tls", "Ed25519", 0, "mz" + id + "-environmentd." + ns + ".svc.cluster.local"},
	} {
		cert, err := dyn.Resource(certificates.GVR).Namespace(ns).Get(ctx, want.name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Certificate %s: %v", want.name, err)
		}
		spec, _ := cert.Object["spec"].(map[string]any)
		key, _ := spec["privateKey"].(map[string]any)
		names, _ := spec["dnsNames"].([]any)
		wantSize := any(want.size)
		if want.size == 0 {
			wantSize = nil
		}
		if spec["secretName"] != want.secret || key["algorithm"] != want.algorithm || fmt.Sprint(key["size"]) != fmt.Sprint(wantSize) ||
			key["encoding"] != "PKCS8" || key["rotationPolicy"] != "Always" || !slices.Contains(names, any(want.dnsName)) {
			t.Errorf("Certificate %s spec %v", want.name, spec)
		}
		if ref, _ := spec["issuerRef"].(map[string]any); ref["name"] != issuer.Name || ref["kind"] != issuer.Kind {
			t.Errorf("Certificate %s issuerRef %v", want.name, spec["issuerRef"])
		}
		// cert-manager issued it, with the key asked for and the names.
		secret, err := c.Kube.CoreV1().Secrets(ns).Get(ctx, want.secret, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Secret %s: %v", want.secret, err)
		}
		block, _ := pem.Decode(secret.Data["tls.crt"])
		if block == nil {
			t.Fatalf("Secret %s has no certificate", want.secret)
		}
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		algorithm := map[x509.PublicKeyAlgorithm]string{x509.ECDSA: "ECDSA", x509.RSA: "RSA", x509.Ed25519: "Ed25519"}[leaf.PublicKeyAlgorithm]
		if algorithm != want.algorithm || !slices.Contains(leaf.DNSNames, want.dnsName) || leaf.Issuer.CommonName != "orchestratord local CA" {
			t.Errorf("Secret %s: %s key, names %v, issuer %s", want.secret, algorithm, leaf.DNSNames, leaf.Issuer.CommonName)
		}
	}

	balancerd := deployment(t, ns, "mz"+id+"-balancerd").Spec.Template.Spec
	if !slices.Contains(balancerd.Containers[0].Args, "--internal-tls") {
		t.Errorf("balancerd args %v lack --internal-tls", balancerd.Containers[0].Args)
	}
	for _, arg := range []string{"--tls-mode=require", "--tls-cert=/etc/external_tls/tls.crt", "--tls-key=/etc/external_tls/tls.key"} {
		if !slices.Contains(balancerd.Containers[0].Args, arg) {
			t.Errorf("balancerd args %v lack %s", balancerd.Containers[0].Args, arg)
		}
	}
	console := deployment(t, ns, "mz"+id+"-console").Spec.Template.Spec
	env := map[string]string{}
	for _, e := range console.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if !strings.HasPrefix(env["MZ_ENDPOINT"], "https://") || !strings.Contains(env["MZ_NGINX_LISTENER_CONFIG"], "ssl_certificate /nginx/tls/tls.crt;") {
		t.Errorf("console env %v: want balancerd over https and an ssl listener", env)
	}
	// The stand-ins loaded the mounted certificates and serve TLS with them:
	// their pods are Ready only if they started. Their logs say so too.
	for _, app := range []string{"balancerd", "console"} {
		pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("%s pods: %v", app, err)
		}
		if log := containerLog(t, ns, pods.Items[0].Name); !strings.Contains(log, `"tls":true`) {
			t.Errorf("%s does not serve TLS: %s", app, log)
		}
	}
	// The console asks balancerd by the names in its certificate.
	cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "mz"+id+"-console", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["app-config.json"], `"balancerd_dns_names":["balancerd.example.com"]`) {
		t.Errorf("app-config.json %s lacks balancerd's DNS names", cm.Data["app-config.json"])
	}
}

func ptrTo[T any](v T) *T { return &v }

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	return dynamic.NewForConfigOrDie(cfg)
}
