package chart

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
)

// applyAll server-side applies every object, CRDs first, as a user with
// kubectl apply --server-side would.
func applyAll(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	sort.SliceStable(objs, func(i, j int) bool {
		return objs[i].GetKind() == "CustomResourceDefinition" && objs[j].GetKind() != "CustomResourceDefinition"
	})
	var mapper meta.RESTMapper
	refresh := func() {
		dc := discovery.NewDiscoveryClientForConfigOrDie(cp.Config)
		mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	}
	refresh()
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		var mapping *meta.RESTMapping
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			var err error
			if mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				refresh() // a CRD applied just now
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("%s: no REST mapping: %v", gvk, err)
		}
		var client dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			client = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := client.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "chart-test", Force: true}); err != nil {
			t.Fatalf("server-side apply of %s %s/%s: %v", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

func restrictedNamespace(t *testing.T, name string) {
	t.Helper()
	_, err := kubernetes.NewForConfigOrDie(cp.Config).CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// Every rendered object is accepted by server-side apply in a namespace that
// enforces the restricted Pod Security Standard, and so are the pods the
// Deployments would create (checked by a server-side dry run: there is no
// kube-controller-manager to create them).
func TestRenderedObjectsApplyInRestrictedNamespace(t *testing.T) {
	// The ServiceMonitor and PrometheusRule need prometheus-operator's CRDs.
	for i, args := range [][]string{nil, {"-f", "testdata/all-options.yaml", "--set", "serviceMonitor.enabled=false,monitoring.prometheusRule.enabled=false"}} {
		ns := fmt.Sprintf("restricted-%d", i)
		restrictedNamespace(t, ns)
		if i == 1 {
			restrictedNamespace(t, "leases")
			restrictedNamespace(t, "grafana") // the dashboard's ConfigMap
		}
		objs := render(t, ns, append(args, "--set", "crds.enabled="+fmt.Sprint(i == 0))...)
		applyAll(t, objs)
		kube := kubernetes.NewForConfigOrDie(cp.Config)
		for _, obj := range objs {
			if obj.GetKind() != "Deployment" {
				continue
			}
			tmpl, _, _ := unstructured.NestedMap(obj.Object, "spec", "template")
			pod := &corev1.Pod{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, pod); err != nil {
				t.Fatal(err)
			}
			pod.Name = obj.GetName() + "-dry-run"
			pod.Namespace = ns
			_, err := kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				t.Errorf("a pod of %s is refused in a restricted namespace: %v", obj.GetName(), err)
			}
		}
	}
}

// serviceAccountConfig returns a kubeconfig file authenticating with a token
// of the chart's ServiceAccount, not as admin.
func serviceAccountKubeconfig(t *testing.T, namespace, name string) string {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return writeKubeconfig(t, tr.Status.Token)
}

func ptr[T any](v T) *T { return &v }
