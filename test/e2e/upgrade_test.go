//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"

	"github.com/materializeinc/orchestratord/pkg/crds"
	"github.com/materializeinc/orchestratord/test/cluster"
)

// upgradeFrom is the earlier commit of this repository whose chart and
// images the upgrade test starts from: the last one released to users
// before the current tree (move it forward at each release).
const upgradeFrom = "7ef0a75b567e513523a386db09b52823bcf951cb"

// An operator upgrade as users make it: the release runs the chart and
// images of an earlier commit, readers GET the sample at v1 and a rollout of
// it is in progress, and `helm upgrade` moves to the current tree; then
// `helm rollback` moves back. Each way: no read fails, the upgrade itself
// creates no environmentd generation (exactly the one requested), every
// Lease changes hands by release (no new holder waited for an expiry or
// claimed a dead one), and the CRD is updated in place (same UID, its
// caBundle kept, v1alpha1 still stored).
func TestHelmUpgradeFromAnEarlierCommitUnderLoad(t *testing.T) {
	helm, chart := os.Getenv("HELM"), os.Getenv("CHART")
	if helm == "" || chart == "" {
		t.Fatal("HELM and CHART are not set; make e2e sets them")
	}
	oldChart, oldTag := buildEarlierRelease(t, filepath.Join(chart, "..", ".."), upgradeFrom)
	crdUID := materializeCRD(t).UID

	helmRun := func(args ...string) {
		t.Helper()
		out, err := exec.Command(helm, append(args, "-n", operatorNS, "--wait", "--timeout", "5m")...).CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	current := releaseRevision(t, helm)
	images := func(tag string) string {
		return "controllers.image.tag=" + tag + ",webhook.image.tag=" + tag
	}
	// Whatever happens, the suite goes on with the current tree.
	t.Cleanup(func() { helmRun("rollback", "orchestratord", strconv.Itoa(current)) })

	helmRun("upgrade", "orchestratord", oldChart, "--reset-then-reuse-values", "--set", images(oldTag))
	earlier := releaseRevision(t, helm)
	waitRolledOut(t, webhook)
	waitRolledOut(t, controllers)
	leasesHeldByRunningPods(t)

	upgradeUnderLoad(t, "helm upgrade to the current tree", crdUID, func() {
		helmRun("upgrade", "orchestratord", chart, "--reset-then-reuse-values", "--set", images("dev"))
	})
	upgradeUnderLoad(t, "helm rollback to the earlier commit", crdUID, func() {
		helmRun("rollback", "orchestratord", strconv.Itoa(earlier))
	})
}

// upgradeUnderLoad runs change with readers and a rollout in progress, then checks
// what an operator upgrade must leave behind.
func upgradeUnderLoad(t *testing.T, what string, crdUID types.UID, change func()) {
	t.Helper()
	ctx := context.Background()
	readers := c.StartReaders(4)
	defer readers.Stop()
	before := sample(t).Status.ActiveGeneration
	if err := c.RequestRollout(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the new generation is being created
	began := time.Now()
	change()
	waitRolledOut(t, webhook)
	waitRolledOut(t, controllers)
	if err := c.WaitRolloutComplete(ctx, 5*time.Minute); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	time.Sleep(2 * retryPeriod) // a generation the new operator would add is started by now
	res := readers.Stop()
	t.Logf("%s: %d reads at v1, %d failed; took %v", what, res.Total(), res.Failed, time.Since(began).Round(time.Second))
	if res.Failed > 0 {
		t.Errorf("%s: %d reads failed: %v", what, res.Failed, res.Failures)
	}
	if got := sample(t).Status.ActiveGeneration; got != before+1 {
		t.Errorf("%s: active generation %d -> %d, want exactly the one requested (%d)", what, before, got, before+1)
	}
	// The old generation goes after the status says the rollout is done;
	// one the new operator added would stay.
	var gens []uint64
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		gens = environmentdGenerations(t)
		return len(gens) == 1 && gens[0] == before+1, nil
	}); err != nil {
		t.Errorf("%s: environmentd generations %v, want only %d", what, gens, before+1)
	}
	leasesHeldByRunningPods(t)
	pods, err := c.Kube.CoreV1().Pods(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controllers"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		raw, err := c.Kube.CoreV1().Pods(operatorNS).GetLogs(p.Name, &corev1.PodLogOptions{SinceTime: &metav1.Time{Time: began}}).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ungraceful := range []string{"expired lease claimed", "lease of a terminated holder claimed", "lost lease"} {
			if strings.Contains(string(raw), `"msg":"`+ungraceful+`"`) {
				t.Errorf("%s: %s logged %q: a Lease did not change hands by release", what, p.Name, ungraceful)
			}
		}
	}
	crd := materializeCRD(t)
	if crd.UID != crdUID {
		t.Errorf("%s: the CRD was replaced (UID %s -> %s), not updated in place", what, crdUID, crd.UID)
	}
	if cc := crd.Spec.Conversion; cc == nil || cc.Webhook == nil || cc.Webhook.ClientConfig == nil || len(cc.Webhook.ClientConfig.CABundle) == 0 {
		t.Errorf("%s: the CRD's conversion webhook lost its caBundle", what)
	}
	stored := strings.Join(crd.Status.StoredVersions, ",")
	if !strings.Contains(stored, "v1alpha1") {
		t.Errorf("%s: stored versions %s lost v1alpha1", what, stored)
	}
}

// buildEarlierRelease checks out commit in a git worktree, builds its
// webhook and controllers images with this tree's image tool and loads them
// into the local cluster. It returns the worktree's chart and the images'
// tag.
func buildEarlierRelease(t *testing.T, root, commit string) (chart, tag string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "earlier")
	run := func(cwd string, env []string, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = cwd, append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	if err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		// A shallow clone (.ci/run deepens one when it can).
		t.Skipf("commit %s is not in this clone: fetch the history (git fetch --unshallow) to run the upgrade test", commit)
	}
	run(root, nil, "git", "worktree", "add", "--detach", dir, commit)
	t.Cleanup(func() { _ = exec.Command("git", "-C", root, "worktree", "remove", "--force", dir).Run() })
	tag = "e2e-" + commit[:12]
	bin := filepath.Join(dir, "bin")
	run(dir, []string{"CGO_ENABLED=0", "GOOS=linux"}, "go", "build", "-trimpath", "-o", bin+"/", "./cmd/webhook", "./cmd/controllers")
	for _, program := range []string{"webhook", "controllers"} {
		tar := filepath.Join(bin, program+".tar")
		file := "/usr/local/bin/" + program
		run(root, nil, "go", "run", "./hack/cluster/image", "-ref", "localhost/orchestratord/"+program+":"+tag,
			"-file", file+"="+filepath.Join(bin, program), "-entrypoint", file, "-user", "65532:65532", "-out", tar)
		run(root, nil, filepath.Join(root, "hack", "cluster", "cluster.sh"), "load", tar)
	}
	return filepath.Join(dir, "charts", "orchestratord"), tag
}

func releaseRevision(t *testing.T, helm string) int {
	t.Helper()
	out, err := exec.Command(helm, "status", "orchestratord", "-n", operatorNS, "-o", "json").Output()
	if err != nil {
		t.Fatalf("helm status: %v", err)
	}
	var status struct{ Version int }
	if err := json.Unmarshal(out, &status); err != nil || status.Version == 0 {
		t.Fatalf("helm status: %v (%s)", err, out)
	}
	return status.Version
}

func materializeCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	ext, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), crds.MaterializeCRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

func sample(t *testing.T) *v1alpha1.Materialize {
	t.Helper()
	mz, err := c.Materialize.MaterializeV1alpha1().Materializes(cluster.SampleNamespace).Get(context.Background(), cluster.Sample, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mz
}

// environmentdGenerations lists the generations of the sample's environmentd
// StatefulSets (named mz<id>-environmentd-<generation>).
func environmentdGenerations(t *testing.T) []uint64 {
	t.Helper()
	gens, err := listEnvironmentdGenerations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return gens
}

func listEnvironmentdGenerations(ctx context.Context) ([]uint64, error) {
	list, err := c.Kube.AppsV1().StatefulSets(cluster.SampleNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var gens []uint64
	for _, s := range list.Items {
		_, suffix, ok := strings.Cut(s.Name, "-environmentd-")
		if !ok || s.DeletionTimestamp != nil {
			continue
		}
		if g, err := strconv.ParseUint(suffix, 10, 64); err == nil {
			gens = append(gens, g)
		}
	}
	return gens, nil
}
