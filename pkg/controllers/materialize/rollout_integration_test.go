package materialize_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
	"github.com/materializeinc/orchestratord/pkg/conversion"
	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

func TestFirstRolloutCreatesTheEnvironment(t *testing.T) {
	ns := environmentNamespace(t)
	startController(t)
	ctx := context.Background()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "prod"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mz := waitRolledOut(t, ns, "prod", 1)
	id := mz.Status.ResourceID
	if len(id) != 10 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		t.Errorf("resourceId %q is not 10 characters of [a-z0-9]", id)
	}
	if mz.Spec.RequestRollout == "" || mz.Spec.EnvironmentID == "" {
		t.Errorf("requestRollout/environmentId not filled: %+v", mz.Spec)
	}
	if mz.Status.LastCompletedRolloutEnvironmentdImageRef != mz.Spec.EnvironmentdImageRef || mz.Status.ResourcesHash == "" {
		t.Errorf("status not recorded: %+v", mz.Status)
	}
	if env.Promotions(prefix(id, 1)) != 1 {
		t.Errorf("generation 1 promoted %d times, want 1", env.Promotions(prefix(id, 1)))
	}
	// The license key, as stored through the API server: the fixture's is
	// valid to 2100.
	if c := meta.FindStatusCondition(mz.Status.Conditions, materialize.ConditionLicenseKey); c == nil || c.Status != metav1.ConditionTrue ||
		c.Reason != materialize.ReasonLicenseValid || c.ObservedGeneration != mz.Generation {
		t.Errorf("LicenseKey condition %+v, want True/Valid for generation %d", c, mz.Generation)
	}

	kube := kubernetes.NewForConfigOrDie(cp.Config)
	owned := func(kind string, m metav1.Object) {
		t.Helper()
		if !metav1.IsControlledBy(m, mz) {
			t.Errorf("%s %s is not controlled by the Materialize", kind, m.GetName())
		}
		for _, ref := range m.GetOwnerReferences() {
			if ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
				t.Errorf("%s %s: blockOwnerDeletion not set", kind, m.GetName())
			}
		}
		if m.GetLabels()[children.ResourceIDLabel] != id {
			t.Errorf("%s %s lacks the resource id label", kind, m.GetName())
		}
	}
	sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, "mz"+id+"-environmentd-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned("StatefulSet", sts)
	if c := sts.Spec.Template.Spec.Containers[0]; c.Image != mz.Spec.EnvironmentdImageRef {
		t.Errorf("environmentd container: %+v", c)
	}
	public, err := kube.CoreV1().Services(ns).Get(ctx, "mz"+id+"-environmentd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned("Service", public)
	if public.Spec.Selector[children.NameLabel] != "mz"+id+"-environmentd-1" {
		t.Errorf("public service does not select generation 1: %v", public.Spec.Selector)
	}
	for kind, get := range map[string]func() (metav1.Object, error){
		"ServiceAccount": func() (metav1.Object, error) {
			return kube.CoreV1().ServiceAccounts(ns).Get(ctx, "prod", metav1.GetOptions{})
		},
		"RoleBinding": func() (metav1.Object, error) {
			rb, err := kube.RbacV1().RoleBindings(ns).Get(ctx, "mz"+id+"-environmentd", metav1.GetOptions{})
			if err == nil && (rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != materialize.DefaultEnvironmentdClusterRole ||
				len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != "prod" || rb.Subjects[0].Namespace != ns) {
				t.Errorf("RoleBinding grants %+v to %+v, want the ClusterRole %s to ServiceAccount %s/prod",
					rb.RoleRef, rb.Subjects, materialize.DefaultEnvironmentdClusterRole, ns)
			}
			return rb, err
		},
		"persist pub-sub Service": func() (metav1.Object, error) {
			return kube.CoreV1().Services(ns).Get(ctx, "mz"+id+"-persist-pubsub-1", metav1.GetOptions{})
		},
		"ConfigMap": func() (metav1.Object, error) {
			return kube.CoreV1().ConfigMaps(ns).Get(ctx, "mz"+id+"-listeners-1", metav1.GetOptions{})
		},
	} {
		obj, err := get()
		if err != nil {
			t.Errorf("%s: %v", kind, err)
			continue
		}
		owned(kind, obj)
	}
	waitFor(t, "balancer and console CRs", func() (bool, error) {
		b, errB := mzClient().MaterializeV1alpha1().Balancers(ns).Get(ctx, "prod", metav1.GetOptions{})
		c, errC := mzClient().MaterializeV1alpha1().Consoles(ns).Get(ctx, "prod", metav1.GetOptions{})
		if errB != nil || errC != nil {
			return false, nil
		}
		owned("Balancer", b)
		owned("Console", c)
		if b.Spec.StaticRouting == nil || b.Spec.StaticRouting.EnvironmentdServiceName != "mz"+id+"-environmentd" ||
			b.Spec.BalancerdImageRef != "materialize/balancerd:v26.1.0" || c.Spec.Balancerd.ServiceName != "mz"+id+"-balancerd" {
			t.Errorf("balancer/console specs: %+v / %+v", b.Spec, c.Spec)
		}
		return true, nil
	})
}

// firstGeneration starts a controller and rolls out a Materialize "mz" to
// generation 1; stsExists tells whether a generation's StatefulSet exists.
func firstGeneration(t *testing.T) (ns, id string, stsExists func(gen uint64) bool) {
	t.Helper()
	ns = newNamespace(t)
	startController(t)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	env.SetAutoAdvance(true)
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	id = waitRolledOut(t, ns, "mz", 1).Status.ResourceID
	return ns, id, func(gen uint64) bool {
		return exists(t, func() error {
			_, err := kube.AppsV1().StatefulSets(ns).Get(ctx, prefix(id, gen), metav1.GetOptions{})
			return err
		})
	}
}

func TestRolloutStrategies(t *testing.T) {
	ns, id, stsExists := firstGeneration(t)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	request := func(image, uuid string) {
		update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
			mz.Spec.EnvironmentdImageRef = image
			mz.Spec.RequestRollout = uuid
		})
	}

	t.Run("WaitUntilReady", func(t *testing.T) {
		request("materialize/environmentd:v26.2.0", "11111111-1111-4111-8111-111111111111")
		mz := waitRolledOut(t, ns, "mz", 2)
		if mz.Status.LastCompletedRolloutEnvironmentdImageRef != "materialize/environmentd:v26.2.0" {
			t.Errorf("image not recorded: %s", mz.Status.LastCompletedRolloutEnvironmentdImageRef)
		}
		waitFor(t, "generation 1 removed", func() (bool, error) { return !stsExists(1), nil })
		svc, err := kube.CoreV1().Services(ns).Get(ctx, "mz"+id+"-environmentd", metav1.GetOptions{})
		if err != nil || svc.Spec.Selector[children.NameLabel] != prefix(id, 2) {
			t.Errorf("public service not moved to generation 2: %v %v", err, svc.Spec.Selector)
		}
	})

	t.Run("ManuallyPromote", func(t *testing.T) {
		update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
			mz.Spec.RolloutStrategy = v1alpha1.RolloutManuallyPromote
			mz.Spec.EnvironmentdImageRef = "materialize/environmentd:v26.3.0"
			mz.Spec.RequestRollout = "22222222-2222-4222-8222-222222222222"
		})
		if c := upToDate(waitReason(t, ns, "mz", materialize.ReasonReadyToPromote)); c.Status != metav1.ConditionUnknown {
			t.Errorf("a rollout waiting for approval is %s, want Unknown (upstream)", c.Status)
		}
		time.Sleep(500 * time.Millisecond) // several polls: still waiting, nothing promoted
		if n := env.Promotions(prefix(id, 3)); n != 0 {
			t.Fatalf("promoted without approval (%d)", n)
		}
		if mz := get(t, ns, "mz"); mz.Status.ActiveGeneration != 2 || !stsExists(2) {
			t.Fatalf("the old generation must keep serving while waiting: %+v", mz.Status)
		}
		update(t, ns, "mz", func(mz *v1alpha1.Materialize) { mz.Spec.ForcePromote = mz.Spec.RequestRollout })
		waitRolledOut(t, ns, "mz", 3)
		if env.Promotions(prefix(id, 3)) != 1 {
			t.Errorf("want one promotion after approval")
		}
	})

	t.Run("ImmediatelyPromoteCausingDowntime", func(t *testing.T) {
		env.SetAutoAdvance(false)
		env.SetStatus(prefix(id, 4), mzenv.Initializing)
		update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
			mz.Spec.RolloutStrategy = v1alpha1.RolloutImmediatelyPromoteCausingDowntime
			mz.Spec.EnvironmentdImageRef = "materialize/environmentd:v26.4.0"
			mz.Spec.RequestRollout = "33333333-3333-4333-8333-333333333333"
		})
		waitFor(t, "generation 4 created", func() (bool, error) { return stsExists(4), nil })
		waitFor(t, "generation 3 torn down before the new one leads", func() (bool, error) { return !stsExists(3), nil })
		if mz := get(t, ns, "mz"); mz.Status.ActiveGeneration != 3 {
			t.Fatalf("generation 4 recorded active before it leads")
		}
		env.SetStatus(prefix(id, 4), mzenv.ReadyToPromote)
		waitFor(t, "promotion", func() (bool, error) { return env.Promotions(prefix(id, 4)) == 1, nil })
		env.SetStatus(prefix(id, 4), mzenv.IsLeader)
		waitRolledOut(t, ns, "mz", 4)
	})

	t.Run("RolloutTimeout", func(t *testing.T) {
		env.SetAutoAdvance(false)
		env.SetStatus(prefix(id, 5), mzenv.Initializing)
		update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
			mz.Spec.RolloutStrategy = v1alpha1.RolloutWaitUntilReady
			// Long enough that the generation is seen before it is
			// removed, on a loaded machine too.
			mz.Spec.RolloutRequestTimeout = "4s"
			mz.Spec.EnvironmentdImageRef = "materialize/environmentd:v26.5.0"
			mz.Spec.RequestRollout = "44444444-4444-4444-8444-444444444444"
		})
		waitFor(t, "generation 5 created", func() (bool, error) { return stsExists(5), nil })
		mz := waitReason(t, ns, "mz", materialize.ReasonRolloutTimeout)
		if c := upToDate(mz); c.Status != metav1.ConditionFalse || mz.Status.ActiveGeneration != 4 {
			t.Errorf("after the timeout: %+v %+v", c, mz.Status)
		}
		waitFor(t, "generation 5 removed", func() (bool, error) { return !stsExists(5), nil })
		if !stsExists(4) {
			t.Error("the active generation must survive a timed-out rollout")
		}
	})
}

// A resync of a converged environment (a new leadership term lists and
// reconciles every object) writes nothing.
func TestNoOpResyncWritesNothing(t *testing.T) {
	ns := environmentNamespace(t)
	first := startController(t)
	ctx := context.Background()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "quiet"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, ns, "quiet", 1)
	waitFor(t, "balancer", func() (bool, error) {
		_, err := mzClient().MaterializeV1alpha1().Consoles(ns).Get(ctx, "quiet", metav1.GetOptions{})
		return err == nil, nil
	})
	writesSince := func(since time.Time) []string {
		events, err := cp.AuditEvents()
		if err != nil {
			t.Fatal(err)
		}
		var writes []string
		for _, ev := range events {
			if ev.UserAgent == userAgent && ev.IsWrite() && ev.StageTimestamp.After(since) && ev.ObjectRef != nil && ev.ObjectRef.Namespace == ns {
				writes = append(writes, ev.Verb+" "+ev.ObjectRef.Resource+"/"+ev.ObjectRef.Name+" "+ev.ObjectRef.Subresource)
			}
		}
		return writes
	}
	// The first controller is stopped once it has written nothing for a
	// second: what the second one writes is then the resync's alone.
	waitFor(t, "the first controller quiet", func() (bool, error) {
		since := time.Now()
		time.Sleep(time.Second)
		return len(writesSince(since)) == 0, nil
	})
	first.stop()

	since := time.Now()
	startController(t)
	time.Sleep(3 * time.Second)
	if writes := writesSince(since); len(writes) != 0 {
		t.Errorf("a resync of a converged Materialize wrote %d times: %v", len(writes), writes)
	}
}

// With --create-balancers=false and --create-consoles=false the
// environment's Balancer and Console are deleted.
func TestDisabledComponentsAreDeleted(t *testing.T) {
	ns := environmentNamespace(t)
	first := startController(t)
	ctx := context.Background()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, ns, "mz", 1)
	components := func() (bool, bool) {
		_, errB := mzClient().MaterializeV1alpha1().Balancers(ns).Get(ctx, "mz", metav1.GetOptions{})
		_, errC := mzClient().MaterializeV1alpha1().Consoles(ns).Get(ctx, "mz", metav1.GetOptions{})
		return errB == nil, errC == nil
	}
	waitFor(t, "balancer and console", func() (bool, error) { b, c := components(); return b && c, nil })
	first.stop()

	startController(t, func(o *materialize.Options) { o.CreateBalancers, o.CreateConsoles = false, false })
	waitFor(t, "balancer and console deleted", func() (bool, error) { b, c := components(); return !b && !c, nil })
}

// A rollout past its timeout is cancelled only while nothing was promoted:
// once environmentd is promoting, or the promotion is forced, the new
// generation may already have fenced the old one out, and deleting it
// would leave no environment (upstream never cancels these either).
func TestTimeoutNeverCancelsAPromotion(t *testing.T) {
	ns, id, stsExists := firstGeneration(t)
	env.SetAutoAdvance(false)
	t.Cleanup(func() { env.SetAutoAdvance(true) })
	// The timeout leaves the promotion's chain (the new generation's
	// objects, their readiness, a poll of environmentd, the call) seconds
	// to finish on a loaded machine: the rollout's start is counted in
	// whole seconds, so "2s" left as little as one.
	const timeout = 6 * time.Second
	// outlives checks, for a while past the timeout, that the generation
	// survives and the rollout is not cancelled.
	outlives := func(t *testing.T, gen uint64) {
		t.Helper()
		deadline := time.Now().Add(timeout + 2*time.Second)
		for time.Now().Before(deadline) {
			if c := upToDate(get(t, ns, "mz")); c != nil && c.Reason == materialize.ReasonRolloutTimeout {
				t.Fatalf("generation %d cancelled: %s", gen, c.Message)
			}
			if !stsExists(gen) {
				t.Fatalf("generation %d deleted", gen)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	t.Run("promoting", func(t *testing.T) {
		env.SetStatus(prefix(id, 2), mzenv.ReadyToPromote)
		update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
			mz.Spec.RolloutRequestTimeout = timeout.String()
			mz.Spec.EnvironmentdImageRef = "materialize/environmentd:v26.2.0"
			mz.Spec.RequestRollout = "55555555-5555-4555-8555-555555555555"
		})
		waitFor(t, "promotion", func() (bool, error) { return env.Promotions(prefix(id, 2)) == 1, nil })
		// Promoting holds without AutoAdvance, past the timeout.
		outlives(t, 2)
		env.SetStatus(prefix(id, 2), mzenv.IsLeader)
		waitRolledOut(t, ns, "mz", 2)
	})

	t.Run("forced", func(t *testing.T) {
		// Initializing refuses skip-catchup: the forced rollout waits.
		env.SetStatus(prefix(id, 3), mzenv.Initializing)
		update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
			mz.Spec.RolloutStrategy = v1alpha1.RolloutManuallyPromote
			mz.Spec.EnvironmentdImageRef = "materialize/environmentd:v26.3.0"
			mz.Spec.RequestRollout = "66666666-6666-4666-8666-666666666666"
			mz.Spec.ForcePromote = "66666666-6666-4666-8666-666666666666"
		})
		waitFor(t, "generation 3 created", func() (bool, error) { return stsExists(3), nil })
		outlives(t, 3)
		env.SetStatus(prefix(id, 3), mzenv.ReadyToPromote)
		waitFor(t, "promotion", func() (bool, error) { return env.Promotions(prefix(id, 3)) == 1, nil })
		env.SetStatus(prefix(id, 3), mzenv.IsLeader)
		waitRolledOut(t, ns, "mz", 3)
	})
}

// A field removed from the Materialize is removed from the Balancer and
// Console it owns: the no-op check compares the operator's own fields, not
// a subset of the live object.
func TestRemovedFieldsLeaveTheBalancerAndConsole(t *testing.T) {
	ns := environmentNamespace(t)
	startController(t)
	ctx := context.Background()
	mz := newMaterialize(ns, "mz")
	limits := &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
	mz.Spec.BalancerdResourceRequirements = limits
	mz.Spec.ConsoleResourceRequirements = limits
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, ns, "mz", 1)
	memoryLimit := func() (string, string) {
		b, errB := mzClient().MaterializeV1alpha1().Balancers(ns).Get(ctx, "mz", metav1.GetOptions{})
		c, errC := mzClient().MaterializeV1alpha1().Consoles(ns).Get(ctx, "mz", metav1.GetOptions{})
		if errB != nil || errC != nil || b.Spec.ResourceRequirements == nil || c.Spec.ResourceRequirements == nil {
			return "?", "?"
		}
		return b.Spec.ResourceRequirements.Limits.Memory().String(), c.Spec.ResourceRequirements.Limits.Memory().String()
	}
	waitFor(t, "1Gi limits on the Balancer and Console", func() (bool, error) {
		b, c := memoryLimit()
		return b == "1Gi" && c == "1Gi", nil
	})
	// What remains is a subset of what the Balancer and Console hold.
	requests := &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
	update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
		mz.Spec.BalancerdResourceRequirements = requests
		mz.Spec.ConsoleResourceRequirements = requests
	})
	waitFor(t, "the limits removed from the Balancer and Console", func() (bool, error) {
		b, c := memoryLimit()
		return b == "0" && c == "0", nil
	})
}

// Upstream's condition semantics, which automation built on upstream reads:
// a spec change without a new request is False/WaitingForApproval, and a
// ManuallyPromote rollout driven at v1 is approved with the rollout hash.
func TestUpstreamConditionSemantics(t *testing.T) {
	env.SetAutoAdvance(true)
	ns := newNamespace(t)
	startController(t)
	ctx := context.Background()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, ns, "mz", 1)

	update(t, ns, "mz", func(mz *v1alpha1.Materialize) { mz.Spec.EnvironmentdExtraArgs = []string{"--startup-log-filter=debug"} })
	if c := upToDate(waitReason(t, ns, "mz", materialize.ReasonWaitingForApproval)); c.Status != metav1.ConditionFalse {
		t.Errorf("a change without a request is %s, want False", c.Status)
	}

	// At v1 the request is the rollout hash's UUIDv5 and the approval is the
	// hash itself (what a v1 client reads as status.requestedRolloutHash).
	// What the hash covers and a typed copy loses: an empty map and a
	// quantity as written.
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Patch(context.Background(), "mz", types.MergePatchType,
		[]byte(`{"spec":{"podLabels":{},"environmentdResourceRequirements":{"limits":{"memory":"1024Mi"}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
		mz.Spec.RolloutStrategy = v1alpha1.RolloutManuallyPromote
		mz.Spec.RequestRollout = "77777777-7777-4777-8777-777777777777"
	})
	waitReason(t, ns, "mz", materialize.ReasonReadyToPromote)
	// status.requestedRolloutHash as a v1 client reads it: the stored object
	// converted as the webhook converts it.
	stored, err := mzClient().MaterializeV1alpha1().RESTClient().Get().Namespace(ns).Resource("materializes").Name("mz").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(stored, &obj); err != nil {
		t.Fatal(err)
	}
	v1obj, err := conversion.Convert(obj, conversion.V1)
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := v1obj["status"].(map[string]any)["requestedRolloutHash"].(string)
	if hash == "" {
		t.Fatalf("no requestedRolloutHash at v1: %v", v1obj["status"])
	}
	update(t, ns, "mz", func(mz *v1alpha1.Materialize) { mz.Spec.ForcePromote = hash })
	waitRolledOut(t, ns, "mz", 2)
}

// A request withdrawn mid-rollout tears the new generation down (it would
// hold back compaction), and the environment is not reported as applied for
// a spec its generations no longer run, as upstream.
func TestWithdrawnRequestTearsDownTheNewGeneration(t *testing.T) {
	ns, _, stsExists := firstGeneration(t)
	env.SetAutoAdvance(false)
	t.Cleanup(func() { env.SetAutoAdvance(true) })
	before := get(t, ns, "mz").Spec
	update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
		mz.Spec.EnvironmentdImageRef = "materialize/environmentd:v26.2.0"
		mz.Spec.RequestRollout = "88888888-8888-4888-8888-888888888888"
	})
	waitFor(t, "generation 2 created", func() (bool, error) { return stsExists(2), nil })
	update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
		mz.Spec.EnvironmentdImageRef = before.EnvironmentdImageRef
		mz.Spec.RequestRollout = before.RequestRollout
	})
	waitFor(t, "generation 2 removed", func() (bool, error) { return !stsExists(2), nil })
	mz := waitReason(t, ns, "mz", materialize.ReasonWaitingForApproval)
	if mz.Status.ActiveGeneration != 1 || !stsExists(1) {
		t.Errorf("the active generation must stay: %+v", mz.Status)
	}
}

// A first rollout quicker than the quiet window writes the Materialize's
// status three times against the real API server: upstream's initial status
// (resourceId) with Applying, then Promoting and Applied. environmentd's
// progress (the stand-in answers Initializing once before it is ready)
// changes only the message, which waits.
func TestFirstRolloutWritesItsStatusAtItsTransitionsOnly(t *testing.T) {
	ns := environmentNamespace(t)
	startController(t, func(o *materialize.Options) { o.WaitingAfter = time.Hour })
	since := time.Now()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, ns, "mz", 1)
	time.Sleep(time.Second) // a late write would land meanwhile
	writes := statusWrites(t, ns, since)
	if writes != 3 {
		t.Errorf("the first rollout wrote the Materialize's status %d times, want 3 (resourceId with Applying, Promoting, Applied)", writes)
	}
}

// statusWrites counts the controller's writes of the status of the
// Materializes in ns since then, from the audit log.
func statusWrites(t *testing.T, ns string, since time.Time) int {
	t.Helper()
	events, err := cp.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	writes := 0
	for _, ev := range events {
		if ev.UserAgent == userAgent && ev.IsWrite() && ev.Succeeded() && ev.StageTimestamp.After(since) && ev.ObjectRef != nil &&
			ev.ObjectRef.Namespace == ns && ev.ObjectRef.Resource == "materializes" && ev.ObjectRef.Subresource == "status" {
			writes++
		}
	}
	return writes
}

// environmentd on a fresh catalog leads at once (upstream's 0dt preflight:
// "catalog not initialized; booting with writes allowed"): the first
// rollout then writes the status twice (the resourceId with Applying, then
// Applied), and sends no promotion.
func TestFirstRolloutOfAFreshCatalogIsNotPromoted(t *testing.T) {
	ns := environmentNamespace(t)
	env.SetAutoAdvance(true)
	env.SetCatalog(standin.ServiceCatalog)
	t.Cleanup(func() { env.SetCatalog(nil) })
	startController(t, func(o *materialize.Options) { o.WaitingAfter = time.Hour })
	since := time.Now()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mz := waitRolledOut(t, ns, "mz", 1)
	time.Sleep(time.Second) // a late write would land meanwhile
	if n := env.Promotions(prefix(mz.Status.ResourceID, 1)); n != 0 {
		t.Errorf("%d promotions of a fresh catalog's first generation, want 0", n)
	}
	writes := statusWrites(t, ns, since)
	if writes != 2 {
		t.Errorf("the first rollout wrote the Materialize's status %d times, want 2 (resourceId with Applying, then Applied)", writes)
	}
}

// A new Materialize's first status write holds its resourceId with the
// rollout's start (Applying), and every field upstream's typed reader needs;
// the children follow it.
func TestFirstStatusWriteStartsTheRollout(t *testing.T) {
	ns := newNamespaceWithoutPods(t)
	startController(t, func(o *materialize.Options) { o.WaitingAfter = time.Hour })
	since := time.Now()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, ns, "mz", materialize.ReasonApplying)
	waitFor(t, "generation 1's StatefulSet", func() (bool, error) { return stsExists(t, ns, got.Status.ResourceID, 1), nil })
	time.Sleep(time.Second) // a late write would land meanwhile
	if n := statusWrites(t, ns, since); n != 1 {
		t.Errorf("%d status writes while generation 1 waits for its pod, want 1 (the resourceId with Applying)", n)
	}
	requireStatusFields(t, ns, "mz", "resourceId", "observedGeneration", "activeGeneration",
		"lastCompletedRolloutRequest", "resourcesHash", "conditions")
}

// A rollout applies its StatefulSet once, whatever the spec's resources
// say: one side of them set alone (requests without limits) was applied
// as null for the other, which the live object never holds, so the no-op
// check never matched and every pass of the rollout applied it again.
func TestOneSidedResourcesApplyTheStatefulSetOnce(t *testing.T) {
	ns := environmentNamespace(t)
	startController(t)
	since := time.Now()
	mz := newMaterialize(ns, "requests-only")
	mz.Spec.EnvironmentdResourceRequirements = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, ns, "requests-only", 1)
	events, err := cp.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	applies := 0
	for _, ev := range events {
		if ev.UserAgent == userAgent && ev.IsWrite() && ev.StageTimestamp.After(since) && ev.ObjectRef != nil &&
			ev.ObjectRef.Namespace == ns && ev.ObjectRef.Resource == "statefulsets" {
			applies++
		}
	}
	if applies != 1 {
		t.Errorf("the rollout applied its StatefulSet %d times, want 1", applies)
	}
	sts, err := kubernetes.NewForConfigOrDie(cp.Config).AppsV1().StatefulSets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(sts.Items) != 1 {
		t.Fatalf("StatefulSets: %v, %v", sts, err)
	}
	if got := sts.Items[0].Spec.Template.Spec.Containers[0].Resources; got.Requests.Memory().String() != "1Gi" || got.Limits != nil {
		t.Errorf("environmentd's resources %+v, want the requests alone", got)
	}
}
