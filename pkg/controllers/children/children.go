// Package children holds what every reconciler's child objects share: the
// resource id, names, labels, owner references and the restricted pod
// security settings.
package children

import (
	"crypto/rand"
	"math/big"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

const (
	// ResourceIDLabel marks every child object; informers watch only
	// objects that carry it, so memory does not grow with the cluster.
	ResourceIDLabel = "materialize.cloud/mz-resource-id"
	// NameLabel selects a component's pods (compatible with existing clusters).
	NameLabel = "materialize.cloud/name"
	// ComponentLabel names the component: environmentd, balancerd, console.
	ComponentLabel = "materialize.cloud/component"
	// ManagedByLabel is app.kubernetes.io/managed-by.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of ManagedByLabel.
	ManagedBy = "orchestratord"
)

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// NewResourceID returns a random 10-character [a-z0-9] identifier.
func NewResourceID() string {
	b := make([]byte, 10)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(idAlphabet))))
		if err != nil {
			panic(err) // crypto/rand does not fail on Linux
		}
		b[i] = idAlphabet[n.Int64()]
	}
	return string(b)
}

// Name is mz{resourceID}-{suffix}.
func Name(resourceID, suffix string) string { return "mz" + resourceID + "-" + suffix }

// Labels are the labels of a child object of a component.
func Labels(resourceID, component, name string) map[string]string {
	return map[string]string{
		ResourceIDLabel: resourceID,
		ComponentLabel:  component,
		NameLabel:       name,
		ManagedByLabel:  ManagedBy,
	}
}

// OwnerReference makes owner the controlling owner of a child, so garbage
// collection removes the child with it and deletion waits for the child.
func OwnerReference(owner metav1.Object, gvk schema.GroupVersionKind) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(gvk.GroupVersion().String()).WithKind(gvk.Kind).
		WithName(owner.GetName()).WithUID(owner.GetUID()).
		WithController(true).WithBlockOwnerDeletion(true)
}

// RestrictedPodSecurity satisfies the restricted Pod Security Standard.
func RestrictedPodSecurity() *corev1ac.PodSecurityContextApplyConfiguration {
	return corev1ac.PodSecurityContext().
		WithRunAsNonRoot(true).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
}

// RestrictedContainerSecurity satisfies the restricted Pod Security Standard.
func RestrictedContainerSecurity() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithRunAsNonRoot(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
}
