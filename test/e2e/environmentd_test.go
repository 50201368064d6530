//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"github.com/google/uuid"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/test/fixture"
)

// The stand-in images play environmentd, balancerd and the console of a
// given version and refuse what those refuse (hack/images/images.sh).
const (
	standinV26_5  = "localhost/standin/environmentd:v26.5.0"
	standinV26_35 = "localhost/standin/environmentd:v26.35.0"
)

// quickCatchUp are environmentd's system parameters for the suite's 0dt
// rollouts: a catch-up check every second (upstream: 10 s), and a caught-up
// cluster stable for 2 s before the generation is ready to promote
// (upstream, from 26.32: 10 minutes). environmentd before 26.32 ignores
// the second.
var quickCatchUp = []string{
	"--system-parameter-default=0dt_deployment_hydration_check_interval=1s",
	"--system-parameter-default=with_0dt_caught_up_check_stability_period=2s",
}

// contractNamespace makes a namespace for one test, with a backend Secret
// (changed by edit, if given), deleted when the test ends.
func contractNamespace(t *testing.T, edit func(*corev1.Secret)) string {
	t.Helper()
	ctx := context.Background()
	created, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-contract-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := created.Name
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	secret := fixture.BackendSecret(ns, "backend")
	if edit != nil {
		edit(secret)
	}
	if _, err := c.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

func createMaterialize(t *testing.T, ns, image string, auth v1alpha1.AuthenticatorKind) {
	t.Helper()
	mz := &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "mz", Namespace: ns},
		Spec: v1alpha1.MaterializeSpec{EnvironmentdImageRef: image, BackendSecretName: "backend", AuthenticatorKind: auth,
			EnvironmentdExtraArgs: quickCatchUp},
	}
	if _, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Create(context.Background(), mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// requestForcedRollout requests a rollout of the Materialize "mz" in ns
// with a new forceRollout: a new generation without a change of spec.
func requestForcedRollout(t *testing.T, ns string) {
	t.Helper()
	mzs := c.Materialize.MaterializeV1alpha1().Materializes(ns)
	poll(t, "a rollout requested", time.Minute, func() (bool, error) {
		got, err := mzs.Get(context.Background(), "mz", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got.Spec.RequestRollout = uuid.NewString()
		got.Spec.ForceRollout = uuid.NewString()
		_, err = mzs.Update(context.Background(), got, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// waitUpToDate waits for UpToDate with the given status and reason and
// returns the Materialize.
func waitUpToDate(t *testing.T, ns string, status metav1.ConditionStatus, reason string, timeout time.Duration) *v1alpha1.Materialize {
	t.Helper()
	var mz *v1alpha1.Materialize
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Get(ctx, "mz", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		mz = got
		cond := meta.FindStatusCondition(got.Status.Conditions, "UpToDate")
		if cond == nil {
			return false, nil
		}
		last = fmt.Sprintf("%s/%s: %s", cond.Status, cond.Reason, cond.Message)
		return cond.Status == status && cond.Reason == reason && cond.ObservedGeneration == got.Generation, nil
	})
	if err != nil {
		t.Fatalf("UpToDate did not become %s/%s within %v; last %s", status, reason, timeout, last)
	}
	return mz
}

func containerLog(t *testing.T, ns, pod string) string {
	t.Helper()
	r, err := c.Kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).Stream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}

// Each listeners schema and authenticator, on a pod that parses its
// command line as that environmentd version does: the rollout completes
// only if the stand-in accepted the operator's StatefulSet and the
// operator reached the leader API where that version serves it.
func TestEnvironmentdGenerationsRunUnderTheStrictStandIn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		image string
		auth  v1alpha1.AuthenticatorKind
	}{
		{"v26_5_password", standinV26_5, v1alpha1.AuthenticatorPassword},
		{"v26_35_sasl", standinV26_35, v1alpha1.AuthenticatorSasl},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := contractNamespace(t, nil)
			createMaterialize(t, ns, tc.image, tc.auth)
			mz := waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
			pod := fmt.Sprintf("mz%s-environmentd-1-0", mz.Status.ResourceID)
			log := containerLog(t, ns, pod)
			if !strings.Contains(log, "accepted its command line") {
				t.Errorf("environmentd pod %s log lacks the acceptance line:\n%s", pod, log)
			}
			sts, err := c.Kube.AppsV1().StatefulSets(ns).Get(context.Background(), fmt.Sprintf("mz%s-environmentd-1", mz.Status.ResourceID), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := "--environment-id=local-kind-" + mz.Spec.EnvironmentID + "-0"
			if args := sts.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, want) {
				t.Errorf("StatefulSet args lack %s", want)
			}
		})
	}
}

// The stand-in image refuses the command line this operator rendered
// before it followed upstream, with clap's message and exit code.
func TestStandInImageRefusesTheOldCommandLine(t *testing.T) {
	ns := contractNamespace(t, nil)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "old-environmentd", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "environmentd", Image: standinV26_35, ImagePullPolicy: corev1.PullNever,
				Args: []string{"--environment-id=0b0b0b0b-1111-4222-8333-444444444444", "--deploy-generation=1",
					"--internal-http-listen-addr=0.0.0.0:6878", "--internal-sql-listen-addr=0.0.0.0:6877",
					"--listeners-config-path=/listeners/listeners.json", "--scratch-directory=/scratch",
					"--orchestrator=kubernetes", "--secrets-controller=kubernetes"},
				Env: []corev1.EnvVar{{Name: "MZ_PERSIST_BLOB_URL", Value: "s3://x"}},
			}},
		},
	}
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var term *corev1.ContainerStateTerminated
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		term = p.Status.ContainerStatuses[0].State.Terminated
		return term != nil, nil
	})
	if err != nil {
		t.Fatal("the old command line did not end the container")
	}
	log := containerLog(t, ns, pod.Name)
	// clap parses each value as it reads it: the bare UUID environment id,
	// the old command line's first argument, is what environmentd refuses.
	if term.ExitCode != 2 || !strings.Contains(log, "error: invalid value '0b0b0b0b-1111-4222-8333-444444444444' for '--environment-id") {
		t.Errorf("exit %d, log:\n%s", term.ExitCode, log)
	}
}

// A backend Secret without a license key is a clear condition and creates
// nothing; adding the key lets the rollout finish.
func TestMissingLicenseKeyIsAConditionUntilAdded(t *testing.T) {
	ns := contractNamespace(t, func(s *corev1.Secret) { delete(s.StringData, "license_key") })
	createMaterialize(t, ns, standinV26_35, "")
	mz := waitUpToDate(t, ns, metav1.ConditionFalse, "FailedDeploy", 2*time.Minute)
	cond := meta.FindStatusCondition(mz.Status.Conditions, "UpToDate")
	if !strings.Contains(cond.Message, `no "license_key" entry`) {
		t.Errorf("condition message %q does not name the missing entry", cond.Message)
	}
	_, err := c.Kube.AppsV1().StatefulSets(ns).Get(context.Background(), fmt.Sprintf("mz%s-environmentd-1", mz.Status.ResourceID), metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a StatefulSet exists without a license key (err %v)", err)
	}
	patch := []byte(`{"stringData":{"license_key":"` + fixture.License + `"}}`)
	if _, err := c.Kube.CoreV1().Secrets(ns).Patch(context.Background(), "backend", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
}
