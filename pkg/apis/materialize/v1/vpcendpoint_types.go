package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VpcEndpoint describes an AWS VPC endpoint to create. environmentd's
// cloud-resource controller writes and reads these objects (it lists them
// while it boots); the operator only installs the type, as upstream
// orchestratord does, and lets environmentd's Role use it. Names, short name,
// printer columns and schema are upstream's
// (src/cloud-resources/src/crd/vpc_endpoint.rs), so objects carry over.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=vpce
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="AwsServiceName",type=string,JSONPath=`.spec.awsServiceName`,priority=1,description="Name of the VPC Endpoint Service to connect to."
// +kubebuilder:printcolumn:name="AvailabilityZoneIDs",type=string,JSONPath=`.spec.availabilityZoneIds`,priority=1,description="Availability Zone IDs"
type VpcEndpoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VpcEndpointSpec `json:"spec"`
	// +optional
	// +nullable
	Status *VpcEndpointStatus `json:"status,omitempty"`
}

// VpcEndpointSpec describes an AWS VPC endpoint to create.
type VpcEndpointSpec struct {
	// The name of the service to connect to.
	AwsServiceName string `json:"awsServiceName"`
	// The IDs of the availability zones in which the service is available.
	// +listType=atomic
	AvailabilityZoneIDs []string `json:"availabilityZoneIds"`
	// A suffix to use in the name of the IAM role that is created.
	RoleSuffix string `json:"roleSuffix"`
}

// VpcEndpointState is the endpoint's state as environmentd reports it.
// +kubebuilder:validation:Enum=pendingServiceDiscovery;creatingEndpoint;recreatingEndpoint;updatingEndpoint;available;deleted;deleting;expired;failed;pending;pendingAcceptance;rejected;unknown;missingAvailabilityZones
type VpcEndpointState string

// VpcEndpointStatus is written by environmentd's cloud-resource controller.
type VpcEndpointStatus struct {
	// None until the endpoint exists.
	// +optional
	// +nullable
	VpcEndpointID *string `json:"vpcEndpointId,omitempty"`
	// +optional
	// +nullable
	State *VpcEndpointState `json:"state,omitempty"`
	// +optional
	// +nullable
	// +listType=atomic
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	// +nullable
	// +listType=atomic
	AutoAssignedAzs []string `json:"autoAssignedAzs,omitempty"`
}

// VpcEndpointList is a list of VpcEndpoints.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type VpcEndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VpcEndpoint `json:"items"`
}
