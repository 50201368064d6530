// Package labels holds upstream's labels on the objects of a Materialize
// environment: the controllers write them, and the node triggers select
// environmentd's and clusterd's pods by them. A leaf, so that both depend
// on it rather than one on the other.
package labels

// Upstream's labels. Every child carries the organization labels; pods are
// selected by K8sName (environmentd, clusterd, balancerd, console).
const (
	OrganizationName      = "materialize.cloud/organization-name"
	OrganizationNamespace = "materialize.cloud/organization-namespace"
	App                   = "materialize.cloud/app"
	LegacyApp             = "app"
	K8sName               = "app.kubernetes.io/name"
	K8sManagedBy          = "app.kubernetes.io/managed-by"
	K8sPartOf             = "app.kubernetes.io/part-of"
	// ManagedBy is upstream's value of app.kubernetes.io/managed-by: objects
	// keep it across a switch of operators.
	ManagedBy = "materialize-operator"
)
