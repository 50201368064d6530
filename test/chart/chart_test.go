// Package chart tests the Helm chart: it lints and renders with the pinned
// Helm, and applies what it renders to a real kube-apiserver.
package chart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/materializeinc/orchestratord/test/controlplane"
	"github.com/materializeinc/orchestratord/test/markdown"
)

var (
	helm     string // Helm 3
	helm4    string
	chartDir string
	repoRoot string
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	_, self, _, _ := runtime.Caller(0)
	repoRoot = filepath.Join(filepath.Dir(self), "..", "..")
	chartDir = filepath.Join(repoRoot, "charts", "orchestratord")
	out, err := exec.Command(filepath.Join(repoRoot, "hack", "kube-binaries.sh"), "helm", "helm4").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "building helm:", err)
		return 1
	}
	helm = filepath.Join(strings.TrimSpace(string(out)), "helm")
	helm4 = filepath.Join(strings.TrimSpace(string(out)), "helm4")
	if err := startCluster(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cp.Stop()
	return m.Run()
}

var cp *controlplane.ControlPlane

func startCluster() error {
	var err error
	cp, err = controlplane.Start(context.Background(), controlplane.Options{Audit: true})
	return err
}

// render runs helm template and returns the objects.
func render(t *testing.T, namespace string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := helmRun(append([]string{"template", "orchestratord", chartDir, "--namespace", namespace}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, out)
	}
	return decode(t, out)
}

func helmRun(args ...string) (string, error) { return runWith(helm, args...) }

func runWith(binary string, args ...string) (string, error) {
	cmd := exec.Command(binary, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

func decode(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	// A key twice in one mapping (two label helpers naming the same
	// label) decodes here, last one winning, but kustomize and Flux's
	// post-render refuse it.
	for _, doc := range strings.Split(manifest, "\n---") {
		if _, err := yaml.YAMLToJSONStrict([]byte(doc)); err != nil {
			t.Fatalf("rendered manifest: %v\n%s", err, doc)
		}
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatal(err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

func kinds(objs []*unstructured.Unstructured) map[string]int {
	k := map[string]int{}
	for _, o := range objs {
		k[o.GetKind()]++
	}
	return k
}

func TestLintIsClean(t *testing.T) {
	for name, binary := range map[string]string{"helm 3": helm, "helm 4": helm4} {
		for _, args := range [][]string{
			nil,
			{"--set", "webhook.replicas=1,controllers.replicas=1"},
			{"--set", "tls.mode=cert-manager"},
			{"-f", "testdata/all-options.yaml"},
			{"-f", "testdata/upstream-values.yaml"},
			{"--set", "nameOverride=mzop,rbac.create=false,serviceAccount.create=false,serviceAccount.name=operator"},
		} {
			out, err := runWith(binary, append([]string{"lint", "--strict", chartDir}, args...)...)
			if err != nil || strings.Contains(out, "[ERROR]") || strings.Contains(out, "[WARNING]") {
				t.Errorf("%s lint %v: %v\n%s", name, args, err, out)
			}
		}
	}
}

// Helm 4 renders exactly what Helm 3 renders.
func TestHelm4RendersTheSame(t *testing.T) {
	for _, args := range [][]string{nil, {"--set", "tls.mode=cert-manager"}, {"-f", "testdata/all-options.yaml"},
		{"--set", "fullnameOverride=acme,serviceAccount.name=shared,webhook.serviceAccount.name=wh,tls.caDuration=87600h,tls.caRenewBefore=8760h"},
		{"--set", "nameOverride=mzop,rbac.create=false,tls.mode=cert-manager,tls.caDuration=87600h"}} {
		base := append([]string{"template", "orchestratord", chartDir, "--namespace", "ops"}, args...)
		three, err3 := runWith(helm, base...)
		four, err4 := runWith(helm4, base...)
		if err3 != nil || err4 != nil {
			t.Fatalf("template %v: helm 3: %v, helm 4: %v\n%s", args, err3, err4, four)
		}
		// Byte-for-byte they differ in blank lines only; compare the objects.
		a, b := decode(t, three), decode(t, four)
		if len(a) != len(b) {
			t.Fatalf("template %v: helm 3 renders %d objects, helm 4 %d", args, len(a), len(b))
		}
		for i := range a {
			if !reflect.DeepEqual(a[i].Object, b[i].Object) {
				t.Errorf("template %v: %s %s differs between helm 3 and helm 4", args, a[i].GetKind(), a[i].GetName())
			}
		}
	}
}

func TestDefaultRender(t *testing.T) {
	objs := render(t, "ops")
	k := kinds(objs)
	// Materialize, Balancer, Console and environmentd's VpcEndpoint.
	for kind, n := range map[string]int{"CustomResourceDefinition": 4, "Deployment": 2, "PodDisruptionBudget": 2, "ServiceAccount": 2, "Service": 1} {
		if k[kind] != n {
			t.Errorf("%d %s, want %d (all: %v)", k[kind], kind, n, k)
		}
	}
	if find(objs, "CustomResourceDefinition", "vpcendpoints.materialize.cloud") == nil {
		t.Error("no vpcendpoints.materialize.cloud CRD: environmentd lists VpcEndpoints while it boots")
	}
	crd := find(objs, "CustomResourceDefinition", "materializes.materialize.cloud")
	svc, _, _ := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service")
	if svc["name"] != "orchestratord-webhook" || svc["namespace"] != "ops" || svc["path"] != "/convert" {
		t.Errorf("conversion clientConfig does not point at the webhook Service: %v", svc)
	}
	webhook := find(objs, "Deployment", "orchestratord-webhook")
	if mu, _, _ := unstructured.NestedFieldNoCopy(webhook.Object, "spec", "strategy", "rollingUpdate", "maxUnavailable"); fmt.Sprint(mu) != "0" {
		t.Errorf("webhook rollout must keep every ready replica: maxUnavailable %v", mu)
	}
	if r, _, _ := unstructured.NestedFieldNoCopy(webhook.Object, "spec", "replicas"); fmt.Sprint(r) != "3" {
		t.Errorf("webhook replicas %v, want 3", r)
	}
	controllers := find(objs, "Deployment", "orchestratord-controllers")
	if r, _, _ := unstructured.NestedFieldNoCopy(controllers.Object, "spec", "replicas"); fmt.Sprint(r) != "2" {
		t.Errorf("controllers replicas %v, want 2", r)
	}
	env, _, _ := unstructured.NestedSlice(controllers.Object, "spec", "template", "spec", "containers")
	if !strings.Contains(fmt.Sprint(env), "POD_NAME") {
		t.Errorf("controllers need POD_NAME from the downward API as identity")
	}
	// The two Deployments share no selector: a rollout of one never touches the other.
	ws, _, _ := unstructured.NestedStringMap(webhook.Object, "spec", "selector", "matchLabels")
	cs, _, _ := unstructured.NestedStringMap(controllers.Object, "spec", "selector", "matchLabels")
	if ws["app.kubernetes.io/component"] == cs["app.kubernetes.io/component"] {
		t.Errorf("selectors overlap: %v %v", ws, cs)
	}
}

// The controllers run with GOGC=50 (their memory is their caches:
// docs/benchmarks.md); empty leaves the runtime's default.
func TestControllersGOGC(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{{"", "GOGC 50"}, {"controllers.gogc=200", "GOGC 200"}, {"controllers.gogc=", ""}} {
		args := []string{}
		if tc.set != "" {
			args = append(args, "--set", tc.set)
		}
		containers, _, _ := unstructured.NestedSlice(find(render(t, "ops", args...), "Deployment", "orchestratord-controllers").Object,
			"spec", "template", "spec", "containers")
		env, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
		got := ""
		for _, e := range env {
			if e := e.(map[string]any); e["name"] == "GOGC" {
				got = fmt.Sprint("GOGC ", e["value"])
			}
		}
		if got != tc.want {
			t.Errorf("--set %q: %q, want %q", tc.set, got, tc.want)
		}
	}
	// GOGC=0 would collect continuously.
	for _, bad := range [][]string{{"--set", "controllers.gogc=fifty"}, {"--set", "controllers.gogc=0"}, {"--set-string", "controllers.gogc=0"}} {
		if _, err := helmRun(append([]string{"template", "orchestratord", chartDir}, bad...)...); err == nil {
			t.Errorf("%s rendered; the schema must reject it", bad)
		}
	}
}

func TestSingleReplicaHasNoPDB(t *testing.T) {
	objs := render(t, "ops", "--set", "webhook.replicas=1,controllers.replicas=1")
	if n := kinds(objs)["PodDisruptionBudget"]; n != 0 {
		t.Errorf("%d PodDisruptionBudgets with one replica each, want 0", n)
	}
}

func TestCertManagerMode(t *testing.T) {
	objs := render(t, "ops", "--set", "tls.mode=cert-manager")
	if find(objs, "Certificate", "orchestratord-webhook") == nil || find(objs, "Issuer", "") == nil {
		t.Fatalf("no Certificate/Issuer: %v", kinds(objs))
	}
	crd := find(objs, "CustomResourceDefinition", "materializes.materialize.cloud")
	if got := crd.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "ops/orchestratord-webhook" {
		t.Errorf("CA injection annotation = %q", got)
	}
	if find(objs, "ClusterRole", "orchestratord-webhook") != nil {
		t.Errorf("in cert-manager mode the webhook must not be allowed to patch the CRD")
	}
	dep := find(objs, "Deployment", "orchestratord-webhook")
	if mount, found, _ := unstructured.NestedBool(dep.Object, "spec", "template", "spec", "automountServiceAccountToken"); !found || mount {
		t.Errorf("in cert-manager mode the webhook calls no API and must mount no ServiceAccount token")
	}
	args := fmt.Sprint(dep.Object)
	if !strings.Contains(args, "--tls-mode=cert-manager") || !strings.Contains(args, "--tls-cert-file=/tls/tls.crt") {
		t.Errorf("webhook not configured for cert-manager: %s", args)
	}
}

func TestAllOptionsRender(t *testing.T) {
	objs := render(t, "ops", "-f", "testdata/all-options.yaml")
	k := kinds(objs)
	for _, kind := range []string{"NetworkPolicy", "ServiceMonitor", "PodDisruptionBudget"} {
		if k[kind] == 0 {
			t.Errorf("no %s rendered: %v", kind, k)
		}
	}
	webhook := fmt.Sprint(find(objs, "Deployment", "orchestratord-webhook").Object)
	for _, want := range []string{"registry.example/custom/webhook@sha256:0123", "system-cluster-critical", "--log-level=debug", "my-webhook-tls", "--tls-ca-file=/tls/ca.crt", "topology.kubernetes.io/zone"} {
		if !strings.Contains(webhook, want) {
			t.Errorf("webhook Deployment lacks %q", want)
		}
	}
	controllers := fmt.Sprint(find(objs, "Deployment", "orchestratord-controllers").Object)
	for _, want := range []string{"registry.example/custom/controllers:v9", "--leader-election-namespace=leases", "--leader-election-lease-duration=30s", "--controllers=materialize,console", "--create-balancers=false", "--allow-existing-service-accounts",
		"environments", "pull"} {
		if !strings.Contains(controllers, want) {
			t.Errorf("controllers Deployment lacks %q", want)
		}
	}
	if role := find(objs, "Role", "orchestratord-controllers-leases"); role == nil || role.GetNamespace() != "leases" {
		t.Errorf("the lease Role must live in the lease namespace")
	}
	if find(objs, "StorageClass", "openebs-lvm-instance-store-ext4") == nil {
		t.Errorf("no StorageClass")
	}
	for _, name := range []string{"orchestratord-webhook", "orchestratord-controllers"} {
		if sa := find(objs, "ServiceAccount", name); sa == nil || sa.GetAnnotations()["team"] != "db" {
			t.Errorf("ServiceAccount %s lacks serviceAccount.annotations", name)
		}
	}
}

func TestSchemaRejectsTypos(t *testing.T) {
	// Sizes environmentd would refuse: not a byte size, not a numeric string, scale past u16.
	for _, bad := range []string{"webhook.replica=2", "controllers.leaderElection.leaseDuraton=5s", "tls.mode=letsencrypt", "controllers.replicas=-1",
		"clusters.sizes.25cc.memory_limit=4 gigs", "clusters.sizes.25cc.credits_per_hour=cheap", "clusters.sizes.25cc.scale=70000"} {
		out, err := helmRun("template", "orchestratord", chartDir, "--set", bad)
		if err == nil {
			t.Errorf("--set %s rendered; the schema must reject it", bad)
			continue
		}
		field := strings.Split(strings.Split(bad, "=")[0], ".")
		if !strings.Contains(out, field[len(field)-1]) && !strings.Contains(out, "mode") {
			t.Errorf("--set %s: the error does not name the field:\n%s", bad, out)
		}
	}
	if out, err := helmRun("template", "orchestratord", chartDir, "--set", "tls.mode=secret"); err == nil {
		t.Errorf("secret mode without tls.secretName must be rejected:\n%s", out)
	}
	// What is no label goes into no CEL expression: the schema refuses
	// it, and so does the template when the schema is skipped.
	for _, bad := range []string{`{"bad key":"x"}`, `{"team":"a\" || true || \""}`, `{"team":1}`} {
		// (helm's schema errors name a wrong path for a property name.)
		if out, err := helmRun("template", "orchestratord", chartDir, "--set-json", "controllers.admissionPolicy.namespaceLabels="+bad); err == nil ||
			!strings.Contains(out, "values don't meet the specifications of the schema") {
			t.Errorf("namespaceLabels %s: the schema must reject it: %v\n%s", bad, err, out)
		}
		if out, err := helmRun("template", "orchestratord", chartDir, "--skip-schema-validation", "--set-json", "controllers.admissionPolicy.namespaceLabels="+bad); err == nil ||
			!strings.Contains(out, "controllers.admissionPolicy.namespaceLabels: ") {
			t.Errorf("namespaceLabels %s without the schema: the template must refuse it: %v\n%s", bad, err, out)
		}
	}
	// Only namespaces' names go into the Roles' metadata.
	for _, bad := range []string{`["Tenant"]`, `["t\nrules: []"]`, `[1]`, `["` + strings.Repeat("a", 64) + `"]`} {
		if out, err := helmRun("template", "orchestratord", chartDir, "--set-json", "controllers.secretNamespaces="+bad); err == nil ||
			!strings.Contains(out, "secretNamespaces") {
			t.Errorf("secretNamespaces %s: the schema must reject it: %v\n%s", bad, err, out)
		}
		if out, err := helmRun("template", "orchestratord", chartDir, "--skip-schema-validation", "--set-json", "controllers.secretNamespaces="+bad); err == nil ||
			!strings.Contains(out, "controllers.secretNamespaces: ") {
			t.Errorf("secretNamespaces %s without the schema: the template must refuse it: %v\n%s", bad, err, out)
		}
	}
}

// The webhook's autoscaler: off by default; on, an autoscaling/v2 HPA on
// CPU whose minimum keeps the PDB satisfiable (minAvailable + 1 unless
// set), the Deployment starting at that minimum, and a minimum the PDB
// could block refused with a message naming both values.
func TestWebhookAutoscaling(t *testing.T) {
	if n := kinds(render(t, "ns"))["HorizontalPodAutoscaler"]; n != 0 {
		t.Fatalf("default render has %d HorizontalPodAutoscalers, want none", n)
	}
	objs := render(t, "ns", "--set", "webhook.autoscaling.enabled=true", "--set", "webhook.podDisruptionBudget.minAvailable=2")
	hpa := find(objs, "HorizontalPodAutoscaler", "orchestratord-webhook")
	if hpa == nil {
		t.Fatal("no HorizontalPodAutoscaler orchestratord-webhook")
	}
	field := func(obj *unstructured.Unstructured, path ...string) string {
		v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, path...)
		return fmt.Sprint(v)
	}
	min, max := field(hpa, "spec", "minReplicas"), field(hpa, "spec", "maxReplicas")
	target := field(hpa, "spec", "scaleTargetRef", "name")
	if min != "3" || max != "6" || target != "orchestratord-webhook" {
		t.Errorf("HPA min %s max %s target %q, want 3 (minAvailable 2 + 1), 6, the webhook Deployment", min, max, target)
	}
	metrics, _, _ := unstructured.NestedSlice(hpa.Object, "spec", "metrics")
	if len(metrics) != 1 || fmt.Sprint(metrics[0]) != "map[resource:map[name:cpu target:map[averageUtilization:70 type:Utilization]] type:Resource]" {
		t.Errorf("HPA metrics %v, want CPU utilization 70%%", metrics)
	}
	if replicas := field(find(objs, "Deployment", "orchestratord-webhook"), "spec", "replicas"); replicas != "3" {
		t.Errorf("webhook Deployment replicas %s under the autoscaler, want its minimum 3", replicas)
	}
	if find(objs, "PodDisruptionBudget", "orchestratord-webhook") == nil {
		t.Error("no webhook PDB under the autoscaler")
	}
	out, err := helmRun("template", "orchestratord", chartDir, "--set", "webhook.autoscaling.enabled=true", "--set", "webhook.autoscaling.minReplicas=1")
	if err == nil || !strings.Contains(out, "webhook.autoscaling.minReplicas (1) must be above webhook.podDisruptionBudget.minAvailable (1)") {
		t.Errorf("minReplicas at minAvailable: %v\n%s", err, out)
	}
	// A PodDisruptionBudget by maxUnavailable lets that many go at once:
	// the floor is one more.
	byMax := render(t, "ns", "--set", "webhook.autoscaling.enabled=true",
		"--set", "webhook.podDisruptionBudget.minAvailable=null", "--set", "webhook.podDisruptionBudget.maxUnavailable=2")
	if min := field(find(byMax, "HorizontalPodAutoscaler", "orchestratord-webhook"), "spec", "minReplicas"); min != "3" {
		t.Errorf("HPA min %s with maxUnavailable 2, want 3", min)
	}
}

// Disruption settings that cannot work are refused at render time with
// what to change, not applied: a PodDisruptionBudget given both bounds
// (one was silently dropped), a rolling update that may move no pod, and a
// webhook that would go away whole (Recreate).
func TestDisruptionSettingsThatCannotWorkAreRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "controllers.podDisruptionBudget.minAvailable=2"},
			"controllers.podDisruptionBudget sets both minAvailable (2) and maxUnavailable (1)"},
		{[]string{"--set", "webhook.podDisruptionBudget.maxUnavailable=1"},
			"webhook.podDisruptionBudget sets both minAvailable (1) and maxUnavailable (1)"},
		{[]string{"--set", "controllers.updateStrategy.rollingUpdate.maxUnavailable=0,controllers.updateStrategy.rollingUpdate.maxSurge=0"},
			"controllers.updateStrategy.rollingUpdate: maxUnavailable and maxSurge cannot both be 0"},
		{[]string{"--set", "controllers.updateStrategy.rollingUpdate.maxUnavailable=0%,controllers.updateStrategy.rollingUpdate.maxSurge=0"},
			"controllers.updateStrategy.rollingUpdate: maxUnavailable and maxSurge cannot both be 0"},
		{[]string{"--set", "webhook.updateStrategy.type=Recreate"}, "/webhook/updateStrategy/type': value must be 'RollingUpdate'"},
	} {
		if out := renderFails(t, c.args...); !strings.Contains(out, c.want) {
			t.Errorf("%v: %s, want %q", c.args, out, c.want)
		}
	}
	// One replica renders no PodDisruptionBudget: its bounds are not read.
	render(t, "ns", "--set", "controllers.replicas=1,controllers.podDisruptionBudget.minAvailable=1")
}

// The controllers' egress policy: rendered with upstream's gate
// (networkPolicies.enabled and .internal.enabled) unless set, it restricts
// egress only, keeps upstream's rule to environmentd's HTTP ports, and lets
// the API server, DNS and the OTLP endpoint through.
func TestControllersEgressPolicy(t *testing.T) {
	const name = "orchestratord-controllers-egress"
	if find(render(t, "ns"), "NetworkPolicy", name) != nil {
		t.Error("egress policy rendered without networkPolicies")
	}
	if find(render(t, "ns", "--set", "networkPolicies.enabled=true,networkPolicies.internal.enabled=true",
		"--set", "networkPolicy.egress.enabled=false"), "NetworkPolicy", name) != nil {
		t.Error("egress policy rendered though networkPolicy.egress.enabled=false")
	}
	objs := render(t, "ns", "--set", "networkPolicies.enabled=true,networkPolicies.internal.enabled=true",
		"--set", "tracing.opentelemetry.endpoint=http://otel.monitoring:14317")
	np := find(objs, "NetworkPolicy", name)
	if np == nil {
		t.Fatal("no controllers egress policy under upstream's gate")
	}
	types, _, _ := unstructured.NestedStringSlice(np.Object, "spec", "policyTypes")
	if fmt.Sprint(types) != "[Egress]" {
		t.Errorf("policyTypes %v, want [Egress]: a policy without them also denies all ingress", types)
	}
	rules, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
	var got []string
	for _, r := range rules {
		got = append(got, fmt.Sprint(r))
	}
	want := []string{
		"map[ports:[map[port:6876 protocol:TCP] map[port:6878 protocol:TCP]] to:[map[namespaceSelector:map[] podSelector:map[matchLabels:map[materialize.cloud/app:environmentd]]]]]",
		"map[ports:[map[port:443 protocol:TCP] map[port:6443 protocol:TCP]]]",
		"map[to:[map[namespaceSelector:map[] podSelector:map[matchLabels:map[k8s-app:kube-dns]]]]]",
		"map[ports:[map[port:53 protocol:UDP] map[port:53 protocol:TCP]]]",
		"map[ports:[map[port:14317 protocol:TCP]]]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("egress rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The OTLP rule is the port the exporter dials: the URL's, else its
	// scheme's.
	gate := "networkPolicies.enabled=true,networkPolicies.internal.enabled=true"
	for endpoint, port := range map[string]string{"http://otel.monitoring": "80", "https://otel.example.com/v1/traces": "443",
		"http://[fd00::1]:4317": "4317", "http://[fd00::1]/x": "80"} {
		rules, _, _ := unstructured.NestedSlice(find(render(t, "ns", "--set", gate, "--set", "tracing.opentelemetry.endpoint="+endpoint),
			"NetworkPolicy", name).Object, "spec", "egress")
		if last := fmt.Sprint(rules[len(rules)-1]); last != "map[ports:[map[port:"+port+" protocol:TCP]]]" {
			t.Errorf("endpoint %s: OTLP rule %s, want port %s", endpoint, last, port)
		}
	}
	// The GKE node upgrade trigger reaches the metadata server and Google.
	rules, _, _ = unstructured.NestedSlice(find(render(t, "ns", "--set", gate, "--set", "cloudProvider.type=gcp",
		"--set", "cloudProvider.providers.gcp.nodeUpgradeRolloutTrigger.enabled=true",
		"--set", "cloudProvider.providers.gcp.nodeUpgradeRolloutTrigger.notificationSubscription=projects/p/subscriptions/s",
		"--set", "cloudProvider.providers.gcp.nodeUpgradeRolloutTrigger.clusterName=c",
		"--set", "cloudProvider.providers.gcp.nodeUpgradeRolloutTrigger.clusterLocation=l"), "NetworkPolicy", name).Object, "spec", "egress")
	if all := fmt.Sprint(rules); !strings.Contains(all, "169.254.169.254/32") || !strings.Contains(all, "port:988") {
		t.Errorf("with the GKE trigger, no rule for the metadata server: %s", all)
	}
	// Values without the keys (an upgrade with --reuse-values) fail, with
	// what to do, instead of a rule without ports that admits everything.
	out, err := helmRun("template", "orchestratord", chartDir, "--set", gate, "--set", "networkPolicy.egress.apiServerPorts=null")
	if err == nil || !strings.Contains(out, "use --reset-then-reuse-values") {
		t.Errorf("egress policy without apiServerPorts: %v\n%s", err, out)
	}
}

// The values files of docs/install-production.md (its ```yaml blocks whose
// first line is "# values-<name>.yaml") render with the chart: every key
// they set exists and passes the schema, and the cloud provider they name
// reaches the controllers.
func TestProductionValuesRender(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(chartDir, "..", "..", "docs", "install-production.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := markdown.Blocks(page)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, b := range markdown.Lang(blocks, "yaml") {
		first, _, _ := strings.Cut(b.Body, "\n")
		if name, ok := strings.CutPrefix(first, "# "); ok && strings.HasPrefix(name, "values-") {
			files[name] = b.Body
		}
	}
	for name, provider := range map[string]string{"values-eks.yaml": "aws", "values-gke.yaml": "gcp"} {
		body, ok := files[name]
		if !ok {
			t.Errorf("docs/install-production.md has no %s block", name)
			continue
		}
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		objs := render(t, "orchestratord", "-f", path)
		args := strings.Join(containerArgs(t, find(objs, "Deployment", "orchestratord-controllers")), " ")
		if !strings.Contains(args, "--cloud-provider="+provider) {
			t.Errorf("%s: the controllers run without --cloud-provider=%s: %s", name, provider, args)
		}
		if find(objs, "HorizontalPodAutoscaler", "orchestratord-webhook") == nil {
			t.Errorf("%s: no webhook autoscaler", name)
		}
	}
}
