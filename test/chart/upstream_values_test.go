package chart

// Upstream's chart values this chart has under the same names (issue #28):
// nameOverride and fullnameOverride, rbac.create, serviceAccount.*,
// imagePullSecrets, additionalMaterializeCRDColumns, the webhook CA's
// caDuration and caRenewBefore, telemetry.*, console.enabled and
// balancerd.enabled, storage.storageClass.*; and an upstream values file
// carried over as it is.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/materializeinc/orchestratord/pkg/controllers/app"
	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
	webhookapp "github.com/materializeinc/orchestratord/pkg/webhook/app"
)

// renderRelease is render with a release name of its own, and Helm's
// warnings (as for upstream's {} where this chart's default is a list) kept
// out of the manifest.
func renderRelease(t *testing.T, release, namespace string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	cmd := exec.Command(helm, append([]string{"template", release, chartDir, "--namespace", namespace}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template %s %v: %v\n%s", release, args, err, stderr.String())
	}
	return decode(t, stdout.String())
}

// renderValues is renderRelease of the release orchestratord in ops.
func renderValues(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	return renderRelease(t, "orchestratord", "ops", args...)
}

// sameJSON compares two values as their JSON.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// renderFails runs helm template and returns its output, failing the test
// when it renders.
func renderFails(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helmRun(append([]string{"template", "orchestratord", chartDir, "--namespace", "ops"}, args...)...)
	if err == nil {
		t.Fatalf("helm template %v rendered; it must fail", args)
	}
	return out
}

// valuesFile writes values to a file for -f.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func ofKind(objs []*unstructured.Unstructured, kinds ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if slices.Contains(kinds, o.GetKind()) {
			out = append(out, o)
		}
	}
	return out
}

var rbacKinds = []string{"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}

// component returns the Deployment of a component ("webhook", "controllers").
func component(t *testing.T, objs []*unstructured.Unstructured, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range ofKind(objs, "Deployment") {
		if o.GetLabels()["app.kubernetes.io/component"] == name {
			return o
		}
	}
	t.Fatalf("no %s Deployment", name)
	return nil
}

func podServiceAccount(dep *unstructured.Unstructured) string {
	sa, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "serviceAccountName")
	return sa
}

// subjects are the ServiceAccounts the rendered bindings bind, by binding.
func subjects(t *testing.T, objs []*unstructured.Unstructured) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, o := range ofKind(objs, "RoleBinding", "ClusterRoleBinding") {
		var b rbacv1.RoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
			t.Fatal(err)
		}
		for _, s := range b.Subjects {
			out[o.GetKind()+"/"+o.GetName()] = append(out[o.GetKind()+"/"+o.GetName()], s.Namespace+"/"+s.Name)
		}
	}
	return out
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	sort.Strings(out)
	return out
}

// nameOverride and fullnameOverride, with Helm's semantics: every name the
// chart derives has the prefix, including the ones it passes on (the
// webhook's --service-name, the CRD's conversion Service, the controllers'
// --environmentd-cluster-role and the ClusterRole they may bind), and the
// app.kubernetes.io/name label follows nameOverride, in the selectors and in
// the --orchestratord-pod-selector-labels the internal NetworkPolicies
// admit. What renders applies.
func TestNameOverrides(t *testing.T) {
	for i, tc := range []struct {
		release, set string
		prefix       string // of every name
		name         string // app.kubernetes.io/name
	}{
		{"orchestratord", "fullnameOverride=acme", "acme", "orchestratord"},
		{"prod", "nameOverride=mzop", "prod-mzop", "mzop"},
		// The release name already holds the name: it is the prefix.
		{"my-mzop-release", "nameOverride=mzop", "my-mzop-release", "mzop"},
		{"orchestratord", "nameOverride=mzop,fullnameOverride=acme-ops", "acme-ops", "mzop"},
		{"orchestratord", "fullnameOverride=acme,tls.mode=cert-manager", "acme", "orchestratord"},
		{"orchestratord", "fullnameOverride=acme,serviceMonitor.enabled=true,networkPolicy.enabled=true", "acme", "orchestratord"},
		{"orchestratord", "fullnameOverride=" + strings.Repeat("a", 63), strings.Repeat("a", 50), "orchestratord"},
	} {
		args := []string{"--set", tc.set}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			ns := fmt.Sprintf("names-%d", i)
			objs := renderRelease(t, tc.release, ns, args...)
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					continue
				}
				if !strings.HasPrefix(o.GetName(), tc.prefix+"-") {
					t.Errorf("%s %s does not start with %s-", o.GetKind(), o.GetName(), tc.prefix)
				}
				if n, ok := o.GetLabels()["app.kubernetes.io/name"]; ok && n != tc.name {
					t.Errorf("%s %s: app.kubernetes.io/name=%s, want %s", o.GetKind(), o.GetName(), n, tc.name)
				}
			}
			webhook, controllers := component(t, objs, "webhook"), component(t, objs, "controllers")
			for _, dep := range []*unstructured.Unstructured{webhook, controllers} {
				sel, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "selector", "matchLabels")
				if sel["app.kubernetes.io/name"] != tc.name {
					t.Errorf("%s selects %v", dep.GetName(), sel)
				}
			}

			// The webhook Service, as the webhook and the CRD name it.
			svc := tc.prefix + "-webhook"
			if find(objs, "Service", svc) == nil {
				t.Fatalf("no Service %s: %v", svc, names(objs))
			}
			if got := oneFlag(t, containerArgs(t, webhook), "service-name"); got != svc {
				t.Errorf("webhook --service-name=%s, want %s", got, svc)
			}
			crd := find(objs, "CustomResourceDefinition", "materializes.materialize.cloud")
			ref, _, _ := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service")
			if ref["name"] != svc || ref["namespace"] != ns {
				t.Errorf("the CRD's conversion webhook calls %v, want Service %s/%s", ref, ns, svc)
			}
			if cert := find(objs, "Certificate", svc); cert != nil {
				dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
				if !slices.Contains(dns, svc+"."+ns+".svc") {
					t.Errorf("the serving Certificate's names %v lack %s.%s.svc", dns, svc, ns)
				}
				if got := crd.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != ns+"/"+svc {
					t.Errorf("CA injected from %s, want %s/%s", got, ns, svc)
				}
			} else {
				// self-signed: the webhook keeps its CA in <service-name>-ca.
				var role rbacv1.Role
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "Role", svc).Object, &role); err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.ResourceNames, svc+"-ca") }) {
					t.Errorf("the webhook may not update its CA Secret %s-ca: %+v", svc, role.Rules)
				}
			}

			// environmentd's ClusterRole, as the controllers are told and may bind.
			cargs := containerArgs(t, controllers)
			role := oneFlag(t, cargs, "environmentd-cluster-role")
			if role != tc.prefix+"-controllers-environmentd" || find(objs, "ClusterRole", role) == nil {
				t.Errorf("--environmentd-cluster-role=%s, rendered: %v", role, names(ofKind(objs, "ClusterRole")))
			}
			var own rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(objs, "ClusterRole", tc.prefix+"-controllers").Object, &own); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(own.Rules, func(r rbacv1.PolicyRule) bool {
				return slices.Contains(r.Verbs, "bind") && reflect.DeepEqual(r.ResourceNames, []string{role})
			}) {
				t.Errorf("the controllers may not bind %s: %+v", role, own.Rules)
			}
			sel, _, _ := unstructured.NestedStringMap(controllers.Object, "spec", "selector", "matchLabels")
			var want []string
			for k, v := range sel {
				want = append(want, k+"="+v)
			}
			sort.Strings(want)
			if got := flagValues(cargs, "orchestratord-pod-selector-labels"); !reflect.DeepEqual(got, want) {
				t.Errorf("--orchestratord-pod-selector-labels %q, want the controllers' selector %q", got, want)
			}

			// Pods run as, and bindings bind, the rendered ServiceAccounts.
			for _, dep := range []*unstructured.Unstructured{webhook, controllers} {
				if sa := podServiceAccount(dep); find(objs, "ServiceAccount", sa) == nil {
					t.Errorf("%s runs as %s, which is not rendered", dep.GetName(), sa)
				}
			}
			for binding, subs := range subjects(t, objs) {
				for _, s := range subs {
					if _, name, _ := strings.Cut(s, "/"); find(objs, "ServiceAccount", name) == nil {
						t.Errorf("%s binds %s, which is not rendered", binding, s)
					}
				}
			}

			if strings.Contains(tc.set, "cert-manager") {
				return // cert-manager's kinds are not installed here
			}
			restrictedNamespace(t, ns)
			withoutCRDs := renderRelease(t, tc.release, ns, append(args, "--set", "crds.enabled=false")...)
			// prometheus-operator's kinds are not installed either.
			withoutCRDs = slices.DeleteFunc(withoutCRDs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "ServiceMonitor" })
			applyAll(t, withoutCRDs)
			dryRunPods(t, ns, withoutCRDs)
		})
	}
}

// dryRunPods creates, in a server-side dry run, a pod of each Deployment:
// the API server admits it (its ServiceAccount exists, it meets the
// namespace's Pod Security Standard).
func dryRunPods(t *testing.T, ns string, objs []*unstructured.Unstructured) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	for _, obj := range ofKind(objs, "Deployment") {
		tmpl, _, _ := unstructured.NestedMap(obj.Object, "spec", "template")
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, pod); err != nil {
			t.Fatal(err)
		}
		pod.Name, pod.Namespace = obj.GetName()+"-dry-run", ns
		if _, err := kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("a pod of %s is refused: %v", obj.GetName(), err)
		}
	}
}

// serviceAccount.create and .name as upstream spells them, for both
// components at once, and per component under webhook.serviceAccount and
// controllers.serviceAccount.
func TestServiceAccountValues(t *testing.T) {
	for _, tc := range []struct {
		set                  string
		rendered             []string // ServiceAccounts the chart creates
		webhook, controllers string   // what each runs as
	}{
		{"", []string{"orchestratord-controllers", "orchestratord-webhook"}, "orchestratord-webhook", "orchestratord-controllers"},
		// Upstream's default: one ServiceAccount, orchestratord, rendered once.
		{"serviceAccount.name=orchestratord", []string{"orchestratord"}, "orchestratord", "orchestratord"},
		{"webhook.serviceAccount.name=wh,controllers.serviceAccount.name=ctl", []string{"ctl", "wh"}, "wh", "ctl"},
		// A component's own name wins over the shared one.
		{"serviceAccount.name=shared,webhook.serviceAccount.name=wh", []string{"shared", "wh"}, "wh", "shared"},
		{"serviceAccount.create=false,serviceAccount.name=pre", nil, "pre", "pre"},
		{"serviceAccount.create=false,serviceAccount.name=default", nil, "default", "default"},
		{"webhook.serviceAccount.create=false,webhook.serviceAccount.name=wh", []string{"orchestratord-controllers"}, "wh", "orchestratord-controllers"},
		// A component's create wins over the top-level one.
		{"serviceAccount.create=false,serviceAccount.name=pre,controllers.serviceAccount.create=true,controllers.serviceAccount.name=ctl",
			[]string{"ctl"}, "pre", "ctl"},
		{"rbac.create=false", []string{"orchestratord-controllers", "orchestratord-webhook"}, "orchestratord-webhook", "orchestratord-controllers"},
	} {
		var args []string
		if tc.set != "" {
			args = []string{"--set", tc.set}
		}
		objs := render(t, "ops", args...)
		var got []string
		for _, sa := range ofKind(objs, "ServiceAccount") {
			got = append(got, sa.GetName())
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, tc.rendered) {
			t.Errorf("--set %q: ServiceAccounts %q, want %q", tc.set, got, tc.rendered)
		}
		webhook, controllers := component(t, objs, "webhook"), component(t, objs, "controllers")
		if podServiceAccount(webhook) != tc.webhook || podServiceAccount(controllers) != tc.controllers {
			t.Errorf("--set %q: the webhook runs as %s, the controllers as %s; want %s, %s", tc.set,
				podServiceAccount(webhook), podServiceAccount(controllers), tc.webhook, tc.controllers)
		}
		// Each component's roles are bound to its own ServiceAccount.
		for binding, subs := range subjects(t, objs) {
			want := "ops/" + tc.controllers
			if strings.Contains(binding, "-webhook") {
				want = "ops/" + tc.webhook
			}
			if !reflect.DeepEqual(subs, []string{want}) {
				t.Errorf("--set %q: %s binds %q, want %s", tc.set, binding, subs, want)
			}
		}
	}

	// Annotations: the top-level ones under each component's own; a shared
	// ServiceAccount has both components'.
	objs := render(t, "ops", "--set", "serviceAccount.annotations.a=top,serviceAccount.annotations.b=top,controllers.serviceAccount.annotations.a=own")
	if got := find(objs, "ServiceAccount", "orchestratord-controllers").GetAnnotations(); !reflect.DeepEqual(got, map[string]string{"a": "own", "b": "top"}) {
		t.Errorf("the controllers' ServiceAccount annotations %v", got)
	}
	if got := find(objs, "ServiceAccount", "orchestratord-webhook").GetAnnotations(); !reflect.DeepEqual(got, map[string]string{"a": "top", "b": "top"}) {
		t.Errorf("the webhook's ServiceAccount annotations %v", got)
	}
	objs = render(t, "ops", "--set-string", "serviceAccount.name=orchestratord,webhook.serviceAccount.annotations.w=1,controllers.serviceAccount.annotations.c=2")
	if got := find(objs, "ServiceAccount", "orchestratord").GetAnnotations(); !reflect.DeepEqual(got, map[string]string{"w": "1", "c": "2"}) {
		t.Errorf("the shared ServiceAccount's annotations %v", got)
	}

	// Not created and not named: nothing to run as. Upstream would run as
	// the namespace's default ServiceAccount and bind its roles to it; here
	// that takes serviceAccount.name=default.
	for set, field := range map[string]string{
		"serviceAccount.create=false":                                         "serviceAccount.name",
		"controllers.serviceAccount.create=false":                             "controllers.serviceAccount.name",
		"serviceAccount.create=false,controllers.serviceAccount.name=present": "webhook.serviceAccount.name",
	} {
		if out := renderFails(t, "--set", set); !strings.Contains(out, field) {
			t.Errorf("--set %s: the error does not name %s:\n%s", set, field, out)
		}
	}
	for _, bad := range []string{"serviceAccount.name=Not_A_Name", "webhook.serviceAccount.create=yes", "serviceAccount.nmae=x"} {
		renderFails(t, "--set", bad)
	}
}

// rbac.create=false renders no Role, ClusterRole or binding; the chart's
// own RBAC, rendered as docs/migrating-from-orchestratord.md says to
// pre-create it (--show-only the two rbac templates), is exactly what is
// missing, and with it and a pre-created ServiceAccount the release applies
// and its pods are admitted.
func TestRBACCreateFalse(t *testing.T) {
	const ns = "prebuilt-rbac"
	common := []string{"--set", "serviceAccount.create=false,serviceAccount.name=operator", "--set", "crds.enabled=false"}
	// The documented recipe, per TLS mode: with cert-manager the webhook
	// has no RBAC, and its template, which then renders nothing, is left
	// out (helm refuses to show an empty one).
	var objs, prebuilt []*unstructured.Unstructured
	for _, mode := range []struct {
		tls       string
		templates []string
	}{
		{"cert-manager", []string{"templates/controllers/rbac.yaml"}},
		{"self-signed", []string{"templates/webhook/rbac.yaml", "templates/controllers/rbac.yaml"}},
	} {
		tls := "tls.mode=" + mode.tls
		objs = render(t, ns, append(common, "--set", "rbac.create=false", "--set", tls)...)
		if got := ofKind(objs, rbacKinds...); len(got) != 0 {
			t.Errorf("%s: rbac.create=false renders %v", tls, names(got))
		}
		if got := ofKind(objs, "ServiceAccount"); len(got) != 0 {
			t.Errorf("%s: serviceAccount.create=false renders %v", tls, names(got))
		}
		if got := oneFlag(t, containerArgs(t, component(t, objs, "controllers")), "environmentd-cluster-role"); got != "orchestratord-controllers-environmentd" {
			t.Errorf("%s: --environmentd-cluster-role=%s", tls, got)
		}
		args := []string{"template", "orchestratord", chartDir, "--namespace", ns, "--set", "serviceAccount.name=operator", "--set", tls}
		for _, template := range mode.templates {
			args = append(args, "--show-only", template)
		}
		out, err := helmRun(args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tls, err, out)
		}
		prebuilt = decode(t, out)
		all := render(t, ns, append(common, "--set", "rbac.create=true", "--set", tls)...)
		if got, want := names(append(slices.Clone(objs), prebuilt...)), names(all); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: rbac.create=false plus the documented RBAC:\n  %q\nwant the release with rbac.create=true:\n  %q", tls, got, want)
		}
		for _, o := range prebuilt {
			if w := find(all, o.GetKind(), o.GetName()); w == nil || !reflect.DeepEqual(w.Object, o.Object) {
				t.Errorf("%s: the documented %s %s differs from the chart's", tls, o.GetKind(), o.GetName())
			}
		}
	}

	// The self-signed release, on the API server.
	restrictedNamespace(t, ns)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(context.Background(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "operator"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applyAll(t, prebuilt)
	applyAll(t, objs)
	dryRunPods(t, ns, objs)
}

// imagePullSecrets go to this chart's pods (with global.imagePullSecrets)
// and, as --image-pull-secrets, to every environment pod.
func TestImagePullSecretsValues(t *testing.T) {
	objs := render(t, "ops", "-f", valuesFile(t, "imagePullSecrets: [{name: registry}, {name: mirror}]\nglobal: {imagePullSecrets: [{name: ops}, {name: registry}]}\n"))
	for _, dep := range ofKind(objs, "Deployment") {
		secrets, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "imagePullSecrets")
		if want := []any{map[string]any{"name": "ops"}, map[string]any{"name": "registry"}, map[string]any{"name": "mirror"}}; !reflect.DeepEqual(secrets, want) {
			t.Errorf("%s pulls with %v, want %v", dep.GetName(), secrets, want)
		}
	}
	args := containerArgs(t, component(t, objs, "controllers"))
	if got := flagValues(args, "image-pull-secrets"); !reflect.DeepEqual(got, []string{"registry", "mirror"}) {
		t.Errorf("--image-pull-secrets %q, want the environments' registry, mirror", got)
	}
	if got := flagValues(controllersArgs(t), "image-pull-secrets"); got != nil {
		t.Errorf("--image-pull-secrets by default: %q", got)
	}
	renderFails(t, "-f", valuesFile(t, "imagePullSecrets: [{name: \"\"}]\n"))
	renderFails(t, "-f", valuesFile(t, "imagePullSecrets: [registry]\n"))
}

// additionalMaterializeCRDColumns, as upstream's: printer columns before the
// Materialize CRD's own, here in both versions. The API server serves them
// as table columns.
func TestAdditionalMaterializeCRDColumns(t *testing.T) {
	const values = `additionalMaterializeCRDColumns:
  - description: "Metadata from the context annotator"
    jsonPath: ".metadata.annotations['materialize\\.cloud/analytics-context']"
    name: "OrgContext"
    priority: 2
    type: "string"
  - name: Environment
    type: string
    jsonPath: .spec.environmentId
`
	plain := find(renderValues(t), "CustomResourceDefinition", "materializes.materialize.cloud")
	crd := find(renderValues(t, "-f", valuesFile(t, values)), "CustomResourceDefinition", "materializes.materialize.cloud")
	ownVersions, _, _ := unstructured.NestedSlice(plain.Object, "spec", "versions")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 2 {
		t.Fatalf("%d versions", len(versions))
	}
	for i, v := range versions {
		cols := v.(map[string]any)["additionalPrinterColumns"].([]any)
		own := ownVersions[i].(map[string]any)["additionalPrinterColumns"].([]any)
		want := append([]any{
			map[string]any{"description": "Metadata from the context annotator", "jsonPath": ".metadata.annotations['materialize\\.cloud/analytics-context']",
				"name": "OrgContext", "priority": int64(2), "type": "string"},
			map[string]any{"name": "Environment", "type": "string", "jsonPath": ".spec.environmentId"},
		}, own...)
		if !sameJSON(cols, want) {
			t.Errorf("version %v columns:\n got %v\nwant %v", v.(map[string]any)["name"], cols, want)
		}
	}
	// Upstream's default, {}, adds none.
	if got := find(renderValues(t, "-f", valuesFile(t, "additionalMaterializeCRDColumns: {}\n")), "CustomResourceDefinition", "materializes.materialize.cloud"); !reflect.DeepEqual(got.Object, plain.Object) {
		t.Errorf("additionalMaterializeCRDColumns: {} changed the CRD")
	}
	for _, bad := range []string{
		"additionalMaterializeCRDColumns: [{name: X, type: string}]",
		"additionalMaterializeCRDColumns: [{name: X, type: text, jsonPath: .spec}]",
		"additionalMaterializeCRDColumns: [{name: X, type: string, jsonPath: .spec, width: 3}]",
		"additionalMaterializeCRDColumns: {a: b}",
	} {
		if out := renderFails(t, "-f", valuesFile(t, bad+"\n")); !strings.Contains(out, "additionalMaterializeCRDColumns") {
			t.Errorf("%s: the error does not name additionalMaterializeCRDColumns:\n%s", bad, out)
		}
	}

	// The same CRD under a group of its own (the shared one is the other
	// tests'), without conversion: the API server accepts the columns and
	// lists Materializes with them, first.
	const group = "columns.example.com"
	crd.SetName("materializes." + group)
	crd.SetAnnotations(nil)
	if err := unstructured.SetNestedField(crd.Object, group, "spec", "group"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedMap(crd.Object, map[string]any{"strategy": "None"}, "spec", "conversion"); err != nil {
		t.Fatal(err)
	}
	applyAll(t, []*unstructured.Unstructured{crd})
	client, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"v1", "v1alpha1"} {
		var table metav1.Table
		err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.Config.Host+"/apis/"+group+"/"+version+"/materializes", nil)
			req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
			resp, err := client.Do(req)
			if err != nil {
				return false, nil
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				return false, nil // not established yet
			}
			return true, json.Unmarshal(body, &table)
		})
		if err != nil {
			t.Fatalf("%s table: %v", version, err)
		}
		var cols []string
		for _, c := range table.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		if len(cols) < 4 || !reflect.DeepEqual(cols[:3], []string{"Name", "OrgContext", "Environment"}) || table.ColumnDefinitions[1].Priority != 2 {
			t.Errorf("%s table columns %q (%+v)", version, cols, table.ColumnDefinitions)
		}
	}
}

// The webhook CA's duration and renew-before, as upstream names them
// (operator.certificate.caDuration, .caRenewBefore), under tls: the
// webhook's --ca-validity and --ca-renew-before in self-signed mode, the
// chart's CA Certificate in cert-manager mode.
func TestWebhookCAValues(t *testing.T) {
	const set = "tls.caDuration=87600h,tls.caRenewBefore=8760h"
	webhookArgs := func(objs []*unstructured.Unstructured) []string {
		return containerArgs(t, component(t, objs, "webhook"))
	}

	args := webhookArgs(render(t, "ops", "--set", set))
	if oneFlag(t, args, "ca-validity") != "87600h" || oneFlag(t, args, "ca-renew-before") != "8760h" {
		t.Errorf("self-signed: %q", args)
	}
	if err := webhookapp.NewCommand().ParseFlags(args); err != nil {
		t.Errorf("the webhook refuses the rendered flags: %v", err)
	}
	if args := webhookArgs(render(t, "ops")); hasFlag(args, "ca-validity") || hasFlag(args, "ca-renew-before") {
		t.Errorf("CA flags by default (the webhook's own defaults apply): %q", args)
	}

	ca := func(objs []*unstructured.Unstructured) map[string]any {
		c := find(objs, "Certificate", "orchestratord-webhook-ca")
		if c == nil {
			t.Fatalf("no CA Certificate: %v", names(objs))
		}
		spec, _, _ := unstructured.NestedMap(c.Object, "spec")
		return spec
	}
	spec := ca(render(t, "ops", "--set", set+",tls.mode=cert-manager"))
	if spec["duration"] != "87600h" || spec["renewBefore"] != "8760h" || spec["isCA"] != true {
		t.Errorf("cert-manager CA: %v", spec)
	}
	objs := render(t, "ops", "--set", "tls.mode=cert-manager")
	if spec := ca(objs); spec["duration"] != "43800h" || spec["renewBefore"] != nil {
		t.Errorf("cert-manager CA by default: %v", spec)
	}
	if args := webhookArgs(render(t, "ops", "--set", set+",tls.mode=cert-manager")); hasFlag(args, "ca-validity") {
		t.Errorf("cert-manager mode passes CA flags: %q", args)
	}
	for _, bad := range []string{"tls.caDuration=ten years", "tls.caRenewBefore=365d"} {
		if out := renderFails(t, "--set", bad); !strings.Contains(out, "tls") {
			t.Errorf("--set %s: %s", bad, out)
		}
	}
}

// telemetry.*, as upstream passes it: environmentd's --segment-api-key and
// --segment-client-side, through the controllers' flags of those names.
func TestTelemetryValues(t *testing.T) {
	const upstreamKey = "hMWi3sZ17KFMjn2sPWo9UJGpOQqiba4A"
	for set, want := range map[string][]string{
		"":                        nil,
		"telemetry.enabled=true":  {"--segment-api-key=" + upstreamKey, "--segment-client-side"},
		"telemetry.enabled=false": nil,
		"telemetry.enabled=true,telemetry.segmentClientSide=false":     {"--segment-api-key=" + upstreamKey},
		"telemetry.enabled=true,telemetry.segmentApiKey=k3y":           {"--segment-api-key=k3y", "--segment-client-side"},
		"telemetry.segmentApiKey=k3y,telemetry.segmentClientSide=true": nil,
	} {
		var args []string
		if set != "" {
			args = []string{"--set", set}
		}
		var got []string
		for _, a := range controllersArgs(t, args...) {
			if strings.HasPrefix(a, "--segment-") {
				got = append(got, a)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("--set %q: %q, want %q", set, got, want)
		}
	}
	if out := renderFails(t, "--set", "telemetry.enabled=true,telemetry.segmentApiKey="); !strings.Contains(out, "segmentApiKey") {
		t.Errorf("telemetry without a key: %s", out)
	}
}

// console.enabled and balancerd.enabled, upstream's names for
// --create-console and --create-balancers; controllers.createConsoles and
// .createBalancers, this chart's earlier names, still turn them off.
func TestComponentEnabledValues(t *testing.T) {
	for set, want := range map[string][2]string{
		"":                                 {"true", "true"},
		"console.enabled=false":            {"true", "false"},
		"balancerd.enabled=false":          {"false", "true"},
		"controllers.createConsoles=false": {"true", "false"},
		"balancerd.enabled=false,console.enabled=false,controllers.createBalancers=true": {"false", "false"},
	} {
		var args []string
		if set != "" {
			args = []string{"--set", set}
		}
		a := controllersArgs(t, args...)
		if got := [2]string{oneFlag(t, a, "create-balancers"), oneFlag(t, a, "create-consoles")}; got != want {
			t.Errorf("--set %q: --create-balancers, --create-consoles = %v, want %v", set, got, want)
		}
	}
}

// storage.storageClass, as upstream's: a StorageClass only when create is
// set, with upstream's keys and defaults; name is --ephemeral-volume-class
// either way. The API server accepts it.
func TestStorageClassValues(t *testing.T) {
	if got := ofKind(render(t, "ops", "--set", "storage.storageClass.name=existing"), "StorageClass"); len(got) != 0 {
		t.Errorf("a StorageClass without create: %v", names(got))
	}
	const name = "chart-test-lvm"
	objs := render(t, "ops", "--set", "storage.storageClass.create=true,storage.storageClass.name="+name+",storage.storageClass.provisioner=local.csi.openebs.io")
	sc := find(objs, "StorageClass", name)
	if sc == nil {
		t.Fatalf("no StorageClass: %v", names(objs))
	}
	want := map[string]any{"provisioner": "local.csi.openebs.io", "parameters": map[string]any{"storage": "lvm", "fsType": "ext4", "volgroup": "instance-store-vg"},
		"allowVolumeExpansion": false, "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"}
	for k, v := range want {
		if !reflect.DeepEqual(sc.Object[k], v) {
			t.Errorf("StorageClass %s: %v, want %v", k, sc.Object[k], v)
		}
	}
	if got := oneFlag(t, containerArgs(t, component(t, objs, "controllers")), "ephemeral-volume-class"); got != name {
		t.Errorf("--ephemeral-volume-class=%s", got)
	}
	applyAll(t, []*unstructured.Unstructured{sc})

	// parameters merge with upstream's defaults, as upstream's do (Helm
	// merges maps); null drops one.
	objs = render(t, "ops", "-f", valuesFile(t, `storage:
  storageClass:
    create: true
    name: nvme
    provisioner: ebs.csi.aws.com
    parameters: {type: gp3, storage: null, volgroup: null}
    allowVolumeExpansion: true
    reclaimPolicy: Retain
    volumeBindingMode: Immediate
`))
	sc = find(objs, "StorageClass", "nvme")
	if sc == nil || !reflect.DeepEqual(sc.Object["parameters"], map[string]any{"type": "gp3", "fsType": "ext4"}) || sc.Object["allowVolumeExpansion"] != true ||
		sc.Object["reclaimPolicy"] != "Retain" || sc.Object["volumeBindingMode"] != "Immediate" {
		t.Errorf("StorageClass: %v", sc)
	}
	for set, field := range map[string]string{
		"storage.storageClass.create=true,storage.storageClass.name=x":                                                                               "provisioner",
		"storage.storageClass.create=true,storage.storageClass.provisioner=p":                                                                        "name",
		"storage.storageClass.create=true,storage.storageClass.name=x,storage.storageClass.provisioner=p,storage.storageClass.reclaimPolicy=Recycle": "reclaimPolicy",
	} {
		if out := renderFails(t, "--set", set); !strings.Contains(out, field) {
			t.Errorf("--set %s: the error does not name %s:\n%s", set, field, out)
		}
	}
}

// An upstream values file (testdata/upstream-values.yaml: upstream's
// defaults of every key this chart has under the same name) is accepted as
// it is and means what it meant upstream: the same environment flags as
// this chart's defaults but for upstream's telemetry, which it turns on,
// and one ServiceAccount, orchestratord, for the operator.
func TestUpstreamValuesCarryOver(t *testing.T) {
	objs := renderValues(t, "-f", "testdata/upstream-values.yaml")
	got := containerArgs(t, component(t, objs, "controllers"))
	want := append(controllersArgs(t), "--segment-api-key=hMWi3sZ17KFMjn2sPWo9UJGpOQqiba4A", "--segment-client-side")
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("controllers' flags from upstream's values:\n got %q\nwant %q", got, want)
	}
	if err := app.NewCommand().ParseFlags(got); err != nil {
		t.Errorf("the controllers refuse the flags: %v", err)
	}
	var c materialize.Config
	fs := pflag.NewFlagSet("environment", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true // the controllers' other flags
	c.AddFlags(fs)
	if err := fs.Parse(got); err != nil {
		t.Fatal(err)
	}
	if err := c.Complete(); err != nil {
		t.Errorf("the controllers refuse the environment flags: %v", err)
	}
	if sas := ofKind(objs, "ServiceAccount"); len(sas) != 1 || sas[0].GetName() != "orchestratord" {
		t.Errorf("ServiceAccounts %v, want upstream's orchestratord", names(sas))
	}
	for _, dep := range ofKind(objs, "Deployment") {
		if sa := podServiceAccount(dep); sa != "orchestratord" {
			t.Errorf("%s runs as %s", dep.GetName(), sa)
		}
	}
	if got := ofKind(objs, "StorageClass"); len(got) != 0 {
		t.Errorf("StorageClass rendered with upstream's create: false: %v", names(got))
	}
}

// Upstream's port numbers (metrics 3100, the webhook 8001 on its pod and its
// Service) can be kept, so that scrape configs and firewall rules naming
// them carry over: every place that names a port follows the values.
func TestUpstreamPortNumbers(t *testing.T) {
	objs := render(t, "ops", "--set", "controllers.ports.metrics=3100,webhook.ports.metrics=3100,webhook.ports.https=8001,webhook.service.port=8001")
	if args := controllersArgs(t, "--set", "controllers.ports.metrics=3100"); !slices.Contains(args, "--metrics-address=:3100") {
		t.Errorf("controllers args %v lack --metrics-address=:3100", args)
	}
	dep := find(objs, "Deployment", "orchestratord-webhook")
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	var args []string
	for _, a := range c["args"].([]any) {
		args = append(args, a.(string))
	}
	for _, want := range []string{"--listen-address=:8001", "--metrics-address=:3100"} {
		if !slices.Contains(args, want) {
			t.Errorf("webhook args %v lack %s", args, want)
		}
	}
	ports := map[string]int64{}
	for _, p := range c["ports"].([]any) {
		m := p.(map[string]any)
		ports[m["name"].(string)] = number(m["containerPort"])
	}
	if ports["https"] != 8001 || ports["metrics"] != 3100 {
		t.Errorf("webhook container ports %v, want https 8001 and metrics 3100", ports)
	}
	svcPorts, _, _ := unstructured.NestedSlice(find(objs, "Service", "orchestratord-webhook").Object, "spec", "ports")
	if p := svcPorts[0].(map[string]any); p["name"] != "https" || number(p["port"]) != 8001 {
		t.Errorf("webhook Service's first port %v, want https 8001", p)
	}
	crd := find(objs, "CustomResourceDefinition", "materializes.materialize.cloud")
	port, _, _ := unstructured.NestedFieldNoCopy(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service", "port")
	if number(port) != 8001 {
		t.Errorf("the CRD's conversion webhook calls port %v, want 8001", port)
	}
}

// number reads a rendered number, decoded as int64 or float64.
func number(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return -1
}
