// Package v1 is version v1 of the materialize.cloud API.
//
// +k8s:deepcopy-gen=package
// +groupName=materialize.cloud
package v1
