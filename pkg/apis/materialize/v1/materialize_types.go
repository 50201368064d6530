package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaterializeRolloutStrategy says how a new environmentd generation replaces the active one.
// +kubebuilder:validation:Enum=WaitUntilReady;ManuallyPromote;ImmediatelyPromoteCausingDowntime
type MaterializeRolloutStrategy string

const (
	// RolloutWaitUntilReady promotes the new generation once it has caught up.
	RolloutWaitUntilReady MaterializeRolloutStrategy = "WaitUntilReady"
	// RolloutManuallyPromote waits at ReadyToPromote until spec.forcePromote
	// equals spec.requestRollout.
	RolloutManuallyPromote MaterializeRolloutStrategy = "ManuallyPromote"
	// RolloutImmediatelyPromoteCausingDowntime tears the old generation down
	// before the new one starts.
	RolloutImmediatelyPromoteCausingDowntime MaterializeRolloutStrategy = "ImmediatelyPromoteCausingDowntime"
)

// AuthenticatorKind selects how environmentd authenticates SQL and HTTP users.
// +kubebuilder:validation:Enum=None;Password;Sasl;Frontegg;Oidc
type AuthenticatorKind string

const (
	AuthenticatorNone     AuthenticatorKind = "None"
	AuthenticatorPassword AuthenticatorKind = "Password"
	AuthenticatorSasl     AuthenticatorKind = "Sasl"
	AuthenticatorFrontegg AuthenticatorKind = "Frontegg"
	AuthenticatorOidc     AuthenticatorKind = "Oidc"
)

// MaterializeSpec is the desired state of a Materialize environment.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.environmentId) || oldSelf.environmentId == '00000000-0000-0000-0000-000000000000' || (has(self.environmentId) && self.environmentId == oldSelf.environmentId)",message="environmentId cannot change once set"
type MaterializeSpec struct {
	// environmentdImageRef is the environmentd container image to run.
	// Changing it (or anything else that goes into the rollout hash) starts a rollout.
	// +kubebuilder:validation:MinLength=1
	EnvironmentdImageRef string `json:"environmentdImageRef"`
	// environmentdExtraArgs are extra command-line arguments for environmentd.
	// +optional
	// +listType=atomic
	EnvironmentdExtraArgs []string `json:"environmentdExtraArgs,omitempty"`
	// environmentdExtraEnv are extra environment variables for environmentd.
	// +optional
	// +listType=atomic
	EnvironmentdExtraEnv []corev1.EnvVar `json:"environmentdExtraEnv,omitempty"`
	// environmentdConnectionRoleArn is the AWS IAM role used for user connections (e.g. AWS PrivateLink, S3).
	// +optional
	EnvironmentdConnectionRoleArn string `json:"environmentdConnectionRoleArn,omitempty"`
	// environmentdResourceRequirements are environmentd's compute resources.
	// +optional
	EnvironmentdResourceRequirements *corev1.ResourceRequirements `json:"environmentdResourceRequirements,omitempty"`
	// environmentdScratchVolumeStorageRequirement is the size of environmentd's scratch volume.
	// +optional
	EnvironmentdScratchVolumeStorageRequirement *resource.Quantity `json:"environmentdScratchVolumeStorageRequirement,omitempty"`
	// balancerdResourceRequirements are balancerd's compute resources.
	// +optional
	BalancerdResourceRequirements *corev1.ResourceRequirements `json:"balancerdResourceRequirements,omitempty"`
	// consoleResourceRequirements are the console's compute resources.
	// +optional
	ConsoleResourceRequirements *corev1.ResourceRequirements `json:"consoleResourceRequirements,omitempty"`
	// balancerdReplicas is the number of balancerd pods.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BalancerdReplicas *int32 `json:"balancerdReplicas,omitempty"`
	// consoleReplicas is the number of console pods.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ConsoleReplicas *int32 `json:"consoleReplicas,omitempty"`
	// serviceAccountName is an existing ServiceAccount for environmentd; when
	// empty the operator creates one.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// serviceAccountAnnotations are set on the ServiceAccount the operator creates.
	// +optional
	ServiceAccountAnnotations map[string]string `json:"serviceAccountAnnotations,omitempty"`
	// serviceAccountLabels are set on the ServiceAccount the operator creates.
	// +optional
	ServiceAccountLabels map[string]string `json:"serviceAccountLabels,omitempty"`
	// podAnnotations are set on every environmentd pod.
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	// podLabels are set on every environmentd pod and, through
	// environmentd, its clusterd pods. Keys in the materialize.cloud domain
	// are the operator's and environmentd's, which select the pods by them:
	// a Materialize that sets one is not rolled out (FailedDeploy).
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`
	// forceRollout is a UUID; changing it forces a rollout even when nothing
	// else changed.
	// +optional
	// +kubebuilder:validation:Format=uuid
	// +kubebuilder:default="00000000-0000-0000-0000-000000000000"
	ForceRollout string `json:"forceRollout,omitempty"`
	// forcePromote promotes a generation waiting for approval (rolloutStrategy
	// ManuallyPromote) when it equals status.requestedRolloutHash.
	// +optional
	ForcePromote *string `json:"forcePromote,omitempty"`
	// rolloutStrategy says how a new generation replaces the active one:
	// WaitUntilReady promotes once the new generation has caught up;
	// ManuallyPromote waits at ReadyToPromote until forcePromote equals
	// status.requestedRolloutHash; ImmediatelyPromoteCausingDowntime tears the old
	// generation down first.
	// +optional
	// +kubebuilder:default=WaitUntilReady
	RolloutStrategy MaterializeRolloutStrategy `json:"rolloutStrategy,omitempty"`
	// rolloutRequestTimeout is how long a rollout may take before the new
	// generation is removed and the rollout reported as RolloutTimeout; parsed as
	// upstream parses it (humantime): 24h, 90m, 1h 30m, 2d.
	// +optional
	// +kubebuilder:default="24h"
	RolloutRequestTimeout string `json:"rolloutRequestTimeout,omitempty"`
	// backendSecretName names a Secret with metadata_backend_url and persist_backend_url.
	// +kubebuilder:validation:MinLength=1
	BackendSecretName string `json:"backendSecretName"`
	// authenticatorKind selects how environmentd authenticates users.
	// +optional
	// +kubebuilder:default=None
	AuthenticatorKind AuthenticatorKind `json:"authenticatorKind,omitempty"`
	// enableRbac turns on role-based access control in environmentd.
	// +optional
	// +kubebuilder:default=false
	EnableRBAC bool `json:"enableRbac,omitempty"`
	// environmentId is the UUID of the environment. The operator fills it when empty.
	// +optional
	// +kubebuilder:validation:Format=uuid
	// +kubebuilder:default="00000000-0000-0000-0000-000000000000"
	EnvironmentID string `json:"environmentId,omitempty"`
	// systemParameterConfigmapName names a ConfigMap of system parameters for environmentd.
	// +optional
	SystemParameterConfigmapName string `json:"systemParameterConfigmapName,omitempty"`
	// balancerdExternalCertificateSpec requests balancerd's public certificate.
	// +optional
	BalancerdExternalCertificateSpec *MaterializeCertSpec `json:"balancerdExternalCertificateSpec,omitempty"`
	// consoleExternalCertificateSpec requests the console's public certificate.
	// +optional
	ConsoleExternalCertificateSpec *MaterializeCertSpec `json:"consoleExternalCertificateSpec,omitempty"`
	// internalCertificateSpec requests the certificate for in-cluster traffic.
	// +optional
	InternalCertificateSpec *MaterializeCertSpec `json:"internalCertificateSpec,omitempty"`
}

// MaterializeRolloutStatus is a rollout in progress.
type MaterializeRolloutStatus struct {
	// request is the request it carries out (the v1alpha1 spec.requestRollout, which a v1 rollout hash maps to).
	Request string `json:"request"`
	// generation is the environmentd generation being rolled out.
	Generation uint64 `json:"generation"`
	// environmentdImageRef is the image being rolled out.
	// +optional
	EnvironmentdImageRef string `json:"environmentdImageRef,omitempty"`
	// startedAt is when the rollout started; spec.rolloutRequestTimeout counts from it.
	StartedAt metav1.Time `json:"startedAt"`
	// promotionSentAt is set before the operator first asks the generation to
	// promote: from then on the rollout only promotes, since the generation
	// may already have fenced the active one out; it never times out.
	// +optional
	PromotionSentAt *metav1.Time `json:"promotionSentAt,omitempty"`
}

// MaterializeStatus is the observed state of a Materialize environment.
type MaterializeStatus struct {
	// resourceId is the random identifier in the names of every child object (mz{resourceId}-…).
	// +optional
	ResourceID string `json:"resourceId,omitempty"`
	// activeGeneration is the environmentd generation serving traffic.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Format=uint64
	ActiveGeneration uint64 `json:"activeGeneration,omitempty"`
	// lastCompletedRolloutEnvironmentdImageRef is the image of the last completed rollout.
	// +optional
	LastCompletedRolloutEnvironmentdImageRef string `json:"lastCompletedRolloutEnvironmentdImageRef,omitempty"`
	// lastCompletedRolloutHash is the rollout hash of the last completed rollout.
	// +optional
	LastCompletedRolloutHash string `json:"lastCompletedRolloutHash,omitempty"`
	// requestedRolloutHash is the rollout hash of the spec; a rollout is in
	// progress while it differs from lastCompletedRolloutHash.
	// +optional
	RequestedRolloutHash string `json:"requestedRolloutHash,omitempty"`
	// rollout is the rollout in progress, recorded by the operator so that
	// its clock and its point of no return survive restarts and handovers;
	// absent when none is in progress.
	// +optional
	Rollout *MaterializeRolloutStatus `json:"rollout,omitempty"`
	// conditions: UpToDate tells whether the active generation matches the spec.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=materializes,shortName=mzs,categories=materialize
// +kubebuilder:printcolumn:name="ImageRefRunning",type=string,JSONPath=`.status.lastCompletedRolloutEnvironmentdImageRef`,priority=1,description="Reference to the Docker image that is currently in use."
// +kubebuilder:printcolumn:name="ImageRefToDeploy",type=string,JSONPath=`.spec.environmentdImageRef`,description="Reference to the Docker image which will be deployed on the next rollout."
// +kubebuilder:printcolumn:name="Generation",type=integer,JSONPath=`.status.activeGeneration`,description="Active environmentd generation"
// +kubebuilder:printcolumn:name="UpToDate",type=string,JSONPath=`.status.conditions[?(@.type=="UpToDate")].status`,description="Whether the spec has been applied"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="UpToDate")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Materialize is a Materialize environment: environmentd generations, their
// balancer and console.
type Materialize struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MaterializeSpec   `json:"spec"`
	Status MaterializeStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// MaterializeList is a list of Materialize environments.
type MaterializeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Materialize `json:"items"`
}
