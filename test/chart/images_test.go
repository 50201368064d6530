package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func image(t *testing.T, objs []*unstructured.Unstructured, deployment string) string {
	t.Helper()
	dep := find(objs, "Deployment", deployment)
	if dep == nil {
		t.Fatalf("no Deployment %s", deployment)
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	return containers[0].(map[string]any)["image"].(string)
}

// The default images are the project's published ones at the chart's
// appVersion, named without a registry host (so they resolve on Docker Hub,
// or under global.imageRegistry); make run and make e2e keep their local
// images with the same --set as hack/cluster/run.sh.
func TestImages(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &meta); err != nil || meta.AppVersion == "" {
		t.Fatalf("Chart.yaml's appVersion: %q, %v", meta.AppVersion, err)
	}
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name                 string
		args                 []string
		webhook, controllers string
	}{
		{"default", nil,
			"materializeinc/orchestratord-webhook:" + meta.AppVersion, "materializeinc/orchestratord-controllers:" + meta.AppVersion},
		{"registry and a pinned digest", []string{"--set", "global.imageRegistry=registry.example,webhook.image.digest=" + digest, "--set", "controllers.image.tag=v9"},
			"registry.example/materializeinc/orchestratord-webhook@" + digest, "registry.example/materializeinc/orchestratord-controllers:v9"},
		{"the local cluster's", []string{
			"--set", "webhook.image.repository=localhost/orchestratord/webhook,webhook.image.tag=dev,webhook.image.pullPolicy=Never",
			"--set", "controllers.image.repository=localhost/orchestratord/controllers,controllers.image.tag=dev,controllers.image.pullPolicy=Never"},
			"localhost/orchestratord/webhook:dev", "localhost/orchestratord/controllers:dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, "ops", tc.args...)
			if got := image(t, objs, "orchestratord-webhook"); got != tc.webhook {
				t.Errorf("webhook image %q, want %q", got, tc.webhook)
			}
			if got := image(t, objs, "orchestratord-controllers"); got != tc.controllers {
				t.Errorf("controllers image %q, want %q", got, tc.controllers)
			}
		})
	}
	// No host in the default: a first path element with a dot or a port, or
	// localhost, would be one.
	objs := render(t, "ops")
	for _, d := range []string{"orchestratord-webhook", "orchestratord-controllers"} {
		first, _, _ := strings.Cut(image(t, objs, d), "/")
		if strings.ContainsAny(first, ".:") || first == "localhost" {
			t.Errorf("%s's default image names a registry host %q", d, first)
		}
	}
}
