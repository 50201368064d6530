package kubeclient

import (
	"context"
	"debug/elf"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/materializeinc/orchestratord/test/program"
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
// (docs/benchmarks.md, "Where the controllers' memory goes"). A call that
// reaches client-go's Clientset or informer factory (kubernetes.NewForConfig,
// informers.NewSharedInformerFactory, or a client-go helper built on
// them) links every API group back in; the symbol tables say whether one
// does.
func TestTheProgramsLinkOnlyTheAPIGroupsTheyUse(t *testing.T) {
	used := map[string]bool{"apps": true, "coordination": true, "core": true, "networking": true, "rbac": true}
	dir := t.TempDir()
	if err := program.Build(dir, "cmd/controllers", "cmd/webhook"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"controllers", "webhook"} {
		f, err := elf.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		symbols, err := f.Symbols()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		groups := map[string]bool{}
		for _, sym := range symbols {
			for _, factory := range []string{"k8s.io/client-go/kubernetes.", "k8s.io/client-go/informers."} {
				if strings.Contains(sym.Name, factory) {
					t.Errorf("%s links %s: use pkg/kubeclient", name, sym.Name)
				}
			}
			if _, rest, ok := strings.Cut(sym.Name, "k8s.io/client-go/kubernetes/typed/"); ok {
				group, _, _ := strings.Cut(rest, "/")
				groups[group] = true
			}
		}
		if !groups["core"] {
			t.Fatalf("%s links no core client: the symbol table was not read", name)
		}
		for group := range groups {
			if !used[group] {
				t.Errorf("%s links the %s API group's client", name, group)
			}
		}
	}
}
