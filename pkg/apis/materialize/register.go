// Package materialize holds the API group name shared by every version of the
// materialize.cloud API.
package materialize

// GroupName is the API group of every orchestratord custom resource.
const GroupName = "materialize.cloud"
