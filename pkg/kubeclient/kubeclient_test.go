package kubeclient

import (
	"context"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func TestClientsShareOneRateLimiter(t *testing.T) {
	c, err := NewForConfig(&rest.Config{Host: "https://example.invalid", QPS: 7, Burst: 9})
	if err != nil {
		t.Fatal(err)
	}
	limiter := c.CoreV1().RESTClient().GetRateLimiter()
	if limiter == nil || limiter.QPS() != 7 {
		t.Fatalf("core's limiter %v, want one of 7 QPS", limiter)
	}
	for group, client := range map[string]rest.Interface{
		"apps": c.AppsV1().RESTClient(), "coordination": c.CoordinationV1().RESTClient(),
		"networking": c.NetworkingV1().RESTClient(), "rbac": c.RbacV1().RESTClient(),
	} {
		if client.GetRateLimiter() != limiter {
			t.Errorf("%s has a rate limiter of its own: the groups together could send more than the QPS", group)
		}
	}
	if _, err := NewForConfig(&rest.Config{Host: "https://example.invalid", QPS: 7}); err == nil {
		t.Error("a QPS without a burst was accepted")
	}
}

func TestListWatchTweaksListsAndWatches(t *testing.T) {
	client := fake.NewClientset()
	lw := ListWatch(client, client.CoreV1().Secrets("ns"), func(o *metav1.ListOptions) { o.LabelSelector = "a=b" })
	ctx := context.Background()
	if _, err := lw.(cache.ListerWatcherWithContext).ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.(cache.ListerWatcherWithContext).WatchWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	var verbs []string
	for _, a := range client.Actions() {
		verbs = append(verbs, a.GetVerb())
		var selector string
		switch a := a.(type) {
		case k8stesting.ListAction:
			selector = a.GetListRestrictions().Labels.String()
		case k8stesting.WatchAction:
			selector = a.GetWatchRestrictions().Labels.String()
		}
		if selector != "a=b" || a.GetNamespace() != "ns" || a.GetResource().Resource != "secrets" {
			t.Errorf("%s %s in %q with selector %q, want secrets in ns with a=b", a.GetVerb(), a.GetResource().Resource, a.GetNamespace(), selector)
		}
	}
	if strings.Join(verbs, ",") != "list,watch" {
		t.Errorf("requests %v, want list,watch", verbs)
	}
}

// Much of the binaries' resident memory is their own pages
// (docs/benchmarks.md, "Where the controllers' memory goes"): one import of
// client-go's Clientset or informer factory links every API group back in.
func TestNoPackageImportsTheClientsetOrItsInformerFactory(t *testing.T) {
	banned := map[string]string{
		"k8s.io/client-go/kubernetes": "use pkg/kubeclient",
		"k8s.io/client-go/informers":  "make the informer over kubeclient.ListWatch",
	}
	root := filepath.Join("..", "..")
	checked := 0
	for _, dir := range []string{"cmd", "pkg"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && filepath.ToSlash(path) == filepath.ToSlash(filepath.Join(root, "pkg", "client")) {
				return fs.SkipDir // generated; its clientset is its own group's
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			checked++
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if why, ok := banned[p]; ok {
					t.Errorf("%s imports %s: %s", path, p, why)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d files: not the repository's", checked)
	}
}
