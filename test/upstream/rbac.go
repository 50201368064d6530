package upstream

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// materializeMeta is managed_resource_meta of a Materialize: its
// default_labels (no app label) and the recommended labels of
// environmentd.
func (o Owner) materializeMeta(name string) metav1.ObjectMeta {
	m := o.meta(name, "environmentd")
	delete(m.Labels, "materialize.cloud/app")
	return m
}

var allVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// Role is create_role_object (controller/materialize/global.rs): named
// after the Materialize (role_name).
func Role(o Owner) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: o.materializeMeta(o.Name),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: allVerbs},
			{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims", "pods", "secrets", "services"}, Verbs: allVerbs},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
			{APIGroups: []string{"materialize.cloud"}, Resources: []string{"vpcendpoints"}, Verbs: allVerbs},
			{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"custom.metrics.k8s.io"}, Resources: []string{
				"persistentvolumeclaims/kubelet_volume_stats_used_bytes",
				"persistentvolumeclaims/kubelet_volume_stats_capacity_bytes"}, Verbs: []string{"get"}},
		},
	}
}

// RoleBinding is create_role_binding_object: named after the Materialize
// (role_binding_name), binding the Role of that name (roleRef apiGroup "",
// which the API server defaults to rbac.authorization.k8s.io) to
// serviceAccount.
func RoleBinding(o Owner, serviceAccount string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: o.materializeMeta(o.Name),
		RoleRef:    rbacv1.RoleRef{APIGroup: "", Kind: "Role", Name: o.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "", Kind: "ServiceAccount", Name: serviceAccount, Namespace: o.Namespace}},
	}
}
