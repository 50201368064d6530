//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/test/markdown"
	"github.com/materializeinc/orchestratord/test/upstream"
)

// The CRDs upstream's binary registers.
var upstreamCRDs = []string{"materializes.materialize.cloud", "balancers.materialize.cloud",
	"consoles.materialize.cloud", "vpcendpoints.materialize.cloud"}

// The switch from upstream orchestratord as docs/migrating-from-orchestratord.md
// says it, command for command: its ```sh blocks are read from the page
// (a changed command is the command run) and run by bash, with the page's
// placeholders and only NS adjusted to where this chart runs here. The
// cluster starts as upstream leaves one: this chart's release uninstalled,
// the four CRDs registered as upstream's binary does (forced server-side
// apply under its field manager, no Helm metadata, v1alpha1 only), a
// release shaped as upstream's chart (test fixture) running, a Materialize
// with upstream's finalizer. Then: steps (a)-(d), the rollback section back
// to upstream, and (a)-(e) again. No new generation at either switch, every
// CRD owned by the release at the end, and a delete that completes.
func TestMigrationAsTheDocSays(t *testing.T) {
	ctx := context.Background()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "migrating-from-orchestratord.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections, err := shBlocksBySection(page)
	if err != nil {
		t.Fatalf("docs/migrating-from-orchestratord.md: %v", err)
	}
	block := func(heading string, i int) string {
		t.Helper()
		blocks := sections[heading]
		if i >= len(blocks) {
			t.Fatalf("docs/migrating-from-orchestratord.md: section %q has %d sh blocks, the test runs block %d", heading, len(blocks), i+1)
		}
		return blocks[i]
	}
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("HELM (the helm binary) is not set; make e2e sets it")
	}
	kubectl := kubectlPath(t)

	// Nothing else may change the environments while the page's before and
	// after listings are compared.
	waitNoTerminatingNamespaces(t)
	ns := contractNamespace(t, nil)
	createMaterialize(t, ns, standinV26_35, v1alpha1.AuthenticatorNone)
	waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
	waitComponentReady(t, ns, "Balancer")
	waitComponentReady(t, ns, "Console")

	// The user's values file: this release's, as hack/cluster/run.sh set them.
	work := t.TempDir()
	values, err := exec.Command(helm, "get", "values", "orchestratord", "-n", operatorNS, "-o", "yaml").Output()
	if err != nil {
		t.Fatalf("helm get values: %v", err)
	}
	if err := os.WriteFile(filepath.Join(work, "orchestratord-values.yaml"), values, 0o600); err != nil {
		t.Fatal(err)
	}
	// The page runs from a checkout: charts/orchestratord.
	if err := os.Symlink(filepath.Join(root, "charts"), filepath.Join(work, "charts")); err != nil {
		t.Fatal(err)
	}
	run := func(what, script string) {
		t.Helper()
		script = block("2. Steps", 0) + "NS=" + operatorNS + "\nUP_DEPLOY=my-materialize-operator\n" + script
		cctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, "bash", "-euxo", "pipefail", "-c", script)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(kubectl)+string(os.PathListSeparator)+filepath.Dir(helm)+string(os.PathListSeparator)+os.Getenv("PATH"))
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.CombinedOutput()
		t.Logf("%s:\n%s", what, out)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// If the test stops half way, the rest of the suite still needs this
	// chart's release.
	t.Cleanup(func() { ensureRelease(t, helm, filepath.Join(work, "orchestratord-values.yaml"), root) })

	// The cluster as upstream leaves it.
	if out, err := exec.Command(helm, "uninstall", "orchestratord", "-n", operatorNS, "--wait", "--timeout", "3m").CombinedOutput(); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	registerCRDsAsUpstream(t, true)
	upstreamChart := filepath.Join(root, "test", "e2e", "testdata", "upstream-operator")
	if out, err := exec.Command(helm, "install", "my-materialize-operator", upstreamChart, "-n", "materialize",
		"--create-namespace", "--wait", "--timeout", "3m").CombinedOutput(); err != nil {
		t.Fatalf("installing the upstream-shaped release: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_ = exec.Command(helm, "uninstall", "my-materialize-operator", "-n", "materialize", "--wait").Run()
		_ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), "materialize", metav1.DeleteOptions{})
	})
	if _, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Patch(ctx, "mz", types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, upstream.Finalizer)), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	migrate := func(round string, steps ...string) {
		t.Helper()
		var script strings.Builder
		script.WriteString(block("2. Steps", 1)) // finds upstream's Deployment
		script.WriteString(block("Before you start", 0))
		for _, step := range steps {
			for _, b := range sections[step] {
				script.WriteString(b)
			}
		}
		run(round, script.String())
	}
	migrate("migration, steps (a) to (d)", "(a) Stop upstream", "(b) Let Helm adopt the CRDs", "(c) Install this chart", "(d) Verify")
	// Step (d)'s expectations beyond its diffs.
	if got := activeGeneration(t, ns); got != 1 {
		t.Errorf("after the migration the active generation is %d, want 1", got)
	}
	waitComponentReady(t, ns, "Balancer")
	waitComponentReady(t, ns, "Console")

	// Rollback, steps 1 and 2; upstream re-registers its CRDs as it starts.
	run("rollback, steps 1 and 2", block("4. Rollback", 0)+block("4. Rollback", 1))
	registerCRDsAsUpstream(t, false)
	// Steps 3 and 4: verify as in step (d), the listings that do not need
	// this chart.
	verify := ""
	for line := range strings.SplitSeq(block("(d) Verify", 0), "\n") {
		if strings.Contains(line, "| diff before-") {
			verify += line + "\n"
		}
	}
	if verify == "" {
		t.Fatal("step (d) has no `| diff before-` listing to verify the rollback with")
	}
	run("rollback, steps 3 and 4", block("4. Rollback", 2)+block("4. Rollback", 3)+verify)
	if _, err := exec.Command(helm, "status", "orchestratord", "-n", operatorNS).CombinedOutput(); err == nil {
		t.Error("this chart's release is still installed after the rollback")
	}

	// And the switch again, to the end: upstream's release removed.
	migrate("migration again, steps (a) to (e)", "(a) Stop upstream", "(b) Let Helm adopt the CRDs", "(c) Install this chart", "(d) Verify", "(e) Remove upstream's release")
	if got := activeGeneration(t, ns); got != 1 {
		t.Errorf("after the second migration the active generation is %d, want 1", got)
	}
	waitComponentReady(t, ns, "Balancer")
	waitComponentReady(t, ns, "Console")
	if out, err := exec.Command(helm, "status", "my-materialize-operator", "-n", "materialize").CombinedOutput(); err == nil {
		t.Errorf("step (e) left upstream's release installed:\n%s", out)
	}
	ext, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range upstreamCRDs {
		crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if crd.Labels["app.kubernetes.io/managed-by"] != "Helm" || crd.Annotations["meta.helm.sh/release-name"] != "orchestratord" ||
			crd.Annotations["meta.helm.sh/release-namespace"] != operatorNS {
			t.Errorf("CRD %s is not the release's: labels %v annotations %v", name, crd.Labels, crd.Annotations)
		}
	}
	// No finalizer stuck: the controllers remove upstream's and the delete
	// completes.
	if err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Delete(ctx, "mz", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitExists(t, "the Materialize deleted", func() error {
		_, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Get(ctx, "mz", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

// shBlocksBySection returns a Markdown page's ```sh blocks under the heading
// they follow, in order, each starting with a comment naming its place.
func shBlocksBySection(page []byte) (map[string][]string, error) {
	blocks, err := markdown.Blocks(page)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, b := range markdown.Lang(blocks, "sh") {
		out[b.Heading] = append(out[b.Heading], fmt.Sprintf("# %s, line %d\n%s", b.Heading, b.Line, b.Body))
	}
	return out, nil
}

// registerCRDsAsUpstream leaves the four CRDs as upstream's binary registers
// them on a cluster that never had this chart (fresh: no Helm metadata and
// no conversion; else upstream coming back: what Helm and this chart wrote
// stays where upstream's apply does not own it): a forced server-side apply
// under upstream's field manager of the Materialize CRD with only
// v1alpha1 (upstream without installV1CRD), the others as they are, with
// this chart's schemas (TestSchemaParityWithUpstream keeps them upstream's,
// up to the allowances docs/migrating-from-orchestratord.md lists).
func registerCRDsAsUpstream(t *testing.T, fresh bool) {
	t.Helper()
	ctx := context.Background()
	ext, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	for _, name := range upstreamCRDs {
		live, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fresh {
			// Upstream's binary sets no labels or annotations and no
			// conversion; and nothing else manages the CRD.
			live.Labels, live.Annotations = nil, nil
			live.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
			live.ManagedFields = []metav1.ManagedFieldsEntry{{}}
			if name == "materializes.materialize.cloud" {
				live.Spec.Versions = onlyVersion(live.Spec.Versions, "v1alpha1")
			}
			if live, err = crds.Update(ctx, live, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("CRD %s as upstream's: %v", name, err)
			}
		}
		apply := &apiextensionsv1.CustomResourceDefinition{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: live.Spec.Group, Names: live.Spec.Names, Scope: live.Spec.Scope,
				Versions: live.Spec.Versions},
		}
		if name == "materializes.materialize.cloud" {
			apply.Spec.Versions = onlyVersion(live.Spec.Versions, "v1alpha1")
		}
		body, err := json.Marshal(apply)
		if err != nil {
			t.Fatal(err)
		}
		force := true
		if _, err := crds.Patch(ctx, name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "orchestratord.materialize.cloud", Force: &force}); err != nil {
			t.Fatalf("upstream's apply of CRD %s: %v", name, err)
		}
	}
}

// onlyVersion is version v of versions, served and stored.
func onlyVersion(versions []apiextensionsv1.CustomResourceDefinitionVersion, v string) []apiextensionsv1.CustomResourceDefinitionVersion {
	for _, cv := range versions {
		if cv.Name == v {
			cv.Served, cv.Storage = true, true
			return []apiextensionsv1.CustomResourceDefinitionVersion{cv}
		}
	}
	return nil
}

// activeGeneration is ns's Materialize mz's status.activeGeneration.
func activeGeneration(t *testing.T, ns string) uint64 {
	t.Helper()
	mz, err := c.Materialize.MaterializeV1alpha1().Materializes(ns).Get(context.Background(), "mz", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mz.Status.ActiveGeneration
}

// waitNoTerminatingNamespaces waits until earlier tests' namespaces are
// gone: their environments would vanish between two listings.
func waitNoTerminatingNamespaces(t *testing.T) {
	t.Helper()
	waitExists(t, "earlier tests' namespaces gone", func() error {
		list, err := c.Kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		var terminating []string
		for _, n := range list.Items {
			if n.DeletionTimestamp != nil {
				terminating = append(terminating, n.Name)
			}
		}
		if len(terminating) > 0 {
			return fmt.Errorf("still terminating: %v", terminating)
		}
		return nil
	})
}

// ensureRelease puts this chart's release back if the test left the
// cluster without it: the CRDs adopted and the chart installed with the
// values it had.
func ensureRelease(t *testing.T, helm, values, root string) {
	chart := filepath.Join(root, "charts", "orchestratord")
	if exec.Command(helm, "status", "orchestratord", "-n", operatorNS).Run() == nil {
		// Installed; a rollback stopped half way leaves a component at 0.
		for _, name := range []string{webhook, controllers} {
			d, err := c.Kube.AppsV1().Deployments(operatorNS).Get(context.Background(), name, metav1.GetOptions{})
			if err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
				t.Log("scaling this chart's release back")
				if out, err := exec.Command(helm, "upgrade", "orchestratord", chart, "-n", operatorNS, "-f", values,
					"--wait", "--timeout", "5m").CombinedOutput(); err != nil {
					t.Errorf("scaling the release back: %v\n%s", err, out)
				}
				return
			}
		}
		return
	}
	t.Log("putting this chart's release back")
	kubectl := kubectlPath(t)
	args := append([]string{"label", "crd"}, upstreamCRDs...)
	_ = exec.Command(kubectl, append(args, "app.kubernetes.io/managed-by=Helm", "--overwrite")...).Run()
	args = append([]string{"annotate", "crd"}, upstreamCRDs...)
	_ = exec.Command(kubectl, append(args, "meta.helm.sh/release-name=orchestratord", "meta.helm.sh/release-namespace="+operatorNS, "--overwrite")...).Run()
	if out, err := exec.Command(helm, "install", "orchestratord", chart, "-n", operatorNS,
		"-f", values, "--wait", "--timeout", "5m").CombinedOutput(); err != nil {
		t.Errorf("putting the release back: %v\n%s", err, out)
	}
}
