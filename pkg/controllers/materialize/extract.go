package materialize

import (
	"k8s.io/apimachinery/pkg/labels"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
)

// client-go's extractors of the fields a manager owns, for apply.Object.
var (
	corev1acExtractServiceAccount    = corev1ac.ExtractServiceAccount
	corev1acExtractService           = corev1ac.ExtractService
	corev1acExtractConfigMap         = corev1ac.ExtractConfigMap
	appsacExtractStatefulSet         = appsv1ac.ExtractStatefulSet
	rbacacExtractRoleBinding         = rbacv1ac.ExtractRoleBinding
	networkingacExtractNetworkPolicy = networkingv1ac.ExtractNetworkPolicy
)

func everything() labels.Selector { return labels.Everything() }
