package component

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// A live template holds the desired one despite the API server's defaults,
// and does not when a field differs.
func TestHolds(t *testing.T) {
	desired := corev1ac.PodTemplateSpec().WithLabels(map[string]string{"a": "b"}).
		WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("c").WithImage("i").
			WithEnv(corev1ac.EnvVar().WithName("E").WithValue("1"))))
	want, err := typedTemplate(desired)
	if err != nil {
		t.Fatal(err)
	}
	live := *want.DeepCopy()
	live.Labels["pod-template-hash"] = "x"
	live.Spec.RestartPolicy = corev1.RestartPolicyAlways
	live.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	if !holds(live, want) {
		t.Error("defaults make the live template differ")
	}
	live.Spec.Containers[0].Env = nil
	if holds(live, want) {
		t.Error("a missing env var goes unnoticed")
	}
}
