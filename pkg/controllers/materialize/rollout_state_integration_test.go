package materialize_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
	"github.com/materializeinc/orchestratord/test/fixture"
)

// As upstream, environmentd's leader API is asked only once the
// generation's StatefulSet has a ready replica; meanwhile the rollout is
// recorded, typed, in status.rollout.
func TestLeaderAPIWaitsForAReadyPod(t *testing.T) {
	env.SetAutoAdvance(true)
	ns := newNamespaceWithoutPods(t)
	fixture.KeepBalancersReady(t, mzClient(), ns)
	startController(t)
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var mz *v1alpha1.Materialize
	waitFor(t, "a rollout waiting for its pod", func() (bool, error) {
		mz = get(t, ns, "mz")
		c := upToDate(mz)
		return c != nil && c.Reason == materialize.ReasonApplying && strings.Contains(c.Message, "waiting for its pod to be ready"), nil
	})
	id := mz.Status.ResourceID
	// The status is written first, then the generation applied.
	waitFor(t, "generation 1 created", func() (bool, error) { return stsExists(t, ns, id, 1), nil })
	r := mz.Status.Rollout
	if r == nil || r.Generation != 1 || r.Request != mz.Spec.RequestRollout || r.StartedAt.IsZero() || r.PromotionSentAt != nil ||
		r.EnvironmentdImageRef != mz.Spec.EnvironmentdImageRef {
		t.Fatalf("status.rollout = %+v", r)
	}
	if n := env.Requests(prefix(id, 1)); n != 0 {
		t.Errorf("environmentd asked %d times before its pod was ready", n)
	}
	fixture.KeepStatefulSetsReady(t, kubernetes.NewForConfigOrDie(cp.Config), ns)
	mz = waitRolledOut(t, ns, "mz", 1)
	if mz.Status.Rollout != nil {
		t.Errorf("status.rollout after the rollout completed: %+v", mz.Status.Rollout)
	}
	if n := env.Promotions(prefix(id, 1)); n != 1 {
		t.Errorf("promoted %d times, want 1", n)
	}
}

// As upstream, two environments cannot share an environmentId: the running
// one, else the oldest, wins; the other gets a FailedDeploy condition that names neither the
// winner nor its namespace (another tenant's), and nothing is created for
// it, even when both are new when the controller first sees them.
func TestSharedEnvironmentIDIsRefused(t *testing.T) {
	ns, otherTenant := environmentNamespace(t), environmentNamespace(t)
	ctx := context.Background()
	first := newMaterialize(otherTenant, "first")
	first.Spec.EnvironmentID = uuid.NewString()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(otherTenant).Create(ctx, first, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Creation timestamps have a second's resolution.
	time.Sleep(1100 * time.Millisecond)
	second := newMaterialize(ns, "second")
	second.Spec.EnvironmentID = first.Spec.EnvironmentID
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startController(t, fastPreflight)
	waitRolledOut(t, otherTenant, "first", 1)
	got := waitReason(t, ns, "second", materialize.ReasonFailedDeploy)
	c := upToDate(got)
	if want := "spec.environmentId is the environmentId of another Materialize, which keeps it"; !strings.Contains(c.Message, want) {
		t.Fatalf("condition %q, want it to contain %q", c.Message, want)
	}
	if strings.Contains(c.Message, otherTenant) || strings.Contains(c.Message, "first") {
		t.Errorf("the condition names the other tenant's Materialize: %q", c.Message)
	}
	if stsExists(t, ns, got.Status.ResourceID, 1) {
		t.Error("a generation was created for a duplicate environmentId")
	}
	if c := upToDate(get(t, otherTenant, "first")); c.Reason != materialize.ReasonApplied {
		t.Errorf("the first environment is disturbed: %s %s", c.Reason, c.Message)
	}
	// environmentId is immutable: the fix is a new Materialize.
	third := newMaterialize(ns, "third")
	third.Spec.EnvironmentID = uuid.NewString()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, third, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, ns, "third", 1)

	// A Materialize that never ran (its backend Secret is missing, so no
	// license key fills its environmentId), whose environmentId is set
	// afterwards (it may be, once) to a running environment's, does not
	// take it though it is older: it is refused, and the running
	// environment's next rollout goes on.
	idle := newMaterialize(otherTenant, "idle")
	idle.Spec.BackendSecretName = "missing"
	if _, err := mzClient().MaterializeV1alpha1().Materializes(otherTenant).Create(ctx, idle, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReason(t, otherTenant, "idle", materialize.ReasonFailedDeploy)
	time.Sleep(1100 * time.Millisecond) // so that third is the younger
	third = newMaterialize(ns, "fourth")
	third.Spec.EnvironmentID = uuid.NewString()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, third, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, ns, "fourth", 1)
	update(t, otherTenant, "idle", func(mz *v1alpha1.Materialize) {
		mz.Spec.EnvironmentID = third.Spec.EnvironmentID
		mz.Spec.BackendSecretName = "backend"
		mz.Spec.RequestRollout = uuid.NewString()
	})
	waitFor(t, "the idle Materialize refused the running environment's id", func() (bool, error) {
		c := upToDate(get(t, otherTenant, "idle"))
		return c != nil && strings.Contains(c.Message, "which keeps it"), nil
	})
	update(t, ns, "fourth", func(mz *v1alpha1.Materialize) {
		mz.Spec.RequestRollout = uuid.NewString()
		mz.Spec.ForceRollout = uuid.NewString()
	})
	waitRolledOut(t, ns, "fourth", 2)
}

// As upstream, an environment recreated over an existing catalog resumes
// after the generation its annotation names: environmentd refuses to run a
// generation older than the one its catalog recorded.
func TestLastKnownActiveGenerationIsRestored(t *testing.T) {
	ns := environmentNamespace(t)
	startController(t)
	mz := newMaterialize(ns, "mz")
	mz.Annotations = map[string]string{materialize.LastKnownActiveGenerationAnnotation: "7"}
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitRolledOut(t, ns, "mz", 8)
	if !stsExists(t, ns, got.Status.ResourceID, 8) || stsExists(t, ns, got.Status.ResourceID, 1) {
		t.Error("generation 8, and only it, should run")
	}
	if got.Status.LastCompletedRolloutEnvironmentdImageRef != mz.Spec.EnvironmentdImageRef {
		t.Errorf("lastCompletedRolloutEnvironmentdImageRef = %q", got.Status.LastCompletedRolloutEnvironmentdImageRef)
	}
}

// A switch from upstream orchestratord mid-rollout keeps the rollout's
// clock: upstream's status has no status.rollout, only its UpToDate
// condition, Unknown since the rollout began. Before the state was typed
// the clock restarted (the condition's message lacked this operator's
// prefix), so a rollout begun 25 hours earlier was given another 24.
func TestRolloutAdoptedFromUpstreamKeepsItsClock(t *testing.T) {
	env.SetAutoAdvance(true)
	t.Cleanup(func() { env.SetAutoAdvance(true) })
	ns := newNamespace(t)
	fixture.KeepBalancersReady(t, mzClient(), ns)
	first := startController(t)
	ctx := context.Background()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	id := waitRolledOut(t, ns, "mz", 1).Status.ResourceID
	env.SetAutoAdvance(false)
	update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
		mz.Spec.EnvironmentdImageRef = "materialize/environmentd:v26.2.0"
		mz.Spec.RequestRollout = uuid.NewString()
	})
	waitFor(t, "generation 2 applying", func() (bool, error) {
		c := upToDate(get(t, ns, "mz"))
		return c.Reason == materialize.ReasonApplying && stsExists(t, ns, id, 2), nil
	})
	first.stop()

	mz := get(t, ns, "mz")
	mz.Status.Rollout = nil
	mz.Status.Conditions = []metav1.Condition{{Type: materialize.ConditionUpToDate, Status: metav1.ConditionUnknown,
		Reason: materialize.ReasonApplying, Message: "Applying changes for generation 2", ObservedGeneration: mz.Generation,
		LastTransitionTime: metav1.NewTime(time.Now().Add(-25 * time.Hour))}}
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).UpdateStatus(ctx, mz, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	startController(t)
	got := waitReason(t, ns, "mz", materialize.ReasonRolloutTimeout)
	if got.Status.ActiveGeneration != 1 || got.Status.Rollout != nil {
		t.Errorf("status after the timeout: %+v", got.Status)
	}
	waitFor(t, "generation 2 removed", func() (bool, error) { return !stsExists(t, ns, id, 2), nil })
}

// A generation the API server refuses to create (here an admission policy;
// in practice a quota, Gatekeeper or Kyverno) is a FailedDeploy with the
// API server's reason, and the rollout is recorded before anything is
// touched: with ImmediatelyPromoteCausingDowntime the active generation is
// already gone, so a spec reverted meanwhile must not be reported as
// Applied. Before, the rollout was written only after the apply succeeded:
// the error left no condition, and the revert read as "No changes found"
// with no generation running.
func TestRefusedGenerationIsAFailedDeploy(t *testing.T) {
	ns := environmentNamespace(t)
	startController(t, fastPreflight)
	ctx := context.Background()
	mz := newMaterialize(ns, "mz")
	mz.Spec.RolloutStrategy = v1alpha1.RolloutImmediatelyPromoteCausingDowntime
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := waitRolledOut(t, ns, "mz", 1)
	id := first.Status.ResourceID
	release := denyStatefulSet(t, ns, prefix(id, 2))

	update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
		mz.Spec.EnvironmentdImageRef = "materialize/environmentd:v26.2.0"
		mz.Spec.RequestRollout = uuid.NewString()
	})
	got := waitReason(t, ns, "mz", materialize.ReasonFailedDeploy)
	if c := upToDate(got); !strings.Contains(c.Message, "Failed to apply changes for generation 2") || !strings.Contains(c.Message, "denied") {
		t.Errorf("condition %q: want the generation and the API server's reason", c.Message)
	}
	if got.Status.Rollout == nil || got.Status.Rollout.Generation != 2 {
		t.Errorf("status.rollout = %+v, want the rollout to generation 2 recorded", got.Status.Rollout)
	}
	waitFor(t, "generation 1 removed (ImmediatelyPromoteCausingDowntime)", func() (bool, error) { return !stsExists(t, ns, id, 1), nil })

	// The spec reverted, the request kept: generation 1 is gone, so this is
	// still a rollout, not "No changes found".
	update(t, ns, "mz", func(mz *v1alpha1.Materialize) { mz.Spec.EnvironmentdImageRef = first.Spec.EnvironmentdImageRef })
	time.Sleep(time.Second)
	if c := upToDate(get(t, ns, "mz")); c.Reason == materialize.ReasonApplied {
		t.Fatalf("reported %s (%s) with no generation running", c.Reason, c.Message)
	}
	release()
	// Each refused apply doubled the Materialize's retry delay (up to five
	// minutes); a user's change is acted on at once.
	update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
		metav1.SetMetaDataAnnotation(&mz.ObjectMeta, "test/nudge", "policy removed")
	})
	waitRolledOut(t, ns, "mz", 2)
}

// An environment object the API server refuses while no rollout is
// pending (a change to the ServiceAccount's labels, which needs none) has
// no rollout to record it on: the condition stays the running generation's,
// and a Warning Event says what was refused. Before, only a log line did.
func TestRefusedEnvironmentObjectOutsideARolloutIsAnEvent(t *testing.T) {
	ns := environmentNamespace(t)
	c := startController(t)
	ctx := context.Background()
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, ns, "mz", 1)
	drainEvents(c)
	update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
		mz.Spec.ServiceAccountLabels = map[string]string{"team": "not a label value"}
	})
	deadline := time.After(30 * time.Second)
	for seen := false; !seen; {
		select {
		case e := <-c.events.Events:
			seen = strings.HasPrefix(e, "Warning "+materialize.ReasonFailedApply+" Failed to apply environment objects: ") &&
				strings.Contains(e, "not a label value")
		case <-deadline:
			t.Fatal("no Warning FailedApply Event naming the refused label")
		}
	}
	if cond := upToDate(get(t, ns, "mz")); cond.Reason != materialize.ReasonApplied {
		t.Errorf("condition %s (%s): the running generation's Applied is kept", cond.Reason, cond.Message)
	}
}

// drainEvents empties the recorder's channel.
func drainEvents(c *running) {
	for {
		select {
		case <-c.events.Events:
		default:
			return
		}
	}
}

// denyStatefulSet makes the API server refuse to create the named
// StatefulSet in ns, until the returned function is called.
func denyStatefulSet(t *testing.T, ns, name string) (release func()) {
	t.Helper()
	ctx := context.Background()
	admission := kubernetes.NewForConfigOrDie(cp.Config).AdmissionregistrationV1()
	policyName := "deny-" + ns
	fail := admissionregistrationv1.Fail
	forbidden := metav1.StatusReasonForbidden
	_, err := admission.ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"statefulsets"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `object.metadata.name != "` + name + `"`,
				Message:    "denied by the test's admission policy",
				Reason:     &forbidden, // 403, as a quota or a policy engine answers; not Invalid
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admission.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dryRunCreate := func() error {
		_, err := kubernetes.NewForConfigOrDie(cp.Config).AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"probe": "x"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"probe": "x"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		_ = admission.ValidatingAdmissionPolicyBindings().Delete(ctx, policyName, metav1.DeleteOptions{})
		_ = admission.ValidatingAdmissionPolicies().Delete(ctx, policyName, metav1.DeleteOptions{})
		// The API server stops enforcing it once it has unloaded it.
		waitFor(t, "the admission policy to admit", func() (bool, error) {
			err := dryRunCreate()
			return err == nil || apierrors.IsAlreadyExists(err), nil
		})
	}
	t.Cleanup(release)
	// The policy takes effect once the API server has loaded it.
	waitFor(t, "the admission policy to deny", func() (bool, error) {
		err := dryRunCreate()
		return err != nil && strings.Contains(err.Error(), "denied"), nil
	})
	return release
}
