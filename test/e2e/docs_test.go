//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/test/markdown"
)

// The quick start (docs/quickstart.md) works as written: its ```sh blocks,
// in order, run as one bash script (so its variables carry over) in a
// fresh namespace, with the defaults the page gives for the local cluster
// (the stand-in image and license key) but for the namespace, and the
// Materialize it creates is UpToDate for its current spec.
func TestQuickstartRuns(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "quickstart.md"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := shBlocks(page)
	if err != nil {
		t.Fatalf("docs/quickstart.md: %v", err)
	}
	kubectl := kubectlPath(t)

	ns := fmt.Sprintf("e2e-docs-%06d", rand.IntN(1000000))
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euxo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir() // the page writes materialize.yaml into the working directory
	cmd.Env = append(os.Environ(),
		"MZ_NAMESPACE="+ns,
		"LICENSE_KEY_FILE="+filepath.Join(root, "test", "fixture", "license.jwt"),
		"PATH="+filepath.Dir(kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
	cmd.WaitDelay = 10 * time.Second
	began := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("the quick start's script ran for %v:\n%s", time.Since(began).Round(time.Second), out)
	if err != nil {
		t.Fatalf("the quick start's script failed: %v", err)
	}

	// The script waited for UpToDate itself; check it independently.
	var last string
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if len(list.Items) != 1 {
			last = fmt.Sprintf("%d Materializes", len(list.Items))
			return false, nil
		}
		mz := list.Items[0]
		cond := meta.FindStatusCondition(mz.Status.Conditions, "UpToDate")
		if cond == nil {
			last = mz.Name + ": no UpToDate condition"
			return false, nil
		}
		last = fmt.Sprintf("%s: UpToDate %s/%s for generation %d of %d: %s",
			mz.Name, cond.Status, cond.Reason, cond.ObservedGeneration, mz.Generation, cond.Message)
		return cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == mz.Generation && mz.Status.ActiveGeneration >= 1, nil
	})
	if err != nil {
		t.Fatalf("the quick start's Materialize in %s is not UpToDate: %s", ns, last)
	}
	t.Log(last)
}

// shBlocks returns the bodies of a Markdown page's ```sh blocks, in order,
// as one script. Other blocks (```console, ```yaml, ...) are not run.
func shBlocks(page []byte) (string, error) {
	blocks, err := markdown.Blocks(page)
	if err != nil {
		return "", err
	}
	var script strings.Builder
	for n, b := range markdown.Lang(blocks, "sh") {
		fmt.Fprintf(&script, "# block %d, line %d\n%s\n", n+1, b.Line, b.Body)
	}
	if script.Len() == 0 {
		return "", fmt.Errorf("no ```sh block")
	}
	return script.String(), nil
}

// kubectlPath finds kubectl: $KUBECTL, else next to $HELM (make e2e sets
// it; hack/kube-binaries.sh builds both into one directory), else $PATH.
func kubectlPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KUBECTL"); p != "" {
		return p
	}
	if helm := os.Getenv("HELM"); helm != "" {
		p := filepath.Join(filepath.Dir(helm), "kubectl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal("no kubectl: set KUBECTL, or HELM with kubectl next to it (make e2e), or put it on PATH")
	}
	return p
}

// docCommands returns the commands of a Markdown page's ```console block
// that follow the comment line "# <name>", up to a blank line, with the
// page's placeholders NS and NAME replaced.
func docCommands(t *testing.T, page, name, ns, mz string) string {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := markdown.Blocks(raw)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range markdown.Lang(blocks, "console") {
		in := false
		for line := range strings.SplitSeq(b.Body, "\n") {
			switch {
			case strings.TrimSpace(line) == "# "+name:
				in = true
			case in && strings.TrimSpace(line) == "":
				in = false
			case in:
				out = append(out, placeholder.ReplaceAllStringFunc(line, func(w string) string {
					if w == "NS" {
						return ns
					}
					return mz
				}))
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no commands under %q", page, "# "+name)
	}
	return strings.Join(out, "\n")
}

var placeholder = regexp.MustCompile(`\b(NS|NAME)\b`)

// The rollout commands of docs/upgrading.md work as written, at both
// versions: a forced rollout (v1) waits at ReadyToPromote and the promote
// command (v1) completes it; a forced rollout (v1alpha1) is cancelled by the
// cancel command, its generation deleted and the condition Applied (a
// forced rollout changes no object); forced again, the promote command
// (v1alpha1) completes it.
func TestUpgradingCommandsRun(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(root, "docs", "upgrading.md")
	kubectl := kubectlPath(t)
	ns := contractNamespace(t, nil)
	mz := &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "mz", Namespace: ns},
		Spec: v1alpha1.MaterializeSpec{EnvironmentdImageRef: standinV26_35, BackendSecretName: "backend",
			RolloutStrategy: v1alpha1.RolloutManuallyPromote, EnvironmentdExtraArgs: quickCatchUp},
	}
	if _, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Create(context.Background(), mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
	run := func(name string) {
		t.Helper()
		// The page offers uuidgen or the kernel's UUIDs.
		script := "command -v uuidgen >/dev/null || uuidgen() { cat /proc/sys/kernel/random/uuid; }\n" + docCommands(t, page, name, ns, "mz")
		cmd := exec.Command("bash", "-euxo", "pipefail", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		t.Logf("%s:\n%s", name, out)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	generation := func(want uint64) {
		t.Helper()
		if got := activeGeneration(t, ns); got != want {
			t.Errorf("active generation %d, want %d", got, want)
		}
	}

	run("force a rollout (v1)")
	waitUpToDate(t, ns, metav1.ConditionUnknown, "ReadyToPromote", 4*time.Minute)
	run("promote (v1)")
	waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
	generation(2)

	run("force a rollout (v1alpha1)")
	got := waitUpToDate(t, ns, metav1.ConditionUnknown, "ReadyToPromote", 4*time.Minute)
	third := fmt.Sprintf("mz%s-environmentd-3", got.Status.ResourceID)
	run("cancel (either version: the Materialize is stored at v1alpha1)")
	// Only forced: no object differs from the active generation's.
	waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 2*time.Minute)
	waitExists(t, "the cancelled generation deleted", func() error {
		if _, err := c.Kube.AppsV1().StatefulSets(ns).Get(context.Background(), third, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("%s still there", third)
		}
		return nil
	})
	generation(2)

	run("force a rollout (v1alpha1)")
	waitUpToDate(t, ns, metav1.ConditionUnknown, "ReadyToPromote", 4*time.Minute)
	run("promote (v1alpha1)")
	waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
	if got := activeGeneration(t, ns); got < 3 {
		t.Errorf("active generation %d after the second forced rollout, want 3 or more", got)
	}
}
