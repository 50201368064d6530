package app_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/materializeinc/orchestratord/pkg/apis/materialize/v1"
	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/conversion"
	"github.com/materializeinc/orchestratord/pkg/servingcert"
	"github.com/materializeinc/orchestratord/test/program"
)

// The tests share one API server and one CRD, so they run one after another.

// createThenListAtV1 creates a tenant's object at v1alpha1 and returns it
// as a cluster-wide v1 LIST, which converts every object in one review,
// holds it: one object the webhook cannot convert fails the LIST for all.
func createThenListAtV1(t *testing.T, mz versioned.Interface, obj *v1alpha1.Materialize) v1.Materialize {
	t.Helper()
	ctx := context.Background()
	if _, err := mz.MaterializeV1alpha1().Materializes(obj.Namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := mz.MaterializeV1().Materializes(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("cluster-wide v1 LIST failed after a tenant's object %s: %v", obj.Name, err)
	}
	for _, item := range list.Items {
		if item.Name == obj.Name && item.Namespace == obj.Namespace {
			return item
		}
	}
	t.Fatalf("%s/%s is missing from the LIST", obj.Namespace, obj.Name)
	return v1.Materialize{}
}

func alphaMaterialize(ns, name string) *v1alpha1.Materialize {
	return &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.MaterializeSpec{
			EnvironmentdImageRef:   "materialize/environmentd:v26.1.0",
			BackendSecretName:      "backend",
			EnvironmentdIamRoleArn: "arn:aws:iam::1:role/env",
			RequestRollout:         "6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00",
			ForcePromote:           "00000000-0000-0000-0000-000000000000",
			InPlaceRollout:         true,
			EnvironmentdExtraEnv:   []corev1.EnvVar{{Name: "A", Value: "1"}},
			BalancerdReplicas:      ptr(int32(3)),
		},
	}
}

func TestConversionThroughTheAPIServer(t *testing.T) {
	ns := newNamespace(t)
	hook := startWebhook(t, ns)
	pointCRDAt(t, "https://"+hook.https+"/convert")
	waitConverting(t, ns)
	mz := versioned.NewForConfigOrDie(cp.Config)
	ctx := context.Background()

	t.Run("create v1alpha1, read v1 and write it back unchanged", func(t *testing.T) {
		created, err := mz.MaterializeV1alpha1().Materializes(ns).Create(ctx, alphaMaterialize(ns, "alpha"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		asV1, err := mz.MaterializeV1().Materializes(ns).Get(ctx, "alpha", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if asV1.Spec.ServiceAccountAnnotations[conversion.IAMRoleAnnotation] != "arn:aws:iam::1:role/env" || asV1.Spec.ForcePromote != nil {
			t.Errorf("v1 view does not follow the conversion rules: %+v", asV1.Spec)
		}
		if _, err := mz.MaterializeV1().Materializes(ns).Update(ctx, asV1, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		back, err := mz.MaterializeV1alpha1().Materializes(ns).Get(ctx, "alpha", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(back.Spec, created.Spec) {
			t.Errorf("v1alpha1 -> v1 -> v1alpha1 through the API server changed the spec:\nbefore %+v\nafter  %+v", created.Spec, back.Spec)
		}
		if back.Generation != created.Generation {
			t.Errorf("writing back an unchanged v1 object bumped the generation %d -> %d", created.Generation, back.Generation)
		}
	})

	t.Run("create v1, read v1alpha1", func(t *testing.T) {
		obj := &v1.Materialize{
			ObjectMeta: metav1.ObjectMeta{Name: "v1-made", Namespace: ns},
			Spec:       v1.MaterializeSpec{EnvironmentdImageRef: "materialize/environmentd:v26.1.0", BackendSecretName: "backend"},
		}
		created, err := mz.MaterializeV1().Materializes(ns).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		alpha, err := mz.MaterializeV1alpha1().Materializes(ns).Get(ctx, "v1-made", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&created.Spec)
		if err != nil {
			t.Fatal(err)
		}
		hash, err := conversion.RolloutHash(spec, created.Annotations)
		if err != nil {
			t.Fatal(err)
		}
		want := conversion.RolloutRequest(hash)
		if alpha.Spec.RequestRollout != want {
			t.Errorf("requestRollout = %q, want UUIDv5 of the rollout hash %q", alpha.Spec.RequestRollout, want)
		}
		if alpha.Spec.EnvironmentdImageRef != obj.Spec.EnvironmentdImageRef || alpha.Spec.RolloutStrategy != v1alpha1.RolloutWaitUntilReady {
			t.Errorf("v1alpha1 view lost fields or defaults: %+v", alpha.Spec)
		}
	})

	t.Run("server-side apply of a partial v1 object onto a v1alpha1 one", func(t *testing.T) {
		if _, err := mz.MaterializeV1alpha1().Materializes(ns).Create(ctx, alphaMaterialize(ns, "ssa"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		dyn := dynamic.NewForConfigOrDie(cp.Config)
		gvr := schema.GroupVersionResource{Group: "materialize.cloud", Version: "v1", Resource: "materializes"}
		apply := func(spec map[string]any, force bool) error {
			partial := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "materialize.cloud/v1", "kind": "Materialize",
				"metadata": map[string]any{"name": "ssa", "namespace": ns},
				"spec":     spec,
			}}
			_, err := dyn.Resource(gvr).Namespace(ns).Apply(ctx, "ssa", partial, metav1.ApplyOptions{FieldManager: "tuner", Force: force})
			return err
		}
		want := alphaMaterialize(ns, "ssa").Spec
		keptUnmentioned := func(got v1alpha1.MaterializeSpec) {
			t.Helper()
			if got.EnvironmentdImageRef != want.EnvironmentdImageRef || got.EnvironmentdIamRoleArn != want.EnvironmentdIamRoleArn ||
				*got.BalancerdReplicas != 3 || len(got.EnvironmentdExtraEnv) != 1 || !got.InPlaceRollout {
				t.Errorf("apply of a partial object lost fields it did not mention: %+v", got)
			}
		}

		// A field outside the rollout hash: applies cleanly, no rollout.
		if err := apply(map[string]any{"consoleResourceRequirements": map[string]any{"requests": map[string]any{"cpu": "100m"}}}, false); err != nil {
			t.Fatal(err)
		}
		got, err := mz.MaterializeV1alpha1().Materializes(ns).Get(ctx, "ssa", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.ConsoleResourceRequirements == nil || got.Spec.ConsoleResourceRequirements.Requests.Cpu().String() != "100m" {
			t.Errorf("applied field missing: %+v", got.Spec.ConsoleResourceRequirements)
		}
		if got.Spec.RequestRollout != want.RequestRollout {
			t.Errorf("a field outside the rollout hash changed requestRollout")
		}
		keptUnmentioned(got.Spec)

		// A field in the rollout hash requests a rollout, which changes
		// requestRollout, a field the creator owns: SSA reports that
		// conflict by name, and --force-conflicts takes it over.
		args := map[string]any{"environmentdExtraArgs": []any{"--workers=4"}}
		if err := apply(args, false); err == nil || !strings.Contains(err.Error(), ".spec.requestRollout") {
			t.Errorf("want a conflict naming .spec.requestRollout, got %v", err)
		}
		if err := apply(args, true); err != nil {
			t.Fatal(err)
		}
		if got, err = mz.MaterializeV1alpha1().Materializes(ns).Get(ctx, "ssa", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.EnvironmentdExtraArgs) != 1 || got.Spec.EnvironmentdExtraArgs[0] != "--workers=4" {
			t.Errorf("applied field missing: %v", got.Spec.EnvironmentdExtraArgs)
		}
		if got.Spec.RequestRollout == want.RequestRollout {
			t.Errorf("extra args are part of the rollout hash: the change must request a rollout")
		}
		keptUnmentioned(got.Spec)
	})

	t.Run("a tenant's tampered carry annotation cannot fail a cluster-wide v1 LIST", func(t *testing.T) {
		// Written at v1alpha1 in the tenant's own namespace, with a v1 carry
		// annotation that would rename the object, move it to another
		// namespace and change its kind if it were trusted.
		tampered := alphaMaterialize(ns, "tampered")
		// "derived" holds what each field holds after a plain conversion, so
		// an annotation that were trusted would be applied.
		tampered.Annotations = map[string]string{conversion.AnnotationPrefix + "v1": `[` +
			`{"path":["metadata","name"],"value":"other","derived":"tampered"},` +
			fmt.Sprintf(`{"path":["metadata","namespace"],"value":"kube-system","derived":%q},`, ns) +
			`{"path":["kind"],"value":"Secret","derived":"Materialize"},` +
			`{"path":["apiVersion"],"value":"v1","derived":"materialize.cloud/v1"},` +
			`{"path":["spec","environmentdImageRef"],"value":{"not":"a string"},"derived":"materialize/environmentd:v26.1.0"}]`}
		item := createThenListAtV1(t, mz, tampered)
		if _, ok := item.Annotations[conversion.AnnotationPrefix+"v1"]; ok {
			t.Error("the ignored annotation is still on the converted object")
		}
		if item.Spec.EnvironmentdImageRef != tampered.Spec.EnvironmentdImageRef {
			t.Errorf("environmentdImageRef %q", item.Spec.EnvironmentdImageRef)
		}
	})

	t.Run("a tenant's annotations filled to the API server's bound cannot fail a cluster-wide v1 LIST", func(t *testing.T) {
		// Just under the 256 KiB the API server admits, and a spec the
		// way back to v1alpha1 needs a carry for (a request that is not
		// the hash's UUID, a long role): the carry would take the
		// converted object past the bound, and the API server would
		// refuse the whole conversion.
		full := alphaMaterialize(ns, "full")
		full.Spec.RequestRollout = "6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00"
		full.Spec.EnvironmentdIamRoleArn = "arn:aws:iam::123456789012:role/" + strings.Repeat("r", 2000)
		full.Annotations = map[string]string{"filler": strings.Repeat("a", 256<<10-len("filler")-16)}
		item := createThenListAtV1(t, mz, full)
		if _, ok := item.Annotations[conversion.AnnotationPrefix+"v1alpha1"]; ok {
			t.Error("a carry was written past the bound")
		}
	})

	t.Run("profiles are served with --profiling", func(t *testing.T) {
		resp, err := http.Get("http://" + hook.health + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/debug/pprof/ answered %d", resp.StatusCode)
		}
	})

	t.Run("metrics count the conversions by version pair", func(t *testing.T) {
		resp, err := http.Get("http://" + hook.metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, want := range []string{
			`orchestratord_webhook_conversions_total{from="materialize.cloud/v1alpha1",result="success",to="materialize.cloud/v1"}`,
			`orchestratord_webhook_conversions_total{from="materialize.cloud/v1",result="success",to="materialize.cloud/v1alpha1"}`,
			`orchestratord_webhook_conversion_review_duration_seconds_count{result="success"}`,
			`orchestratord_webhook_conversion_reviews_in_flight`,
			`orchestratord_webhook_conversion_review_objects_bucket{le="1"}`,
			`orchestratord_webhook_conversion_review_bytes_bucket{le="4096"}`,
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})

	t.Run("LIST of 500 at v1", func(t *testing.T) {
		listNS := newNamespace(t)
		var wg sync.WaitGroup
		errs := make(chan error, 500)
		sem := make(chan struct{}, 32)
		for i := range 500 {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				_, err := mz.MaterializeV1alpha1().Materializes(listNS).Create(ctx, alphaMaterialize(listNS, fmt.Sprintf("mz-%03d", i)), metav1.CreateOptions{})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		list, err := mz.MaterializeV1().Materializes(listNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 500 {
			t.Fatalf("listed %d, want 500", len(list.Items))
		}
		for _, item := range list.Items {
			if item.Spec.ServiceAccountAnnotations[conversion.IAMRoleAnnotation] == "" {
				t.Fatalf("%s not converted", item.Name)
			}
		}
	})
}

func TestSelfSignedReplicasShareOneCA(t *testing.T) {
	ns := newNamespace(t)
	a := startWebhook(t, ns)
	b := startWebhook(t, ns)
	pointCRDAt(t, "https://"+a.https+"/convert")
	waitConverting(t, ns)

	kube := kubernetes.NewForConfigOrDie(cp.Config)
	secrets, err := kube.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 1 || secrets.Items[0].Name != "orchestratord-webhook-ca" {
		t.Fatalf("want exactly one CA Secret, got %d", len(secrets.Items))
	}
	bundle := secrets.Items[0].Data[servingcert.SecretKeyBundle]
	if got := crdCABundle(t); string(got) != string(bundle) {
		t.Errorf("CRD caBundle is not the CA Secret's bundle")
	}
	for name, p := range map[string]*webhookProcess{"a": a, "b": b} {
		if err := verifies(bundle, p.servingCert(t)); err != nil {
			t.Errorf("replica %s serves a certificate the caBundle does not trust: %v", name, err)
		}
	}
	if a.servingCert(t).Equal(b.servingCert(t)) {
		t.Errorf("each replica should issue its own serving certificate")
	}
}

func TestCARotationFailsNoConversion(t *testing.T) {
	ns := newNamespace(t)
	// a notices the rotation at once and publishes the bundle; b, which the
	// API server talks to, notices it seconds later. Without an overlapping
	// bundle the API server would distrust b's old certificate meanwhile.
	// The propagation delay leaves the API server seconds to take the
	// new bundle, on a loaded machine too (the harness's 1 s is for tests
	// that only need it short).
	a := startWebhook(t, ns, "--ca-propagation-delay=4s")
	b := startWebhook(t, ns, "--cert-resync-period=10s", "--ca-propagation-delay=4s")
	pointCRDAt(t, "https://"+a.https+"/convert")
	waitConverting(t, ns)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	oldCA := a.servingCert(t).Issuer.CommonName

	// Conversions run in a loop across the rotation, with the API server
	// opening fresh connections now and then (it rebuilds its client when
	// the caBundle changes).
	mz := versioned.NewForConfigOrDie(cp.Config)
	ctx, cancel := context.WithCancel(context.Background())
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_, err := mz.MaterializeV1().Materializes(ns).Get(ctx, "probe", metav1.GetOptions{})
				switch {
				case err == nil:
					ok.Add(1)
				case ctx.Err() == nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}

	time.Sleep(time.Second)
	read, err := kube.CoreV1().Secrets(ns).Get(context.Background(), "orchestratord-webhook-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := servingcert.RotateCA(context.Background(), kube, read, servingcert.DefaultCAValidity, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Both replicas move to the new CA once it has propagated; then the API
	// server is pointed at a to exercise a replica switch as well.
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return a.servingCert(t).Issuer.CommonName != oldCA && b.servingCert(t).Issuer.CommonName != oldCA, nil
	})
	if err != nil {
		t.Fatalf("replicas never moved to the new CA: %v", err)
	}
	pointCRDAt(t, "https://"+b.https+"/convert")
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()

	if failed.Load() != 0 {
		t.Errorf("%d of %d conversions failed across the CA rotation; first: %v", failed.Load(), failed.Load()+ok.Load(), firstErr.Load())
	}
	if ok.Load() < 100 {
		t.Errorf("only %d conversions ran across the rotation; the loop did not exercise it", ok.Load())
	}
	bundle := crdCABundle(t)
	if n := strings.Count(string(bundle), "BEGIN CERTIFICATE"); n != 2 {
		t.Errorf("caBundle should hold the new and the previous CA during the overlap, has %d", n)
	}
	t.Logf("%d conversions across the rotation, %d failed", ok.Load(), failed.Load())
}

func TestSIGTERMDrainsThenExitsZero(t *testing.T) {
	ns := newNamespace(t)
	// Long enough for the checks below on a loaded machine: each of them
	// must land inside the drain.
	hook := startWebhook(t, ns, "--shutdown-drain=6s")
	if err := hook.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return hook.get("/readyz") == http.StatusServiceUnavailable, nil
	})
	if err != nil {
		t.Fatal("/readyz did not fail after SIGTERM")
	}
	if code := hook.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz during the drain: %d, want 200 (the process is alive)", code)
	}
	// Conversions are still answered during the drain.
	if status := postReview(t, hook); status != http.StatusOK {
		t.Errorf("POST /convert during the drain: %d", status)
	}
	<-hook.exited
	if hook.exitErr != nil {
		t.Errorf("want exit 0 after the drain, got %v", hook.exitErr)
	}
}

// A request still in flight at --shutdown-timeout (here a body that never
// finishes arriving) has its connection closed, and the process exits 0:
// the shutdown asked for is done.
func TestShutdownTimeoutClosesWhatIsLeftAndExitsZero(t *testing.T) {
	ns := newNamespace(t)
	hook := startWebhook(t, ns, "--shutdown-timeout=1s")
	c, err := tls.Dial("tcp", hook.https, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // test
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	// The request is in flight once its headers are read.
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		v, err := program.Metric(hook.metrics, "orchestratord_webhook_in_flight_memory_bytes")
		return err == nil && v > 0, nil
	})
	if err != nil {
		t.Fatal("the trickled request never started being read")
	}
	if err := hook.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-hook.exited
	if hook.exitErr != nil {
		t.Errorf("want exit 0 after the shutdown timeout, got %v", hook.exitErr)
	}
	raw, _ := os.ReadFile(hook.log)
	if !strings.Contains(string(raw), "requests still in flight at the shutdown timeout") {
		t.Errorf("the connections closed at the timeout are not logged:\n%s", raw)
	}
}
