package podspec

import (
	"testing"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// balancerd's and the console's pods get --image-pull-secrets, in order;
// without any the pod spec has none (no empty list is applied).
func TestPodPullSecrets(t *testing.T) {
	p := corev1ac.PodSpec()
	if err := (PodSettings{}).Pod(p); err != nil {
		t.Fatal(err)
	}
	if p.ImagePullSecrets != nil {
		t.Errorf("pull secrets without any: %v", p.ImagePullSecrets)
	}
	p = corev1ac.PodSpec()
	if err := (PodSettings{ImagePullSecrets: []string{"b", "a"}}).Pod(p); err != nil {
		t.Fatal(err)
	}
	if len(p.ImagePullSecrets) != 2 || *p.ImagePullSecrets[0].Name != "b" || *p.ImagePullSecrets[1].Name != "a" {
		t.Errorf("pull secrets %v, want b, a", p.ImagePullSecrets)
	}
}
