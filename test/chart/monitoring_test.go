package chart

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/conversion"
	"github.com/materializeinc/orchestratord/pkg/servingcert"
)

func monitoringFile(name string) string { return filepath.Join(chartDir, "files", "monitoring", name) }

// Off by default; on, the PrometheusRule's spec is files/monitoring/alerts.yaml
// and the ConfigMap's dashboard is files/monitoring/dashboard.json, as they
// are: what `make verify` checks is what ships.
func TestMonitoringRender(t *testing.T) {
	objs := render(t, "ops")
	if k := kinds(objs); k["PrometheusRule"] != 0 || find(objs, "ConfigMap", "orchestratord-dashboard") != nil {
		t.Errorf("monitoring rendered by default: %v", k)
	}

	rawRules, err := os.ReadFile(monitoringFile("alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var wantSpec map[string]any
	if err := yaml.Unmarshal(rawRules, &wantSpec); err != nil {
		t.Fatal(err)
	}
	dashboard, err := os.ReadFile(monitoringFile("dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                      string
		set                       string
		ruleNS, dashNS            string
		ruleLabels, dashLabels    map[string]string
		ruleAnnotations, dashAnns map[string]string
	}{
		{name: "defaults", set: "monitoring.prometheusRule.enabled=true,monitoring.grafanaDashboard.enabled=true",
			ruleNS: "ops", dashNS: "ops", dashLabels: map[string]string{"grafana_dashboard": "1"}},
		{name: "kube-prometheus-stack in its own namespace",
			set: "monitoring.prometheusRule.enabled=true,monitoring.prometheusRule.namespace=monitoring,monitoring.prometheusRule.labels.release=kps," +
				"monitoring.prometheusRule.annotations.team=db," +
				"monitoring.grafanaDashboard.enabled=true,monitoring.grafanaDashboard.namespace=grafana,monitoring.grafanaDashboard.label=dashboards," +
				"monitoring.grafanaDashboard.labelValue=yes,monitoring.grafanaDashboard.labels.team=db,monitoring.grafanaDashboard.annotations.grafana_folder=Materialize",
			ruleNS: "monitoring", dashNS: "grafana", ruleLabels: map[string]string{"release": "kps"}, ruleAnnotations: map[string]string{"team": "db"},
			dashLabels: map[string]string{"dashboards": "yes", "team": "db"}, dashAnns: map[string]string{"grafana_folder": "Materialize"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, "ops", "--set", tc.set)
			rule := find(objs, "PrometheusRule", "orchestratord")
			if rule == nil {
				t.Fatalf("no PrometheusRule orchestratord: %v", kinds(objs))
			}
			checkMeta(t, rule, tc.ruleNS, tc.ruleLabels, tc.ruleAnnotations)
			if spec, _, _ := unstructured.NestedMap(rule.Object, "spec"); !reflect.DeepEqual(spec, wantSpec) {
				t.Errorf("the PrometheusRule's spec is not files/monitoring/alerts.yaml:\n%v", spec)
			}
			cm := find(objs, "ConfigMap", "orchestratord-dashboard")
			if cm == nil {
				t.Fatalf("no ConfigMap orchestratord-dashboard: %v", kinds(objs))
			}
			checkMeta(t, cm, tc.dashNS, tc.dashLabels, tc.dashAnns)
			if got, _, _ := unstructured.NestedString(cm.Object, "data", "orchestratord.json"); got != strings.TrimRight(string(dashboard), "\n") {
				t.Errorf("the ConfigMap's orchestratord.json is not files/monitoring/dashboard.json")
			}
		})
	}

	for _, bad := range []string{"monitoring.prometheusRule.enable=true", "monitoring.grafanaDashboard.label=", "monitoring.prometheusRule.namespace=Not_A_Namespace"} {
		if _, err := helmRun("template", "orchestratord", chartDir, "--set", bad); err == nil {
			t.Errorf("--set %s rendered; the schema must reject it", bad)
		}
	}
}

func checkMeta(t *testing.T, obj *unstructured.Unstructured, namespace string, labels, annotations map[string]string) {
	t.Helper()
	if obj.GetNamespace() != namespace {
		t.Errorf("%s %s in namespace %q, want %q", obj.GetKind(), obj.GetName(), obj.GetNamespace(), namespace)
	}
	got := obj.GetLabels()
	if got["app.kubernetes.io/instance"] != "orchestratord" {
		t.Errorf("%s lacks the chart's labels: %v", obj.GetKind(), got)
	}
	for k, v := range labels {
		if got[k] != v {
			t.Errorf("%s label %s=%q, want %q", obj.GetKind(), k, got[k], v)
		}
	}
	for k, v := range annotations {
		if obj.GetAnnotations()[k] != v {
			t.Errorf("%s annotation %s=%q, want %q", obj.GetKind(), k, obj.GetAnnotations()[k], v)
		}
	}
}

// monitoringRef is what hack/tools/promtool's `refs` reports of one
// expression of the alert rules or the dashboard.
type monitoringRef struct {
	Source  string   `json:"source"`
	Expr    string   `json:"expr"`
	Metrics []string `json:"metrics"`
	Labels  []string `json:"labels"`
}

// targetLabels are the labels Prometheus adds to a scraped pod's series
// (prometheus-operator's ServiceMonitor), which no program exports.
var targetLabels = map[string]bool{"namespace": true, "pod": true}

// Every metric the alert rules and the dashboard refer to is exported by
// the programs the chart runs, and every label they match or group by is
// on one of the expression's metrics (or is a target label): names cannot
// drift. The webhook and the controllers run as built, with the chart's
// arguments for the controllers, and are exercised until every series
// referred to exists: conversions, a tampered carry annotation, a
// connection evicted at --max-connections, a Materialize reconciled.
func TestMonitoringNamesAreExported(t *testing.T) {
	out, err := exec.Command(filepath.Join(repoRoot, "hack", "kube-binaries.sh"), "promcheck").Output()
	if err != nil {
		t.Fatalf("building promcheck: %v", err)
	}
	refsOut, err := exec.Command(filepath.Join(strings.TrimSpace(string(out)), "promcheck"), "refs",
		monitoringFile("alerts.yaml"), monitoringFile("dashboard.json")).Output()
	if err != nil {
		t.Fatalf("promcheck refs: %v", err)
	}
	var refs []monitoringRef
	if err := json.Unmarshal(refsOut, &refs); err != nil {
		t.Fatal(err)
	}
	wanted := map[string]bool{}
	for _, r := range refs {
		for _, m := range r.Metrics {
			wanted[m] = true
		}
	}

	webhookMetrics := startMonitoredWebhook(t)
	controllersMetrics := startMonitoredControllers(t)

	var exported map[string]map[string]bool
	var missing []string
	deadline := time.Now().Add(90 * time.Second)
	for {
		exported = map[string]map[string]bool{}
		for _, addr := range []string{webhookMetrics, controllersMetrics} {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			for name, labels := range exposition(body.String()) {
				if exported[name] == nil {
					exported[name] = map[string]bool{}
				}
				for l := range labels {
					exported[name][l] = true
				}
			}
		}
		missing = missing[:0]
		for m := range wanted {
			if exported[m] == nil {
				missing = append(missing, m)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	sort.Strings(missing)
	for _, m := range missing {
		var by []string
		for _, r := range refs {
			for _, rm := range r.Metrics {
				if rm == m {
					by = append(by, r.Source)
				}
			}
		}
		t.Errorf("%s is exported by neither program; referred to by %s", m, strings.Join(by, "; "))
	}
	for _, r := range refs {
		for _, l := range r.Labels {
			found := targetLabels[l]
			for _, m := range r.Metrics {
				found = found || exported[m][l]
			}
			if !found {
				t.Errorf("%s: label %q is on none of %v", r.Source, l, r.Metrics)
			}
		}
	}
	t.Logf("%d expressions over %d metrics, all exported", len(refs), len(wanted))
}

// exposition maps each sample name of a text exposition to its label names.
func exposition(text string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, hasLabels := strings.Cut(line, "{")
		if !hasLabels {
			name, _, _ = strings.Cut(line, " ")
		}
		labels := map[string]bool{}
		for hasLabels && rest != "" && rest[0] != '}' {
			key, value, ok := strings.Cut(rest, `="`)
			if !ok {
				break
			}
			labels[strings.TrimPrefix(key, ",")] = true
			// Skip the quoted value, escapes included.
			i := 0
			for i < len(value) && value[i] != '"' {
				if value[i] == '\\' {
					i++
				}
				i++
			}
			rest = value[min(i+1, len(value)):]
		}
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for l := range labels {
			out[name][l] = true
		}
	}
	return out
}

// startMonitoredWebhook runs the webhook (cert-manager mode: certificate
// files, no API calls) capped at one connection, sends it ConversionReviews
// (one with a tampered carry annotation, one it cannot convert), then a
// second connection that evicts the first. Returns its metrics address.
func startMonitoredWebhook(t *testing.T) string {
	t.Helper()
	ca, err := servingcert.NewCA("monitoring-test", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueServing(nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	https, health, metrics := freeAddr(t), freeAddr(t), freeAddr(t)
	startProcess(t, buildBinary(t, "cmd/webhook"), "--tls-mode=cert-manager", "--tls-cert-file="+certFile, "--tls-key-file="+keyFile,
		"--listen-address="+https, "--health-address="+health, "--metrics-address="+metrics, "--shutdown-drain=0s", "--max-connections=1")
	waitHTTP(t, "http://"+health+"/readyz")

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	tlsConfig := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	// A connection per review: at the cap of one, a kept one could be
	// evicted under the next request.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	object := func(apiVersion string, annotations map[string]string) runtime.RawExtension {
		raw, err := json.Marshal(&v1alpha1.Materialize{
			TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: "Materialize"},
			ObjectMeta: metav1.ObjectMeta{Name: "mz", Namespace: "tenant", Annotations: annotations},
			Spec:       v1alpha1.MaterializeSpec{EnvironmentdImageRef: "materialize/environmentd:v26.1.0", BackendSecretName: "backend"},
		})
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: raw}
	}
	// What the integration test of pkg/webhook/app tampers with.
	tampered := map[string]string{conversion.AnnotationPrefix + "v1": `[{"path":["metadata","name"],"value":"other","derived":"mz"}]`}
	for i, objects := range [][]runtime.RawExtension{
		{object("materialize.cloud/v1alpha1", nil), object("materialize.cloud/v1alpha1", tampered)},
		{object("materialize.cloud/v9", nil)},
	} {
		body, _ := json.Marshal(&apiextensionsv1.ConversionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
			Request:  &apiextensionsv1.ConversionRequest{UID: types.UID(fmt.Sprintf("review-%d", i)), DesiredAPIVersion: "materialize.cloud/v1", Objects: objects},
		})
		// At the cap of one the previous connection may not be counted
		// closed yet (the server sees the client's close a moment later),
		// and this one is refused: send it again.
		var resp *http.Response
		var err error
		for attempt := 0; attempt < 20; attempt++ {
			if resp, err = client.Post("https://"+https+"/convert", "application/json", bytes.NewReader(body)); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("review %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("review %d answered %d", i, resp.StatusCode)
		}
	}
	// An idle connection, then a second one, which evicts it.
	for range 2 {
		// As above, the review's connection may still be counted for a
		// moment, and a handshake then refused (reset): dial again.
		var conn *tls.Conn
		var err error
		for attempt := 0; attempt < 20; attempt++ {
			if conn, err = tls.Dial("tcp", https, tlsConfig); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
	}
	return metrics
}

// startMonitoredControllers runs the controllers with the chart's
// arguments against the test API server, and creates a Materialize for
// them to reconcile. Returns their metrics address.
func startMonitoredControllers(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	var namespaces []string
	for _, prefix := range []string{"monitoring-", "monitoring-tenant-"} {
		ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		namespaces = append(namespaces, ns.Name)
	}
	release, tenant := namespaces[0], namespaces[1]
	args := containerArgs(t, find(render(t, release), "Deployment", "orchestratord-controllers"))
	health, metrics := freeAddr(t), freeAddr(t)
	// The node removal trigger on, as a user would turn it on, for its
	// series.
	startProcess(t, buildBinary(t, "cmd/controllers"), append(args, "--kubeconfig="+cp.KubeconfigPath,
		"--leader-election-identity=monitoring-test", "--health-address="+health, "--metrics-address="+metrics,
		"--node-removal-rollout-trigger")...)
	waitHTTP(t, "http://"+health+"/readyz")
	mz := &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "mz", Namespace: tenant},
		Spec:       v1alpha1.MaterializeSpec{EnvironmentdImageRef: "materialize/environmentd:v26.1.0", BackendSecretName: "backend"},
	}
	if _, err := versioned.NewForConfigOrDie(cp.Config).MaterializeV1alpha1().Materializes(tenant).Create(ctx, mz, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return metrics
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
