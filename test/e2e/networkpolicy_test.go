//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	netprobeImage = "localhost/orchestratord/netprobe:e2e"
	netprobeBin   = "/usr/local/bin/netprobe"
	netprobePort  = 8080
	// netprobe dial's exit code when the connection fails (test/netprobe).
	netprobeUnreachable = 3
)

// NetworkPolicies are enforced on the local cluster (its agent,
// kube-system/kube-network-policies, hack/cluster/network-policies): in a
// fresh namespace a client pod reaches a server pod's TCP port; a
// default-deny ingress policy cuts it off; a policy admitting the client to
// that port lets it through again. Without an enforcing agent the
// connection is never refused and the test fails.
func TestNetworkPoliciesAreEnforced(t *testing.T) {
	ctx := context.Background()
	buildNetprobeImage(t)
	created, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-netpol-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := created.Name
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})

	for _, role := range []string{"server", "client"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: ns, Labels: map[string]string{"role": role}},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptrTo[int64](1),
				Containers: []corev1.Container{{
					Name: "netprobe", Image: netprobeImage, ImagePullPolicy: corev1.PullNever,
					Args:  []string{"serve", fmt.Sprintf(":%d", netprobePort)},
					Ports: []corev1.ContainerPort{{Name: "probe", ContainerPort: netprobePort}},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(netprobePort)}},
						PeriodSeconds: 1,
					},
				}},
			},
		}
		if _, err := c.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var server *corev1.Pod
	poll(t, "the server and client pods to be ready", 2*time.Minute, func() (bool, error) {
		ready := 0
		for _, name := range []string{"server", "client"} {
			p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if podReady(p) && p.Status.PodIP != "" {
				ready++
			}
			if name == "server" {
				server = p
			}
		}
		return ready == 2, nil
	})
	target := fmt.Sprintf("%s:%d", server.Status.PodIP, netprobePort)
	kubectl := kubectlPath(t)
	// reachable runs one connection attempt from the client pod; an error
	// is a failure of the exec itself, not of the connection.
	reachable := func() (bool, string, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, kubectl, "-n", ns, "exec", "client", "--",
			netprobeBin, "dial", "-timeout", "2s", target).CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return true, string(out), nil
		case errors.As(err, &exit) && exit.ExitCode() == netprobeUnreachable:
			return false, string(out), nil
		default:
			return false, string(out), fmt.Errorf("kubectl exec: %v: %s", err, out)
		}
	}
	// expect retries until the connection's fate is want three times in a
	// row (one lucky attempt does not pass), within a minute.
	expect := func(want bool, why string) {
		t.Helper()
		var last string
		var lastErr error
		seen := 0
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			got, out, err := reachable()
			last, lastErr = strings.TrimSpace(out), err
			if err != nil || got != want {
				seen = 0
				return false, nil
			}
			seen++
			return seen == 3, nil
		})
		if err != nil {
			t.Fatalf("%s: the client's connection to %s did not become reachable=%v within a minute (last: %q, exec error: %v)", why, target, want, last, lastErr)
		}
		t.Logf("%s: reachable=%v (%s)", why, want, last)
	}

	expect(true, "no NetworkPolicy")

	denyAll := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "default-deny-ingress", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if _, err := c.Kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, denyAll, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(false, "default-deny ingress (is kube-system/kube-network-policies running?)")

	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(netprobePort)
	allow := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-client-to-server", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
	if _, err := c.Kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, allow, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(true, "default-deny plus a policy admitting the client")
}

// buildNetprobeImage builds test/netprobe into an image with this tree's
// image tool and loads it into the local cluster (as root, as make e2e
// runs).
func buildNetprobeImage(t *testing.T) {
	t.Helper()
	netprobeBuilt.Do(func() {
		netprobeBuildFailed = true // until it returns: a t.Fatal inside ends it early
		buildNetprobeImageOnce(t)
		netprobeBuildFailed = false
	})
	if netprobeBuildFailed {
		t.Fatal("the netprobe image could not be built (see the test that built it first)")
	}
}

var (
	netprobeBuilt       sync.Once
	netprobeBuildFailed bool
)

func buildNetprobeImageOnce(t *testing.T) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := func(env []string, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	bin, tar := filepath.Join(dir, "netprobe"), filepath.Join(dir, "netprobe.tar")
	run([]string{"CGO_ENABLED=0", "GOOS=linux"}, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./test/netprobe")
	run(nil, "go", "run", "./hack/cluster/image", "-ref", netprobeImage, "-file", netprobeBin+"="+bin,
		"-entrypoint", netprobeBin, "-user", "65532:65532", "-out", tar)
	run(nil, filepath.Join(root, "hack", "cluster", "cluster.sh"), "load", tar)
}

// With the operator's allow-orchestratord policy gone and its re-creation
// refused (here by an admission policy, as a policy engine or a GitOps
// tool could), a rollout does not go on without it: no new generation is
// created, none is promoted, and the Materialize's condition names the
// policy and the refusal. Once the refusal is lifted, the rollout completes
// without another change.
func TestRolloutWithoutTheOperatorsPolicySaysWhy(t *testing.T) {
	ctx := context.Background()
	ns := contractNamespace(t, nil)
	createMaterialize(t, ns, standinV26_35, "")
	first := waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
	id := first.Status.ResourceID
	policy := "mz" + id + "-allow-orchestratord"
	if _, err := c.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, policy, metav1.GetOptions{}); err != nil {
		t.Fatalf("the operator's policy: %v", err)
	}

	admission := c.Kube.AdmissionregistrationV1()
	name := "e2e-withhold-" + ns
	forbidden := metav1.StatusReasonForbidden
	fail := admissionregistrationv1.Fail
	if _, err := admission.ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"networking.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"networkpolicies"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `object.metadata.name != "` + policy + `"`,
				Message:    "the e2e test withholds this policy",
				Reason:     &forbidden,
			}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admission.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lift := func() {
		_ = admission.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = admission.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	}
	t.Cleanup(lift)
	poll(t, "the admission policy to refuse the operator's policy", time.Minute, func() (bool, error) {
		_, err := c.Kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: policy},
			Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		// Until the policy is loaded, the name is merely taken.
		return err != nil && strings.Contains(err.Error(), "withholds"), nil
	})
	if err := c.Kube.NetworkingV1().NetworkPolicies(ns).Delete(ctx, policy, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	requestForcedRollout(t, ns)
	failed := waitUpToDate(t, ns, metav1.ConditionFalse, "FailedDeploy", 2*time.Minute)
	cond := meta.FindStatusCondition(failed.Status.Conditions, "UpToDate")
	for _, want := range []string{policy, "the e2e test withholds this policy"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("the condition %q does not name %q", cond.Message, want)
		}
	}
	if failed.Status.ActiveGeneration != 1 {
		t.Errorf("active generation %d, want 1", failed.Status.ActiveGeneration)
	}
	if _, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, "mz"+id+"-environmentd-2", metav1.GetOptions{}); err == nil {
		t.Error("generation 2 was created without the operator's policy")
	}

	lift()
	done := waitUpToDate(t, ns, metav1.ConditionTrue, "Applied", 4*time.Minute)
	if done.Status.ActiveGeneration != 2 {
		t.Errorf("after the refusal was lifted: active generation %d, want 2", done.Status.ActiveGeneration)
	}
	if _, err := c.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, policy, metav1.GetOptions{}); err != nil {
		t.Errorf("the operator's policy after the rollout: %v", err)
	}
}
