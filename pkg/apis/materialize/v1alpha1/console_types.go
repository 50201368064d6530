package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HTTPConnectionScheme is the scheme the console uses to reach balancerd.
// +kubebuilder:validation:Enum=http;https
type HTTPConnectionScheme string

const (
	SchemeHTTP  HTTPConnectionScheme = "http"
	SchemeHTTPS HTTPConnectionScheme = "https"
)

// ConsoleSpec is the desired state of an environment's web console.
type ConsoleSpec struct {
	// consoleImageRef is the console container image to run.
	// +kubebuilder:validation:MinLength=1
	ConsoleImageRef string `json:"consoleImageRef"`
	// resourceRequirements are the console's compute resources.
	// +optional
	ResourceRequirements *corev1.ResourceRequirements `json:"resourceRequirements,omitempty"`
	// replicas is the number of console pods.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`
	// externalCertificateSpec requests the certificate the console presents to browsers.
	// +optional
	ExternalCertificateSpec *MaterializeCertSpec `json:"externalCertificateSpec,omitempty"`
	// podAnnotations are the Materialize's, kept for upstream compatibility;
	// as upstream, they are not put on the pods (a switch of operators
	// restarts none).
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	// podLabels are the Materialize's, kept for upstream compatibility; as
	// upstream, they are not put on the pods.
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`
	// balancerd is the balancerd the console sends API requests to.
	Balancerd BalancerdRef `json:"balancerd"`
	// authenticatorKind is how the console authenticates with Materialize.
	// +optional
	// +kubebuilder:default=None
	AuthenticatorKind AuthenticatorKind `json:"authenticatorKind,omitempty"`
	// resourceId overrides the random identifier in the names of the child objects.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]{1,20}$`
	ResourceID string `json:"resourceId,omitempty"`
}

// BalancerdRef locates a balancerd Service.
type BalancerdRef struct {
	// serviceName is the name of the balancerd Service.
	// +kubebuilder:validation:MinLength=1
	ServiceName string `json:"serviceName"`
	// namespace of the balancerd Service.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// scheme is http or https.
	// +optional
	// +kubebuilder:default=http
	Scheme HTTPConnectionScheme `json:"scheme,omitempty"`
	// dnsNames are the names in balancerd's external certificate; the
	// console reaches balancerd by them when the scheme is https.
	// +optional
	// +listType=atomic
	DNSNames []string `json:"dnsNames,omitempty"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=consoles,categories=materialize
// +kubebuilder:printcolumn:name="ImageRef",type=string,JSONPath=`.spec.consoleImageRef`,description="Reference to the Docker image."
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the deployment is ready"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Console is an environment's web console.
type Console struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ConsoleSpec     `json:"spec"`
	Status ComponentStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ConsoleList is a list of Consoles.
type ConsoleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Console `json:"items"`
}
