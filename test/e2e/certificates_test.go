//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/certificates"
)

// certManagerVersion is the cert-manager whose Certificate CRD (from its Go
// module, deploy/crds) the cluster gets.
const certManagerVersion = "v1.20.3"

// TLS as upstream sets it up: the Materialize names an issuer for
// environmentd's internal and balancerd's and the console's external
// certificates; the operator makes
// cert-manager Certificates (validated by cert-manager's own CRD), mounts
// the Secrets and passes the TLS flags, and the stand-ins, which load the
// certificate as balancerd and nginx do, serve TLS. No cert-manager
// controller runs here (its binary cannot be built from the module proxy):
// the test issues each Certificate's Secret from a test CA, as a CA Issuer
// would.
func TestCertManagerCertificatesAreMountedAndServed(t *testing.T) {
	installCertificateCRD(t)
	ctx := context.Background()
	ns := contractNamespace(t, nil)
	dyn := dynamicClient(t)
	stop := issueCertificates(t, dyn, ns)
	defer stop()

	issuer := &v1alpha1.CertificateIssuerRef{Name: "test-ca", Kind: "Issuer"}
	mz := &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "mz", Namespace: ns},
		Spec: v1alpha1.MaterializeSpec{
			EnvironmentdImageRef: standinV26_35, BackendSecretName: "backend",
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
		if ref, _ := spec["issuerRef"].(map[string]any); ref["name"] != "test-ca" || ref["kind"] != "Issuer" {
			t.Errorf("Certificate %s issuerRef %v", want.name, spec["issuerRef"])
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

// installCertificateCRD installs cert-manager's Certificate CRD, read from
// its Go module, unless the cluster has it.
func installCertificateCRD(t *testing.T) {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/cert-manager/cert-manager@"+certManagerVersion).Output()
	if err != nil {
		t.Fatalf("downloading cert-manager %s: %v", certManagerVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(mod.Dir, "deploy", "crds", "cert-manager.io_certificates.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	crds := apiextensionsclient.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(context.Background(), &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	poll(t, "the Certificate CRD established", time.Minute, func() (bool, error) {
		got, err := crds.Get(context.Background(), crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// issueCertificates stands in for cert-manager's controller with a CA
// Issuer until stop is called: every Certificate in ns gets its Secret,
// with the key its spec asks for, signed by a CA made here.
func issueCertificates(t *testing.T, dyn dynamic.Interface, ns string) (stop func()) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for serial := int64(2); ctx.Err() == nil; {
			list, err := dyn.Resource(certificates.GVR).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, cert := range list.Items {
					if issued, err := issue(ctx, cert, ca, caKey, caPEM, serial); err != nil {
						t.Errorf("issuing %s: %v", cert.GetName(), err)
					} else if issued {
						serial++
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// issue writes cert's Secret unless it exists.
func issue(ctx context.Context, cert unstructured.Unstructured, ca *x509.Certificate, caKey crypto.Signer, caPEM []byte, serial int64) (bool, error) {
	spec, _ := cert.Object["spec"].(map[string]any)
	secretName, _ := spec["secretName"].(string)
	secrets := c.Kube.CoreV1().Secrets(cert.GetNamespace())
	if _, err := secrets.Get(ctx, secretName, metav1.GetOptions{}); err == nil || !apierrors.IsNotFound(err) {
		return false, nil
	}
	var dnsNames []string
	for _, n := range spec["dnsNames"].([]any) {
		dnsNames = append(dnsNames, n.(string))
	}
	pk, _ := spec["privateKey"].(map[string]any)
	size, _ := pk["size"].(int64)
	var key crypto.Signer
	var err error
	switch pk["algorithm"] {
	case "ECDSA":
		key, err = ecdsa.GenerateKey(map[int64]elliptic.Curve{256: elliptic.P256(), 384: elliptic.P384(), 521: elliptic.P521()}[size], rand.Reader)
	case "RSA":
		key, err = rsa.GenerateKey(rand.Reader, int(size))
	case "Ed25519":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		err = fmt.Errorf("private key algorithm %v", pk["algorithm"])
	}
	if err != nil {
		return false, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: dnsNames[0]}, DNSNames: dnsNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return false, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return false, err
	}
	var chain bytes.Buffer
	_ = pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: cert.GetNamespace()},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			"tls.crt": chain.Bytes(),
			"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
			"ca.crt":  caPEM,
		},
	}
	if tmpl, ok := spec["secretTemplate"].(map[string]any); ok {
		if labels, ok := tmpl["labels"].(map[string]any); ok {
			secret.Labels = map[string]string{}
			for k, v := range labels {
				secret.Labels[k] = fmt.Sprint(v)
			}
		}
	}
	_, err = secrets.Create(ctx, secret, metav1.CreateOptions{})
	return err == nil, err
}
