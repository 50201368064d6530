//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The chart's alert rules evaluated by Prometheus' engine on the series
// the running webhook and controllers pods export, scraped as Prometheus
// would (namespace and pod labels added), 4 scrapes 5 s apart: no
// expression fails on the real label sets (a vector match with duplicates,
// say, which unit-test series cannot show), and none fires on a healthy
// cluster.
func TestAlertRulesEvaluateOnTheRunningPods(t *testing.T) {
	ctx := context.Background()
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..")
	out, err := exec.Command(filepath.Join(root, "hack", "kube-binaries.sh"), "promcheck").Output()
	if err != nil {
		t.Fatalf("building promcheck: %v", err)
	}
	promcheck := filepath.Join(strings.TrimSpace(string(out)), "promcheck")

	list, err := c.Kube.CoreV1().Pods(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component in (webhook,controllers)"})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"scrape-eval", filepath.Join(root, "charts", "orchestratord", "files", "monitoring", "alerts.yaml"), operatorNS}
	components := map[string]bool{}
	for _, p := range list.Items {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, port := range p.Spec.Containers[0].Ports {
			if port.Name == "metrics" {
				args = append(args, p.Name+"=http://"+p.Status.PodIP+":"+strconv.Itoa(int(port.ContainerPort))+"/metrics")
				components[p.Labels["app.kubernetes.io/component"]] = true
			}
		}
	}
	if !components["webhook"] || !components["controllers"] {
		t.Fatalf("want running webhook and controllers pods to scrape: %v", components)
	}
	res, err := exec.Command(promcheck, args...).CombinedOutput()
	t.Logf("promcheck %s:\n%s", strings.Join(args[:3], " "), res)
	if err != nil {
		t.Fatalf("the alert rules on the scraped series: %v", err)
	}
	// The alerts on what a healthy cluster always exports watch series
	// there (what they compare with their threshold): their selectors
	// match the real ones. The others watch failures, absent when healthy.
	alwaysWatching := map[string]bool{
		"OrchestratordLeaseWithoutLeader": true, "OrchestratordLeaseMultipleLeaders": true, "OrchestratordLeaseHandoversFrequent": true,
		"OrchestratordReconcileSlow": true, "OrchestratordWorkQueueBacklog": true, "OrchestratordReconcileStuck": true,
		"OrchestratordConversionSlow": true, "OrchestratordWebhookCertificateExpiring": true,
	}
	for _, line := range strings.Split(string(res), "\n") {
		if strings.Contains(line, ", firing [") && !strings.HasSuffix(line, "firing []") {
			t.Errorf("an alert fires on a healthy cluster: %s", line)
		}
		name, rest, ok := strings.Cut(line, ": ")
		if ok && alwaysWatching[name] {
			delete(alwaysWatching, name)
			if strings.Contains(rest, "watching 0,") || strings.Contains(rest, "watching -,") {
				t.Errorf("%s watches no series on the running pods: %s", name, rest)
			}
		}
	}
	for name := range alwaysWatching {
		t.Errorf("%s not reported by promcheck", name)
	}
}
