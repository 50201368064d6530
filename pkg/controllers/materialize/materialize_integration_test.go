package materialize_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
	"github.com/materializeinc/orchestratord/test/controlplane"
	"github.com/materializeinc/orchestratord/test/fixture"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

var (
	cp  *controlplane.ControlPlane
	env *standin.Server
)

const userAgent = "materialize-controller-test"

func TestMain(m *testing.M) {
	var err error
	cp, err = controlplane.Start(context.Background(), controlplane.Options{Audit: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env = standin.New()
	env.Password = fixture.MzSystemPassword
	if _, err := env.Start("127.0.0.1:0"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Close()
	_ = cp.Stop()
	os.Exit(code)
}

func prefix(id string, gen uint64) string {
	return "mz" + id + "-environmentd-" + strconv.FormatUint(gen, 10)
}

// running is one materialize controller leading for a test.
type running struct {
	stop func()
	// newTerm ends the controller's leadership term and begins another in
	// the same process, its informers kept, as a replica that loses its
	// Lease and later leads again.
	newTerm func()
	events  *record.FakeRecorder
}

func startController(t *testing.T, tune ...func(*materialize.Options)) *running {
	t.Helper()
	return startControllerAs(t, cp.Config, tune...)
}

// startControllerAs is startController with identity's credentials.
func startControllerAs(t *testing.T, identity *rest.Config, tune ...func(*materialize.Options)) *running {
	t.Helper()
	cfg := rest.CopyConfig(identity)
	cfg.UserAgent = userAgent
	kube := kubernetes.NewForConfigOrDie(cfg)
	mz := versioned.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	// The binary's caches: children as stubs (controller.TrimForCache).
	kubeInformers, mzInformers := controller.NewInformers(kube, mz)
	events := record.NewFakeRecorder(1000)
	deps := controller.Deps{
		Kube: kube, MZ: mz, Dynamic: dynamic.NewForConfigOrDie(cfg),
		KubeInformers: kubeInformers,
		MZInformers:   mzInformers,
		Recorder:      events,
		Log:           zap.NewNop(),
		Workers:       2,
	}
	opts := materialize.Options{
		EnvironmentdURL: func(m *v1alpha1.Materialize, id string, gen uint64) string { return env.BaseURL(prefix(id, gen)) },
		PollInterval:    100 * time.Millisecond,
		CreateBalancers: true, CreateConsoles: true,
	}
	for _, f := range tune {
		f(&opts)
	}
	c := materialize.New(deps, opts)
	deps.KubeInformers.Start(ctx.Done())
	deps.MZInformers.Start(ctx.Done())
	var (
		mu      sync.Mutex
		endTerm context.CancelFunc
		done    chan struct{}
	)
	startTerm := func() {
		termCtx, end := context.WithCancel(ctx)
		ended := make(chan struct{})
		go func() { c.Run(termCtx); close(ended) }()
		endTerm, done = end, ended
	}
	startTerm()
	r := &running{
		stop: func() {
			mu.Lock()
			defer mu.Unlock()
			cancel()
			<-done
		},
		newTerm: func() {
			mu.Lock()
			defer mu.Unlock()
			endTerm()
			<-done
			startTerm()
		},
		events: events,
	}
	t.Cleanup(r.stop)
	return r
}

// newNamespace makes a namespace with the backend Secret newMaterialize
// names, whose StatefulSets become ready (no nodes run environmentd).
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := newNamespaceWithoutPods(t)
	fixture.KeepStatefulSetsReady(t, kubernetes.NewForConfigOrDie(cp.Config), ns)
	return ns
}

// environmentNamespace is newNamespace where environments come up on their
// own: the stand-in environmentd advances by itself, Balancers become
// Ready (a Console waits for one).
func environmentNamespace(t *testing.T) string {
	t.Helper()
	env.SetAutoAdvance(true)
	ns := newNamespace(t)
	fixture.KeepBalancersReady(t, mzClient(), ns)
	return ns
}

// newNamespaceWithoutPods is newNamespace whose StatefulSets stay unready.
func newNamespaceWithoutPods(t *testing.T) string {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ns, err := kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "mz-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets(ns.Name).Create(context.Background(), fixture.BackendSecret(ns.Name, "backend"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

var mzClient = func() versioned.Interface { return versioned.NewForConfigOrDie(cp.Config) }

func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return cond()
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func get(t *testing.T, ns, name string) *v1alpha1.Materialize {
	t.Helper()
	mz, err := mzClient().MaterializeV1alpha1().Materializes(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mz
}

func upToDate(mz *v1alpha1.Materialize) *metav1.Condition {
	return meta.FindStatusCondition(mz.Status.Conditions, materialize.ConditionUpToDate)
}

// waitRolledOut waits until the request is complete at generation gen.
func waitRolledOut(t *testing.T, ns, name string, gen uint64) *v1alpha1.Materialize {
	t.Helper()
	var mz *v1alpha1.Materialize
	waitFor(t, fmt.Sprintf("generation %d active", gen), func() (bool, error) {
		mz = get(t, ns, name)
		c := upToDate(mz)
		return mz.Status.ActiveGeneration == gen && mz.Status.LastCompletedRolloutRequest == mz.Spec.RequestRollout &&
			c != nil && c.Status == metav1.ConditionTrue && c.Reason == materialize.ReasonApplied && c.ObservedGeneration == mz.Generation, nil
	})
	return mz
}

func waitReason(t *testing.T, ns, name, reason string) *v1alpha1.Materialize {
	t.Helper()
	var mz *v1alpha1.Materialize
	last := "no condition"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last UpToDate while waiting for %s: %s", reason, last)
		}
	})
	waitFor(t, "UpToDate reason "+reason, func() (bool, error) {
		mz = get(t, ns, name)
		c := upToDate(mz)
		if c != nil {
			last = fmt.Sprintf("%s/%s: %s (status.rollout %+v)", c.Status, c.Reason, c.Message, mz.Status.Rollout)
		}
		return c != nil && c.Reason == reason, nil
	})
	return mz
}

func exists(t *testing.T, get func() error) bool {
	t.Helper()
	err := get()
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func newMaterialize(ns, name string) *v1alpha1.Materialize {
	return &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.MaterializeSpec{
			EnvironmentdImageRef: "materialize/environmentd:v26.1.0",
			BackendSecretName:    "backend",
		},
	}
}

// update changes the spec with retries on conflicts.
func update(t *testing.T, ns, name string, change func(*v1alpha1.Materialize)) {
	t.Helper()
	waitFor(t, "update", func() (bool, error) {
		mz := get(t, ns, name)
		change(mz)
		_, err := mzClient().MaterializeV1alpha1().Materializes(ns).Update(context.Background(), mz, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}
