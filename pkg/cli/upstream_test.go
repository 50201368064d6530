package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
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

// Kubernetes gives every pod variables for the Services of its namespace:
// the chart's webhook Service orchestratord-webhook makes
// ORCHESTRATORD_WEBHOOK_SERVICE_PORT, the environment name of upstream's
// refused --webhook-service-port. The environment never sets upstream's
// refused or ignored flags; the command line still does.
func TestServiceVariablesDoNotSetUpstreamFlags(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.String("metrics-address", ":8080", "")
	UpstreamFlags{
		Aliases: map[string]string{"metrics-listen-address": "metrics-address"},
		Refused: map[string]string{"webhook-service-port": "the chart's webhook.service.port"},
		Ignored: map[string]string{"disable-authentication": "read nowhere"},
	}.Install(fs)
	env := map[string]string{
		"ORCHESTRATORD_WEBHOOK_SERVICE_PORT":   "443",
		"ORCHESTRATORD_DISABLE_AUTHENTICATION": "true",
		"ORCHESTRATORD_METRICS_ADDRESS":        ":3100",
	}
	if err := ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatalf("the Service's variables: %v", err)
	}
	if got := fs.Lookup("metrics-address").Value.String(); got != ":3100" {
		t.Errorf("ORCHESTRATORD_METRICS_ADDRESS set --metrics-address to %q", got)
	}
	if err := fs.Parse([]string{"--webhook-service-port=443"}); err == nil {
		t.Error("the command line's --webhook-service-port was accepted")
	}
}
