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

	"github.com/materializeinc/orchestratord/test/cluster"
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

	server := netprobePod(t, ns, "server", map[string]string{"role": "server"})
	netprobePod(t, ns, "client", map[string]string{"role": "client"})
	target := fmt.Sprintf("%s:%d", server.Status.PodIP, netprobePort)
	expect := func(want bool, why string) { t.Helper(); expectReachable(t, ns, "client", target, want, why) }

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

// reachableFrom runs one connection attempt from a netprobe pod; an error
// is a failure of the exec itself, not of the connection.
// A target that is not a netprobe server is named "connect:ADDR": the TCP
// handshake is enough.
func reachableFrom(t *testing.T, ns, pod, target string) (bool, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"-n", ns, "exec", pod, "--", netprobeBin, "dial", "-timeout", "2s"}
	if addr, ok := strings.CutPrefix(target, "connect:"); ok {
		args = append(args, "-connect", addr)
	} else {
		args = append(args, target)
	}
	out, err := exec.CommandContext(ctx, kubectlPath(t), args...).CombinedOutput()
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

// expectReachable retries until a connection's fate from pod to target is
// want three times in a row (one lucky attempt does not pass), within a
// minute.
func expectReachable(t *testing.T, ns, pod, target string, want bool, why string) {
	t.Helper()
	var last string
	var lastErr error
	seen := 0
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got, out, err := reachableFrom(t, ns, pod, target)
		last, lastErr = strings.TrimSpace(out), err
		if err != nil || got != want {
			seen = 0
			return false, nil
		}
		seen++
		return seen == 3, nil
	})
	if err != nil {
		t.Fatalf("%s: %s's connection to %s did not become reachable=%v within a minute (last: %q, exec error: %v)", why, pod, target, want, last, lastErr)
	}
	t.Logf("%s: reachable=%v (%s)", why, want, last)
}

// netprobePod runs a netprobe server pod and waits until it is ready.
func netprobePod(t *testing.T, ns, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptrTo[int64](1),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptrTo(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "netprobe", Image: netprobeImage, ImagePullPolicy: corev1.PullNever,
				Args:  []string{"serve", fmt.Sprintf(":%d", netprobePort)},
				Ports: []corev1.ContainerPort{{Name: "probe", ContainerPort: netprobePort}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptrTo(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
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
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo[int64](0)})
	})
	var got *corev1.Pod
	poll(t, "pod "+name+" to be ready", 2*time.Minute, func() (bool, error) {
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = p
		return podReady(p) && p.Status.PodIP != "", nil
	})
	return got
}

// The controllers' egress policy (networkPolicy.egress, on here with
// networkPolicies.internal as upstream renders its egress-to-environmentd)
// is enforced: a pod with the controllers' labels reaches environmentd's
// internal HTTP port and the API server, and nothing else: not balancerd
// nor the console, which the same pod without those labels reaches (their
// ingress policies admit any address).
func TestControllersEgressIsLimitedByTheirPolicy(t *testing.T) {
	ctx := context.Background()
	buildNetprobeImage(t)
	if _, err := c.Kube.NetworkingV1().NetworkPolicies(operatorNS).Get(ctx, "orchestratord-controllers-egress", metav1.GetOptions{}); err != nil {
		t.Fatalf("the controllers' egress policy: %v", err)
	}
	labels := map[string]string{"app.kubernetes.io/name": "orchestratord", "app.kubernetes.io/instance": "orchestratord",
		"app.kubernetes.io/component": "controllers", "e2e": "egress-probe"}
	netprobePod(t, operatorNS, "e2e-egress-probe", labels)
	// The control: the same pod without the controllers' labels.
	netprobePod(t, operatorNS, "e2e-egress-control", map[string]string{"e2e": "egress-control"})
	ip := func(selector string) string {
		t.Helper()
		list, err := c.Kube.CoreV1().Pods(cluster.SampleNamespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(list.Items) == 0 || list.Items[0].Status.PodIP == "" {
			t.Fatalf("a running pod %s in %s: %v", selector, cluster.SampleNamespace, err)
		}
		return list.Items[0].Status.PodIP
	}
	environmentd, balancerd, console := ip("materialize.cloud/app=environmentd"), ip("materialize.cloud/app=balancerd"), ip("materialize.cloud/app=console")
	apiServer := "connect:kubernetes.default.svc.cluster.local:443"
	expectReachable(t, operatorNS, "e2e-egress-probe", apiServer, true, "the API server, by name (DNS too)")
	expectReachable(t, operatorNS, "e2e-egress-probe", "connect:"+environmentd+":6878", true, "environmentd's internal HTTP port")
	// balancerd's and the console's ingress policies admit any address.
	for _, target := range []string{balancerd + ":6875", console + ":8080"} {
		expectReachable(t, operatorNS, "e2e-egress-control", "connect:"+target, true, target+" without the controllers' policy")
		expectReachable(t, operatorNS, "e2e-egress-probe", "connect:"+target, false, target+" under the controllers' policy")
	}
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
