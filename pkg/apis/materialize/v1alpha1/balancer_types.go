package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BalancerSpec is the desired state of an environment's balancerd.
// +kubebuilder:validation:XValidation:rule="has(self.staticRouting) != has(self.fronteggRouting)",message="exactly one of staticRouting or fronteggRouting must be set"
type BalancerSpec struct {
	// balancerdImageRef is the balancerd container image to run.
	// +kubebuilder:validation:MinLength=1
	BalancerdImageRef string `json:"balancerdImageRef"`
	// resourceRequirements are balancerd's compute resources.
	// +optional
	ResourceRequirements *corev1.ResourceRequirements `json:"resourceRequirements,omitempty"`
	// replicas is the number of balancerd pods.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`
	// externalCertificateSpec requests the certificate balancerd presents to clients.
	// +optional
	ExternalCertificateSpec *MaterializeCertSpec `json:"externalCertificateSpec,omitempty"`
	// internalCertificateSpec requests the certificate balancerd uses towards environmentd.
	// +optional
	InternalCertificateSpec *MaterializeCertSpec `json:"internalCertificateSpec,omitempty"`
	// podAnnotations are the Materialize's, kept for upstream compatibility;
	// as upstream, they are not put on the pods (a switch of operators
	// restarts none).
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	// podLabels are the Materialize's, kept for upstream compatibility; as
	// upstream, they are not put on the pods.
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`
	// staticRouting sends every connection to one environmentd Service.
	// Exactly one of staticRouting and fronteggRouting is set.
	// +optional
	StaticRouting *StaticRoutingConfig `json:"staticRouting,omitempty"`
	// fronteggRouting resolves the environment from the user's Frontegg tenant.
	// Exactly one of staticRouting and fronteggRouting is set.
	// +optional
	FronteggRouting *FronteggRoutingConfig `json:"fronteggRouting,omitempty"`
	// resourceId overrides the random identifier in the names of the child objects.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]{1,20}$`
	ResourceID string `json:"resourceId,omitempty"`
}

// StaticRoutingConfig names the environmentd Service balancerd forwards to.
type StaticRoutingConfig struct {
	// environmentdNamespace is the namespace of the environmentd Service.
	// +kubebuilder:validation:MinLength=1
	EnvironmentdNamespace string `json:"environmentdNamespace"`
	// environmentdServiceName is the name of the environmentd Service.
	// +kubebuilder:validation:MinLength=1
	EnvironmentdServiceName string `json:"environmentdServiceName"`
}

// FronteggRoutingConfig selects Frontegg-based routing; it has no settings yet.
type FronteggRoutingConfig struct{}

// ComponentStatus is the observed state of a balancer or console.
type ComponentStatus struct {
	// resourceId is the identifier in the names of the child objects (mz{resourceId}-…).
	// +optional
	ResourceID string `json:"resourceId,omitempty"`
	// conditions: Ready mirrors the Available condition of the Deployment.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=balancers,categories=materialize
// +kubebuilder:printcolumn:name="ImageRef",type=string,JSONPath=`.spec.balancerdImageRef`,description="Reference to the Docker image."
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the deployment is ready"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Balancer is an environment's balancerd: the SQL and HTTP front door.
type Balancer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BalancerSpec    `json:"spec"`
	Status ComponentStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// BalancerList is a list of Balancers.
type BalancerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Balancer `json:"items"`
}
