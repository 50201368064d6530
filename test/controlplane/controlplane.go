// Package controlplane runs a real etcd and kube-apiserver for integration
// tests: no mocks and no Docker. The binaries are the upstream ones pinned in
// hack/tools/kube, built once into a git-ignored cache by
// hack/kube-binaries.sh (this package builds them when they are missing).
//
// Each control plane listens on free loopback ports in its own temporary
// directory with its own certificates, an admin kubeconfig and, on request,
// an audit log. Authorization is RBAC, with the
// OwnerReferencesPermissionEnforcement admission plugin on (as on
// OpenShift and the local cluster). The materialize.cloud CRDs are
// installed and Established before Start returns.
package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/materializeinc/orchestratord/pkg/crds"
	"github.com/materializeinc/orchestratord/test/program"
)

// startTimeout bounds how long Start waits for a component to become healthy;
// it is a failure bound, not a performance assertion.
const startTimeout = 2 * time.Minute

// Options tune a control plane.
type Options struct {
	// Audit writes every request at Metadata level to AuditLogPath.
	Audit bool
	// SkipCRDs leaves the materialize.cloud CRDs out.
	SkipCRDs bool
	// ExtraAPIServerFlags are appended to kube-apiserver's command line.
	ExtraAPIServerFlags []string
	// APIServerMemoryLimit is kube-apiserver's GOMEMLIMIT (a quantity the
	// Go runtime reads, such as 11GiB; empty: none): a bench's API server
	// collects harder near it instead of keeping twice its live heap.
	APIServerMemoryLimit string
}

// ControlPlane is a running etcd and kube-apiserver.
type ControlPlane struct {
	// Dir holds certificates, data, logs and the kubeconfig.
	Dir string
	// KubeconfigPath is an admin (system:masters) kubeconfig.
	KubeconfigPath string
	// AuditLogPath is the audit log, when Options.Audit was set.
	AuditLogPath string
	// Config is the admin REST config.
	Config *rest.Config
	// CABundle is the PEM CA that signed the API server's serving certificate.
	CABundle []byte

	etcd, apiserver *process
	// apiserverCmd is kube-apiserver's command line, for StartAPIServer.
	apiserverCmd    []string
	apiserverEnv    []string // nil: this process's environment
	apiserverStarts int
}

// ForTest starts a control plane for one test and stops it when the test ends.
func ForTest(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	cp, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping control plane: %v", err)
		}
	})
	return cp
}

// Start builds the binaries if needed and starts etcd and kube-apiserver.
// Ports are picked free just before use; a start that loses the race for a
// port is retried.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		cp, err := start(ctx, bin, opts)
		if err == nil {
			return cp, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func start(ctx context.Context, bin string, opts Options) (cp *ControlPlane, err error) {
	dir, err := os.MkdirTemp("", "orchestratord-controlplane-")
	if err != nil {
		return nil, err
	}
	cp = &ControlPlane{Dir: dir}
	// The returns below set cp to nil: what was started is stopped
	// through its own reference, and the error reaches the caller.
	started := cp
	defer func() {
		if err != nil {
			_ = started.Stop()
		}
	}()
	certs, err := newPKI(dir)
	if err != nil {
		return nil, fmt.Errorf("creating certificates: %w", err)
	}
	cp.CABundle = certs.ca.certPEM

	ports, err := program.FreePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	cp.etcd, err = startProcess(filepath.Join(bin, "etcd"), filepath.Join(dir, "etcd.log"), nil,
		"--name=default",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync", "--log-level=warn",
		// The bench's 10 000 Materializes outgrow the 2 GiB default.
		"--quota-backend-bytes=8589934592",
	)
	if err != nil {
		return nil, err
	}
	if err := cp.etcd.waitHealthy(ctx, func(ctx context.Context) error {
		return httpOK(ctx, http.DefaultClient, etcdURL+"/health")
	}); err != nil {
		return nil, err
	}

	apiserverPort := ports[2]
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiserverPort),
		"--tls-cert-file=" + certs.serving.certFile,
		"--tls-private-key-file=" + certs.serving.keyFile,
		"--client-ca-file=" + certs.ca.certFile,
		"--service-account-key-file=" + certs.serviceAccount.keyFile,
		"--service-account-signing-key-file=" + certs.serviceAccount.keyFile,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC",
		// As the local cluster's API server (hack/cluster) and OpenShift's:
		// an owner reference with blockOwnerDeletion needs update on the
		// owner's finalizers, which the chart's RBAC tests rely on.
		"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
		"--allow-privileged=true",
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
	}
	if opts.Audit {
		cp.AuditLogPath = filepath.Join(dir, "audit.log")
		policy := filepath.Join(dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--audit-policy-file="+policy, "--audit-log-path="+cp.AuditLogPath,
			"--audit-log-mode=blocking", "--audit-log-format=json",
			// Never rotated (0 means lumberjack's 100 MB): a bench's
			// figures count every request of a run of thousands.
			"--audit-log-maxsize=1000000")
	}
	args = append(args, opts.ExtraAPIServerFlags...)
	cp.apiserverCmd = append([]string{filepath.Join(bin, "kube-apiserver")}, args...)
	if opts.APIServerMemoryLimit != "" {
		cp.apiserverEnv = append(os.Environ(), "GOMEMLIMIT="+opts.APIServerMemoryLimit)
	}
	cp.apiserver, err = startProcess(cp.apiserverCmd[0], filepath.Join(dir, "kube-apiserver.log"), cp.apiserverEnv, args...)
	if err != nil {
		return nil, err
	}

	cp.Config = &rest.Config{
		Host: "https://127.0.0.1:" + strconv.Itoa(apiserverPort),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   certs.ca.certPEM,
			CertData: certs.admin.certPEM,
			KeyData:  certs.admin.keyPEM,
		},
		QPS:   1000,
		Burst: 2000,
	}
	if err := cp.waitAPIServerReady(ctx); err != nil {
		return nil, err
	}
	cp.KubeconfigPath = filepath.Join(dir, "admin.kubeconfig")
	if err := writeKubeconfig(cp.KubeconfigPath, cp.Config); err != nil {
		return nil, err
	}
	if !opts.SkipCRDs {
		if err := cp.InstallCRDs(ctx); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

func (cp *ControlPlane) waitAPIServerReady(ctx context.Context) error {
	kube, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	return cp.apiserver.waitHealthy(ctx, func(ctx context.Context) error {
		body, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		// The bootstrap controller creates the default namespace a moment later.
		_, err = kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return err
	})
}

// KillAPIServer SIGKILLs kube-apiserver, as a crash or a control-plane
// upgrade does: its connections are reset and its port refuses; etcd and
// its data stay.
func (cp *ControlPlane) KillAPIServer() {
	_ = syscall.Kill(-cp.apiserver.cmd.Process.Pid, syscall.SIGKILL)
	<-cp.apiserver.exited
}

// StartAPIServer starts kube-apiserver again, with the flags it had, and
// waits until it is ready.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	cp.apiserverStarts++
	log := filepath.Join(cp.Dir, fmt.Sprintf("kube-apiserver-%d.log", cp.apiserverStarts))
	p, err := startProcess(cp.apiserverCmd[0], log, cp.apiserverEnv, cp.apiserverCmd[1:]...)
	if err != nil {
		return err
	}
	cp.apiserver = p
	return cp.waitAPIServerReady(ctx)
}

// InstallCRDs creates (or replaces) the materialize.cloud CRDs and waits
// until each is Established and served.
func (cp *ControlPlane) InstallCRDs(ctx context.Context) error {
	all, err := crds.All()
	if err != nil {
		return err
	}
	client, err := apiextensionsclient.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	for _, crd := range all {
		if err := cp.applyCRD(ctx, client, crd); err != nil {
			return err
		}
	}
	return nil
}

func (cp *ControlPlane) applyCRD(ctx context.Context, client apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	_, err := crds.Create(ctx, crd, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if getErr != nil {
			return getErr
		}
		crd.ResourceVersion = existing.ResourceVersion
		_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// InstallCertificateCRD serves cert-manager's Certificate kind
// (cert-manager.io/v1) with an open schema, so reconcilers can write
// Certificates; nothing issues them.
func (cp *ControlPlane) InstallCertificateCRD(ctx context.Context) error {
	client, err := apiextensionsclient.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	preserve := true
	return cp.applyCRD(ctx, client, &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "certificates.cert-manager.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "cert-manager.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "certificates", Singular: "certificate", Kind: "Certificate", ListKind: "CertificateList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	})
}

// Stop stops kube-apiserver, then etcd, and removes the directory. It is
// safe to call more than once.
func (cp *ControlPlane) Stop() error {
	var errs []error
	for _, p := range []*process{cp.apiserver, cp.etcd} {
		if p != nil {
			errs = append(errs, p.stop())
		}
	}
	cp.apiserver, cp.etcd = nil, nil
	if cp.Dir != "" && os.Getenv("ORCHESTRATORD_KEEP_CONTROLPLANE") == "" {
		errs = append(errs, os.RemoveAll(cp.Dir))
	}
	return errors.Join(errs...)
}

// PIDs returns the process ids of the kube-apiserver and etcd, for a bench
// that reports what they use.
func (cp *ControlPlane) PIDs() (apiserver, etcd int) {
	return cp.apiserver.cmd.Process.Pid, cp.etcd.cmd.Process.Pid
}

// Logs returns the tail of the API server's log, for failure messages.
func (cp *ControlPlane) Logs() string {
	if cp.apiserver == nil {
		return ""
	}
	return cp.apiserver.tail(40)
}

// BinDir returns the directory of the cached etcd and kube-apiserver binaries,
// building them first when they are missing. ORCHESTRATORD_KUBE_BIN_DIR
// overrides the lookup.
func BinDir() (string, error) {
	if dir := os.Getenv("ORCHESTRATORD_KUBE_BIN_DIR"); dir != "" {
		return dir, nil
	}
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the repository to build the control plane binaries")
	}
	root := filepath.Join(filepath.Dir(self), "..", "..")
	cmd := exec.Command(filepath.Join(root, "hack", "kube-binaries.sh"), "etcd", "kube-apiserver")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/kube-binaries.sh: %w: %s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}

func httpOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// process is a child process whose output goes to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error
}

// startProcess starts path with args; env nil inherits this process's
// environment.
func startProcess(path, logPath string, env []string, args ...string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, and killed with the test binary should it die first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	p := &process{name: filepath.Base(path), cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// waitHealthy polls check until it succeeds, failing early with the log's
// tail when the process exits.
func (p *process) waitHealthy(ctx context.Context, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var last error
	for {
		callCtx, callCancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(callCtx)
		callCancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited (%v) before becoming healthy:\n%s", p.name, p.waitErr, p.tail(30))
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy after %v: %v\n%s", p.name, startTimeout, last, p.tail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *process) stop() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(20 * time.Second):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	return nil
}

func (p *process) tail(n int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Main is a test package's TestMain: it starts a control plane, hands it to
// started, runs the tests, stops it and exits with the tests' code.
func Main(m *testing.M, opts Options, started func(*ControlPlane)) {
	cp, err := Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting control plane:", err)
		os.Exit(1)
	}
	started(cp)
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping control plane:", err)
	}
	os.Exit(code)
}
