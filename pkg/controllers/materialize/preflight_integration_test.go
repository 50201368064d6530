package materialize_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	mzac "github.com/materializeinc/orchestratord/pkg/client/applyconfiguration/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
	"github.com/materializeinc/orchestratord/pkg/mzuuid"
	"github.com/materializeinc/orchestratord/test/fixture"
	"github.com/materializeinc/orchestratord/test/standin/licensekey"
)

func fastPreflight(o *materialize.Options) { o.PreflightRetry = 200 * time.Millisecond }

// Bad input environmentd would refuse is a FailedDeploy condition naming the
// problem; no generation is created, and fixing the input lets the rollout
// finish.
func TestPreflightProblemsAreConditionsUntilFixed(t *testing.T) {
	env.SetAutoAdvance(true)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, ns string, mz *v1alpha1.Materialize)
		want  string
		fix   func(t *testing.T, ns string, mz *v1alpha1.Materialize)
	}{
		{"no license key", func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
			patchSecret(t, ns, `{"data":{"license_key":null}}`)
		}, `backend Secret "backend" has no "license_key" entry: environmentd refuses to start in Kubernetes without a license key`,
			func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
				patchSecret(t, ns, `{"stringData":{"license_key":"`+fixture.License+`"}}`)
			}},
		{"no mz_system password with Password authentication", func(t *testing.T, ns string, mz *v1alpha1.Materialize) {
			mz.Spec.AuthenticatorKind = v1alpha1.AuthenticatorPassword
			patchSecret(t, ns, `{"data":{"external_login_password_mz_system":null}}`)
		}, `has no "external_login_password_mz_system" entry: authenticatorKind Password needs the password of mz_system`,
			func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
				patchSecret(t, ns, `{"stringData":{"external_login_password_mz_system":"`+fixture.MzSystemPassword+`"}}`)
			}},
		{"no backend Secret", func(t *testing.T, ns string, mz *v1alpha1.Materialize) {
			mz.Spec.BackendSecretName = "elsewhere"
		}, `backend Secret "elsewhere" (spec.backendSecretName) does not exist`,
			func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
				if _, err := kube.CoreV1().Secrets(ns).Create(ctx, fixture.BackendSecret(ns, "elsewhere"), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}},
		// Not a name at all: the client refuses the request itself, with an
		// error that is not NotFound; before, the reconcile was retried for
		// ever with no condition.
		{"a backend Secret name that names nothing", func(t *testing.T, ns string, mz *v1alpha1.Materialize) {
			mz.Spec.BackendSecretName = "a/b"
		}, `spec.backendSecretName "a/b" is not a Secret's name`,
			func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
				update(t, ns, "mz", func(mz *v1alpha1.Materialize) { mz.Spec.BackendSecretName = "backend" })
			}},
		{"a system parameter ConfigMap name that names nothing", func(t *testing.T, ns string, mz *v1alpha1.Materialize) {
			mz.Spec.SystemParameterConfigmapName = ".."
		}, `spec.systemParameterConfigmapName ".." is not a ConfigMap's name`,
			func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
				update(t, ns, "mz", func(mz *v1alpha1.Materialize) { mz.Spec.SystemParameterConfigmapName = "" })
			}},
		// Another environment's resource ID would put these pods in its
		// NetworkPolicies.
		{"a pod label in the operator's domain", func(t *testing.T, ns string, mz *v1alpha1.Materialize) {
			mz.Spec.PodLabels = map[string]string{"team": "a", "materialize.cloud/mz-resource-id": "u1"}
		}, `spec.podLabels: "materialize.cloud/mz-resource-id" is in the materialize.cloud domain`,
			func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
				update(t, ns, "mz", func(mz *v1alpha1.Materialize) { mz.Spec.PodLabels = map[string]string{"team": "a"} })
			}},
		{"missing system parameter ConfigMap", func(t *testing.T, ns string, mz *v1alpha1.Materialize) {
			mz.Spec.SystemParameterConfigmapName = "params"
		}, `ConfigMap "params" (spec.systemParameterConfigmapName) does not exist`,
			func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "params"}, Data: map[string]string{"system-params.json": "{}"}}
				if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}},
		{"Oidc on an environmentd older than 26.12", func(t *testing.T, ns string, mz *v1alpha1.Materialize) {
			mz.Spec.EnvironmentdImageRef = "materialize/environmentd:v26.5.0"
			mz.Spec.AuthenticatorKind = v1alpha1.AuthenticatorOidc
		}, "authenticatorKind Oidc needs environmentd 26.12.0-dev.0 or later; image materialize/environmentd:v26.5.0 is environmentd 26.5.0, which has no Oidc listeners",
			func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
				update(t, ns, "mz", func(mz *v1alpha1.Materialize) { mz.Spec.EnvironmentdImageRef = "materialize/environmentd:v26.12.0" })
			}},
		{"a license key that is no JWT", func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
			patchSecret(t, ns, `{"stringData":{"license_key":"TEST-STAND-IN-LICENSE-KEY"}}`)
		}, `backend Secret "backend": "license_key" is not a license key environmentd accepts: not a JWT`,
			func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
				patchSecret(t, ns, `{"stringData":{"license_key":"`+fixture.License+`"}}`)
			}},
		{"an expired license key that disables environmentd", func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
			patchSecret(t, ns, `{"stringData":{"license_key":"`+mintLicense(t, "00000000-0000-0000-0000-000000000000", time.Now().Add(-time.Hour))+`"}}`)
		}, "the license key expired at", func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
			patchSecret(t, ns, `{"stringData":{"license_key":"`+fixture.License+`"}}`)
		}},
		{"a license key for another environment", func(t *testing.T, ns string, mz *v1alpha1.Materialize) {
			mz.Spec.EnvironmentID = "0b0b0b0b-1111-4222-8333-44444444ee01"
			patchSecret(t, ns, `{"stringData":{"license_key":"`+mintLicense(t, "1c1c1c1c-1111-4222-8333-444444444444", time.Now().Add(time.Hour))+`"}}`)
		}, "but does not match the environment_id set in the associated license key 1c1c1c1c-1111-4222-8333-444444444444",
			func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
				patchSecret(t, ns, `{"stringData":{"license_key":"`+mintLicense(t, "0B0B0B0B11114222833344444444EE01", time.Now().Add(time.Hour))+`"}}`)
			}},
		{"an environmentd older than 26.1", func(t *testing.T, ns string, mz *v1alpha1.Materialize) {
			mz.Spec.EnvironmentdImageRef = "materialize/environmentd:v0.147.20"
		}, "environmentd 0.147.20 (image materialize/environmentd:v0.147.20) is older than 26.1.0-dev.0, the oldest version this operator runs",
			func(t *testing.T, ns string, _ *v1alpha1.Materialize) {
				update(t, ns, "mz", func(mz *v1alpha1.Materialize) { mz.Spec.EnvironmentdImageRef = "materialize/environmentd:v26.1.0" })
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := newNamespace(t)
			startController(t, fastPreflight)
			mz := newMaterialize(ns, "mz")
			c.setup(t, ns, mz)
			if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, mz, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			got := waitReason(t, ns, "mz", materialize.ReasonFailedDeploy)
			cond := upToDate(got)
			if cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, c.want) {
				t.Errorf("condition %s: %q, want a message containing %q", cond.Status, cond.Message, c.want)
			}
			if stsExists(t, ns, got.Status.ResourceID, 1) {
				t.Error("a generation was created despite the problem")
			}
			// This is the first status written (the resourceId with the
			// rollout's first decision): upstream's typed reader needs
			// every one of these fields to read the object at all.
			requireStatusFields(t, ns, "mz", "resourceId", "observedGeneration", "activeGeneration",
				"lastCompletedRolloutRequest", "resourcesHash", "conditions")
			c.fix(t, ns, got)
			waitRolledOut(t, ns, "mz", 1)
		})
	}
}

// Where the operator may not read Secrets (the chart's
// controllers.secretNamespaces leaves the namespace out), the pre-flight
// check says so and names the value, instead of retrying the read for
// ever; the environment id stays unset, as for a missing Secret. Granting
// the read lets the rollout go on.
func TestABackendSecretTheOperatorMayNotReadIsNamed(t *testing.T) {
	env.SetAutoAdvance(true)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ctx := context.Background()
	const user = "operator-without-secrets"
	everything := []string{rbacv1.VerbAll}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Verbs: everything,
			Resources: []string{"configmaps", "events", "namespaces", "persistentvolumeclaims", "pods", "serviceaccounts", "services"}},
		{APIGroups: []string{"apps", "coordination.k8s.io", "events.k8s.io", "materialize.cloud", "networking.k8s.io", "rbac.authorization.k8s.io", "cert-manager.io"},
			Resources: []string{rbacv1.ResourceAll}, Verbs: everything},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(ctx, user, metav1.DeleteOptions{})
		_ = kube.RbacV1().ClusterRoles().Delete(ctx, user, metav1.DeleteOptions{})
	})
	identity := rest.CopyConfig(cp.Config)
	identity.Impersonate = rest.ImpersonationConfig{UserName: user}
	ns := newNamespace(t)
	startControllerAs(t, identity, fastPreflight)
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, ns, "mz", materialize.ReasonFailedDeploy)
	want := fmt.Sprintf(`the operator may not read Secrets in namespace %q, so not backend Secret "backend": grant it get on Secrets there `+
		`(with the chart: list the namespace in controllers.secretNamespaces, when that is set)`, ns)
	if cond := upToDate(got); cond.Message != want {
		t.Errorf("condition: %q, want %q", cond.Message, want)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, materialize.ConditionLicenseKey); cond == nil ||
		cond.Status != metav1.ConditionFalse || cond.Reason != materialize.ReasonLicenseInvalid || cond.Message != want {
		t.Errorf("LicenseKey condition %+v, want False/Invalid: %s", cond, want)
	}
	if mzuuid.IsSet(got.Spec.EnvironmentID) {
		t.Errorf("spec.environmentId %q filled without the license key", got.Spec.EnvironmentID)
	}
	// What the chart renders in each of controllers.secretNamespaces.
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secrets"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "secrets"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "secrets"},
		Subjects: binding.Subjects}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, ns, "mz", 1)
}

// An image tag that is not a version runs as the newest environmentd, as
// upstream does, and the rollout's condition says so.
func TestUnversionedImageTagIsNamedInTheRollout(t *testing.T) {
	msg := applyingMessage(t, func(mz *v1alpha1.Materialize) { mz.Spec.EnvironmentdImageRef = "materialize/environmentd:dev" })
	if !strings.Contains(msg, `image tag "dev" is not a version vMAJOR.MINOR.PATCH, so it is run as the newest environmentd`) {
		t.Errorf("Applying message %q does not explain the tag", msg)
	}
}

// A rolloutRequestTimeout that does not parse is upstream's default, 24h,
// as upstream; unlike upstream, the rollout's condition says so.
func TestUnparsableRolloutTimeoutIsNamedInTheRollout(t *testing.T) {
	msg := applyingMessage(t, func(mz *v1alpha1.Materialize) { mz.Spec.RolloutRequestTimeout = "soon" })
	if !strings.Contains(msg, `spec.rolloutRequestTimeout "soon" is not a duration such as 24h, 90m or 1h 30m, so the default 1day applies`) {
		t.Errorf("Applying message %q does not say the timeout is the default", msg)
	}
}

// applyingMessage creates a Materialize changed by mutate and returns its
// first Applying message (environmentd never becomes ready).
func applyingMessage(t *testing.T, mutate func(*v1alpha1.Materialize)) string {
	t.Helper()
	env.SetAutoAdvance(false)
	t.Cleanup(func() { env.SetAutoAdvance(true) })
	ns := newNamespace(t)
	startController(t)
	mz := newMaterialize(ns, "mz")
	mutate(mz)
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return upToDate(waitReason(t, ns, "mz", materialize.ReasonApplying)).Message
}

func patchSecret(t *testing.T, ns, patch string) {
	t.Helper()
	_, err := kubernetes.NewForConfigOrDie(cp.Config).CoreV1().Secrets(ns).Patch(context.Background(), "backend", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func stsExists(t *testing.T, ns, id string, gen int) bool {
	t.Helper()
	_, err := kubernetes.NewForConfigOrDie(cp.Config).AppsV1().StatefulSets(ns).Get(context.Background(), prefix(id, uint64(gen)), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// Network policies follow the operator's switches: turned off, the ones it
// made are deleted.
func TestNetworkPoliciesFollowTheSwitches(t *testing.T) {
	env.SetAutoAdvance(true)
	ns := newNamespace(t)
	enabled := func(o *materialize.Options) {
		o.Config = materialize.DefaultConfig()
		o.Config.NetworkPoliciesInternalEnabled = true
		o.Config.OperatorNamespace = "orchestratord"
		o.Config.OperatorPodSelectorLabels = []string{"app.kubernetes.io/component=controllers"}
	}
	first := startController(t, enabled)
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mz := waitRolledOut(t, ns, "mz", 1)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	names := func() []string {
		list, err := kube.NetworkingV1().NetworkPolicies(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range list.Items {
			out = append(out, p.Name)
		}
		return out
	}
	id := mz.Status.ResourceID
	if got := strings.Join(names(), ","); got != "mz"+id+"-allow-all-within-environment,mz"+id+"-allow-orchestratord" {
		t.Fatalf("policies with internal enabled: %s", got)
	}
	first.stop()
	startController(t) // the switch off
	update(t, ns, "mz", func(mz *v1alpha1.Materialize) { mz.Spec.PodLabels = map[string]string{"nudge": "1"} })
	waitFor(t, "policies deleted", func() (bool, error) { return len(names()) == 0, nil })
}

// As upstream (within_upgrade_window): a rollout more than one major
// version ahead of what the last completed rollout ran, or back to an older
// version, is refused with upstream's message, and nothing is created.
func TestUpgradeWindowIsEnforced(t *testing.T) {
	env.SetAutoAdvance(true)
	ns := newNamespace(t)
	startController(t, fastPreflight)
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := waitRolledOut(t, ns, "mz", 1)
	for _, image := range []string{"materialize/environmentd:v28.0.0", "materialize/environmentd:v26.1.0-rc.1"} {
		update(t, ns, "mz", func(mz *v1alpha1.Materialize) {
			mz.Spec.EnvironmentdImageRef = image
			mz.Spec.RequestRollout = uuid.NewString()
		})
		want := "Refusing to upgrade from materialize/environmentd:v26.1.0 to " + image + ". More than one major version from last successful rollout."
		waitFor(t, "the rollout to "+image+" refused", func() (bool, error) {
			c := upToDate(get(t, ns, "mz"))
			return c != nil && c.Reason == materialize.ReasonFailedDeploy && strings.Contains(c.Message, want), nil
		})
		if stsExists(t, ns, first.Status.ResourceID, 2) {
			t.Errorf("%s: a generation was created outside the upgrade window", image)
		}
	}
	update(t, ns, "mz", func(mz *v1alpha1.Materialize) { mz.Spec.EnvironmentdImageRef = "materialize/environmentd:v27.0.0" })
	waitRolledOut(t, ns, "mz", 2)
}

// spec.environmentId is used as upstream's Uuid writes it: the API server
// admits upper case and no hyphens, environmentd accepts only the
// lower-case hyphenated form, so the operator writes that; two spellings of
// one UUID are one environment; one that is no UUID at all is a condition,
// and nothing starts.
func TestEnvironmentIDIsUsedAsUpstreamWritesIt(t *testing.T) {
	env.SetAutoAdvance(true)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ns := newNamespace(t)
	startController(t, fastPreflight)
	id := uuid.NewString() // unique: environments of other tests must not share it
	mz := newMaterialize(ns, "mz")
	mz.Spec.EnvironmentID = strings.ToUpper(strings.ReplaceAll(id, "-", ""))
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitRolledOut(t, ns, "mz", 1)
	sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, prefix(got.Status.ResourceID, 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(sts.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--environment-id=local-kind-" + id + "-0 ", "--opentelemetry-resource=organization_id=" + id + " "} {
		if !strings.Contains(args+" ", want) {
			t.Errorf("args lack %q: %s", want, args)
		}
	}

	twin := newMaterialize(ns, "twin")
	twin.Spec.EnvironmentID = id
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, twin, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if c := upToDate(waitReason(t, ns, "twin", materialize.ReasonFailedDeploy)); !strings.Contains(c.Message, "spec.environmentId is the environmentId of another Materialize, which keeps it") {
		t.Errorf("twin: %q", c.Message)
	}

	bad := newMaterialize(ns, "bad")
	bad.Spec.EnvironmentID = "0b0b0b0b-11114222-8333-444444444444" // the API server's uuid format admits it
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the API server refused %q: %v", bad.Spec.EnvironmentID, err)
	}
	badGot := waitReason(t, ns, "bad", materialize.ReasonFailedDeploy)
	if c := upToDate(badGot); !strings.Contains(c.Message, `spec.environmentId: "0b0b0b0b-11114222-8333-444444444444" is not a UUID`) {
		t.Errorf("bad: %q", c.Message)
	}
	if stsExists(t, ns, badGot.Status.ResourceID, 1) {
		t.Error("a generation was created for an environmentId environmentd cannot read")
	}
}

// mintLicense is a license key for environment aud, expiring at exp,
// signed with the key the stand-in trusts.
func mintLicense(t *testing.T, aud string, exp time.Time, change ...func(map[string]any)) string {
	t.Helper()
	key, err := licensekey.TestSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	nbf := exp.Add(-48 * time.Hour).Unix()
	claims := map[string]any{"sub": "org", "aud": aud, "iss": licensekey.Issuer, "jti": uuid.NewString(),
		"version": 1, "nbf": nbf, "iat": nbf, "exp": exp.Unix(), "max_credit_consumption_rate": 24.0,
		"expiration_behavior": licensekey.Disable}
	for _, f := range change {
		f(claims)
	}
	jwt, err := licensekey.Sign(claims, key)
	if err != nil {
		t.Fatal(err)
	}
	return jwt
}

// A Materialize without an environmentId gets its license key's, as
// upstream gives it.
func TestEnvironmentIDComesFromTheLicenseKey(t *testing.T) {
	env.SetAutoAdvance(true)
	ns := newNamespace(t)
	startController(t, fastPreflight)
	patchSecret(t, ns, `{"stringData":{"license_key":"`+mintLicense(t, "2D2D2D2D-1111-4222-8333-444444444444", time.Now().Add(time.Hour))+`"}}`)
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := waitRolledOut(t, ns, "mz", 1).Spec.EnvironmentID; got != "2d2d2d2d-1111-4222-8333-444444444444" {
		t.Errorf("environmentId %q, want the license key's", got)
	}
}

// Sizes without a memory limit are refused before anything starts unless
// the license key allows overriding credit consumption, as environmentd
// refuses them.
func TestSizesWithoutMemoryLimitNeedALicenseThatAllowsThem(t *testing.T) {
	env.SetAutoAdvance(true)
	ns := newNamespace(t)
	startController(t, fastPreflight, func(o *materialize.Options) {
		o.Config = materialize.DefaultConfig()
		o.Config.ClusterReplicaSizes = `{"25cc":{"scale":1,"workers":1,"credits_per_hour":"0.25"},"mz_probe":{"scale":1,"workers":1,"credits_per_hour":"0"}}`
		if err := o.Config.Complete(); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), newMaterialize(ns, "mz"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, ns, "mz", materialize.ReasonFailedDeploy)
	if c := upToDate(got); !strings.Contains(c.Message, "No memory limit found in cluster definition for 25cc, mz_probe") {
		t.Errorf("condition %q", c.Message)
	}
	if stsExists(t, ns, got.Status.ResourceID, 1) {
		t.Error("a generation was created with sizes environmentd refuses")
	}
	patchSecret(t, ns, `{"stringData":{"license_key":"`+mintLicense(t, "00000000-0000-0000-0000-000000000000", time.Now().Add(time.Hour),
		func(c map[string]any) { c["allow_credit_consumption_override"] = true })+`"}}`)
	waitRolledOut(t, ns, "mz", 1)
}

// requireStatusFields fails t unless the stored Materialize's status has
// every one of fields, read as JSON (a zero value written counts; an
// absent field does not).
func requireStatusFields(t *testing.T, ns, name string, fields ...string) {
	t.Helper()
	raw, err := mzClient().MaterializeV1alpha1().RESTClient().Get().Namespace(ns).Resource("materializes").Name(name).
		DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Status map[string]json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if _, ok := stored.Status[f]; !ok {
			t.Errorf("status.%s is absent from the stored status: %s", f, raw)
		}
	}
}

// A Materialize's name is a value of upstream's label
// materialize.cloud/organization-name on every object of its environment;
// a name longer than a label value (63 characters), which the API server
// admits for the Materialize itself, is a FailedDeploy that says so, and
// nothing is created.
func TestANameLongerThanALabelValueIsAFailedDeploy(t *testing.T) {
	ns := newNamespace(t)
	startController(t, fastPreflight)
	name := strings.Repeat("m", 64)
	if _, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(context.Background(), newMaterialize(ns, name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, ns, name, materialize.ReasonFailedDeploy)
	want := "metadata.name is 64 characters: the operator labels every object of the environment with it (materialize.cloud/organization-name), and a label value is at most 63"
	if msg := upToDate(got).Message; !strings.Contains(msg, want) {
		t.Errorf("FailedDeploy message %q, want one containing %q", msg, want)
	}
	if stsExists(t, ns, got.Status.ResourceID, 1) {
		t.Error("a generation was created despite the problem")
	}
}

// The operator fills spec.environmentId as upstream does, by an update
// that owns only what it sets: a user who manages the Materialize by
// server-side apply (kubectl apply --server-side, Argo CD, Terraform)
// requests the next rollout without a conflict. Applying the user's own
// requestRollout back with the environmentId made the operator co-own
// it, and the user's next apply of it was refused.
func TestSpecFillLeavesTheUsersFieldsToTheUser(t *testing.T) {
	ctx := context.Background()
	ns := environmentNamespace(t)
	startController(t)
	applyAsUser := func(request string) error {
		ac := mzac.Materialize("mine", ns).WithSpec(mzac.MaterializeSpec().
			WithEnvironmentdImageRef("materialize/environmentd:v26.1.0").WithBackendSecretName("backend").WithRequestRollout(request))
		_, err := mzClient().MaterializeV1alpha1().Materializes(ns).Apply(ctx, ac, metav1.ApplyOptions{FieldManager: "user"})
		return err
	}
	if err := applyAsUser(uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	if got := waitRolledOut(t, ns, "mine", 1); got.Spec.EnvironmentID == "" {
		t.Fatal("spec.environmentId was not filled")
	}
	next := uuid.NewString()
	if err := applyAsUser(next); err != nil {
		t.Fatalf("the user's next rollout request: %v", err)
	}
	if got := get(t, ns, "mine"); got.Spec.RequestRollout != next || got.Spec.EnvironmentID == "" {
		t.Errorf("after the user's apply: requestRollout %q (want %q), environmentId %q", got.Spec.RequestRollout, next, got.Spec.EnvironmentID)
	}
}

// A spec.serviceAccountName equal to the Materialize's name is the
// operator's own account, applied and owned like the one it makes when the
// field is empty: the chart's admission policy checks environmentd's
// account by name only, so a tenant who named a Materialize after a
// powerful ServiceAccount of its namespace, and set the field to it, ran
// environmentd as that account. Applying it lets the policy refuse taking
// over an account someone else made (test/chart).
func TestAServiceAccountNamedAfterItsMaterializeIsTheOperators(t *testing.T) {
	ctx := context.Background()
	ns := environmentNamespace(t)
	startController(t)
	mz := newMaterialize(ns, "mine")
	mz.Spec.ServiceAccountName = "mine"
	created, err := mzClient().MaterializeV1alpha1().Materializes(ns).Create(ctx, mz, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, ns, "mine", 1)
	sa, err := kubernetes.NewForConfigOrDie(cp.Config).CoreV1().ServiceAccounts(ns).Get(ctx, "mine", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Materialize's own ServiceAccount: %v", err)
	}
	if owner := metav1.GetControllerOf(sa); owner == nil || owner.UID != created.UID {
		t.Errorf("ServiceAccount controlled by %+v, want the Materialize %s", owner, created.UID)
	}
}
