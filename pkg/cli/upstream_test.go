package cli

import (
	"os"
	"path/filepath"
	"testing"
)

const twoContexts = `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: a
  context: {cluster: a, user: u}
- name: b
  context: {cluster: b, user: u}
`

// --kubernetes-context picks a context as upstream's does; without it the
// kubeconfig's current context is used; a context no kubeconfig has falls
// back to in-cluster, which outside a pod is an error naming both.
func TestRESTConfigContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for context, want := range map[string]string{"": "https://a.example:6443", "b": "https://b.example:6443"} {
		cfg, err := RESTConfig(path, context)
		if err != nil || cfg.Host != want {
			t.Errorf("context %q: %v, %v; want %s", context, cfg, err, want)
		}
	}
	if _, err := RESTConfig(path, "missing"); err == nil {
		t.Error("a context no kubeconfig has, outside a pod: no error")
	}
}
