// Command dev runs the whole operator locally against a real etcd and
// kube-apiserver: the webhook (self-signed TLS, caBundle written into the
// CRD), the controllers (leases and all), and a TEST STAND-IN for
// environmentd's leader API (not Materialize: there is no kubelet here, so
// no pod runs; the stand-in answers the rollout's status and promote calls).
// It applies a sample Materialize at v1 (stored as v1alpha1, so conversion is
// exercised), waits until it is UpToDate, prints how to look around, and
// runs until interrupted.
//
//	make run-local      (go run ./hack/dev)
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/materializeinc/orchestratord/pkg/apis/materialize/v1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/crds"
	"github.com/materializeinc/orchestratord/test/controlplane"
	"github.com/materializeinc/orchestratord/test/fixture"
	"github.com/materializeinc/orchestratord/test/program"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

const namespace = "orchestratord"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
}

func freeAddr() string {
	addr, err := program.FreeAddr()
	if err != nil {
		panic(err) // no loopback port at all: nothing here can work
	}
	return addr
}

func run(ctx context.Context) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	bin := filepath.Join(root, "bin")
	fmt.Println("building bin/webhook, bin/controllers ...")
	if err := program.Build(bin, "cmd/webhook", "cmd/controllers"); err != nil {
		return err
	}
	fmt.Println("starting etcd and kube-apiserver (built once into the cache) ...")
	cp, err := controlplane.Start(ctx, controlplane.Options{Audit: true})
	if err != nil {
		return err
	}
	defer cp.Stop()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// No kubelet: environmentd's StatefulSet reports ready as it would.
	go fixture.StatefulSetsReady(ctx, kube, namespace)

	logs := filepath.Join(cp.Dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			_ = p.Wait()
		}
	}()
	start := func(name string, args ...string) error {
		f, err := os.Create(filepath.Join(logs, name+".log"))
		if err != nil {
			return err
		}
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Stdout, cmd.Stderr = f, f
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return err
		}
		procs = append(procs, cmd)
		return nil
	}

	// No pods run here: the leader API of every generation is answered
	// in process by the stand-in's state machine.
	leader := standin.New()
	leader.AutoAdvance = true
	// A new environment's first generation leads at once, as
	// environmentd on a fresh catalog: no promotion.
	leader.Catalog = standin.ServiceCatalog
	standinURL, err := leader.Start(freeAddr())
	if err != nil {
		return err
	}
	defer leader.Close()
	webhook := freeAddr()
	if err := start("webhook", "--kubeconfig="+cp.KubeconfigPath, "--namespace="+namespace, "--tls-san=127.0.0.1",
		"--listen-address="+webhook, "--health-address="+freeAddr(), "--metrics-address="+freeAddr(),
		"--cert-resync-period=1s", "--shutdown-drain=0s"); err != nil {
		return err
	}
	// Without a Service to route to, the CRD calls the webhook by URL.
	patch, _ := json.Marshal([]map[string]any{{"op": "remove", "path": "/spec/conversion/webhook/clientConfig/service"},
		{"op": "add", "path": "/spec/conversion/webhook/clientConfig/url", "value": "https://" + webhook + "/convert"}})
	ext := apiextensionsclient.NewForConfigOrDie(cp.Config)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crds.MaterializeCRDName, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	for i := range 2 {
		if err := start("controllers", "--kubeconfig="+cp.KubeconfigPath, "--cloud-provider=local", "--region=kind", "--leader-election-namespace="+namespace,
			fmt.Sprintf("--leader-election-identity=controllers-%d", i), "--health-address="+freeAddr(), "--metrics-address="+freeAddr(),
			"--environmentd-url-template="+standinURL+"/mz{{.ResourceID}}-environmentd-{{.Generation}}"); err != nil {
			return err
		}
	}

	if _, err := kube.CoreV1().Secrets(namespace).Create(ctx, fixture.BackendSecret(namespace, "sample-backend"), metav1.CreateOptions{}); err != nil {
		return err
	}
	mz := versioned.NewForConfigOrDie(cp.Config)
	sample := &v1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "sample", Namespace: namespace},
		Spec:       v1.MaterializeSpec{EnvironmentdImageRef: "materialize/environmentd:v26.1.0", BackendSecretName: "sample-backend"},
	}
	fmt.Println("applying the sample Materialize (v1; environmentd answered by the test stand-in) ...")
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := mz.MaterializeV1().Materializes(namespace).Create(ctx, sample, metav1.CreateOptions{})
		return err == nil, nil // the webhook may still be issuing its certificate
	}); err != nil {
		return fmt.Errorf("creating the sample through the conversion webhook: %w", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := mz.MaterializeV1().Materializes(namespace).Get(ctx, "sample", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(got.Status.Conditions, "UpToDate")
		return c != nil && c.Status == metav1.ConditionTrue && got.Status.ActiveGeneration > 0, nil
	}); err != nil {
		return fmt.Errorf("the sample did not become UpToDate (logs in %s): %w", logs, err)
	}
	kubectl := "kubectl"
	if dir, err := controlplane.BinDir(); err == nil {
		if _, err := os.Stat(filepath.Join(dir, "kubectl")); err == nil {
			kubectl = filepath.Join(dir, "kubectl")
		}
	}
	fmt.Printf(`
The sample Materialize is UpToDate.

  export KUBECONFIG=%s
  %s get mzs -A                      # served at v1, stored as v1alpha1: every read converts
  %s get materializes.v1alpha1.materialize.cloud -n %s -o yaml
  %s get statefulsets,services,balancers,consoles -n %s
  %s get leases -n %s                # one Lease per reconciler
  logs: %s

No kubelet runs here, so no pod starts; environmentd's leader API is a test
stand-in. Ctrl-C stops everything.
`, cp.KubeconfigPath, kubectl, kubectl, namespace, kubectl, namespace, kubectl, namespace, logs)
	<-ctx.Done()
	fmt.Println("stopping ...")
	return nil
}
