package materialize

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/podspec"
	mzlabels "github.com/materializeinc/orchestratord/pkg/labels"
)

// Upstream's label keys and values (src/cloud-resources/src/crd.rs and
// crd/materialize.rs); the objects must carry them for a cluster to switch
// operators without replacing anything.
const (
	environmentdApp = "environmentd"
	balancerdApp    = "balancerd"
	// IAMRoleAnnotation is the ServiceAccount annotation EKS reads.
	IAMRoleAnnotation = "eks.amazonaws.com/role-arn"
)

var gvk = v1alpha1.SchemeGroupVersion.WithKind("Materialize")

// env is one Materialize with its resource id and the operator's settings,
// from which every child is derived.
type env struct {
	mz  *v1alpha1.Materialize
	id  string
	cfg *Config
}

func (e env) ns() string { return e.mz.Namespace }

// key is the Materialize's work queue key, under which its reconciler
// remembers its writes (recent.Writes).
func (e env) key() string { return e.mz.Namespace + "/" + e.mz.Name }

func (e env) owner() *metav1ac.OwnerReferenceApplyConfiguration {
	return children.OwnerReference(e.mz, gvk)
}

// defaultLabels are upstream's ManagedResource::default_labels.
func (e env) defaultLabels() map[string]string {
	return map[string]string{
		mzlabels.OrganizationName:      e.mz.Name,
		mzlabels.OrganizationNamespace: e.ns(),
		children.ResourceIDLabel:       e.id,
	}
}

// labels are those of upstream's managed_resource_meta for a Materialize.
func (e env) labels() map[string]string {
	l := e.defaultLabels()
	for k, v := range podspec.Recommended(environmentdApp) {
		l[k] = v
	}
	return l
}

func (e env) name(suffix string) string { return children.Name(e.id, suffix) }

func (e env) serviceAccountName() string {
	if e.mz.Spec.ServiceAccountName != "" {
		return e.mz.Spec.ServiceAccountName
	}
	return e.mz.Name
}

// roleBindingName is the RoleBinding that grants environmentd's
// ServiceAccount the ClusterRole named by --environmentd-cluster-role. It
// is not upstream's name (the Materialize's, for its Role and RoleBinding):
// a RoleBinding's roleRef is immutable, so two operators applying
// different roleRefs under one name would each fail forever after a switch.
func (e env) roleBindingName() string { return e.name("environmentd") }

func (e env) environmentdName() string { return e.name("environmentd") }

// serviceAccount is created unless spec.serviceAccountName names one. On
// AWS the (deprecated) IAM role ARN becomes the EKS annotation and wins over
// an annotation of the same key, as upstream does.
func (e env) serviceAccount() *corev1ac.ServiceAccountApplyConfiguration {
	annotations := map[string]string{}
	for k, v := range e.mz.Spec.ServiceAccountAnnotations {
		annotations[k] = v
	}
	arn := e.mz.Spec.EnvironmentdIamRoleArn
	if arn == "" {
		arn = e.cfg.EnvironmentdIAMRoleARN
	}
	if e.cfg.CloudProvider == "aws" && arn != "" {
		annotations[IAMRoleAnnotation] = arn
	}
	labels := e.defaultLabels()
	for k, v := range e.mz.Spec.ServiceAccountLabels {
		labels[k] = v
	}
	sa := corev1ac.ServiceAccount(e.serviceAccountName(), e.ns()).WithLabels(labels).WithOwnerReferences(e.owner())
	if len(annotations) > 0 {
		sa.WithAnnotations(annotations)
	}
	// clusterd's pods, which environmentd creates under this ServiceAccount,
	// get them from it (the ServiceAccount admission plugin).
	sa.WithImagePullSecrets(podspec.PullSecrets(e.cfg.ImagePullSecrets)...)
	return sa
}

var allVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// DefaultEnvironmentdClusterRole is --environmentd-cluster-role's default:
// the ClusterRole the chart renders for a release named orchestratord.
const DefaultEnvironmentdClusterRole = "orchestratord-controllers-environmentd"

// EnvironmentdRules are what environmentd may do in its namespace to
// orchestrate its clusters: upstream's create_role_object, rule for rule,
// plus the update of StatefulSets' finalizers. The chart ships them as the
// ClusterRole the controllers bind to each environment's ServiceAccount
// (test/chart checks the two are equal); the controllers hold none of
// them, only bind on that ClusterRole.
func EnvironmentdRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: allVerbs},
		// Beyond upstream's rules: environmentd gives the clusterd
		// StatefulSets its own pod's owner references, blockOwnerDeletion
		// included, which the OwnerReferencesPermissionEnforcement
		// admission plugin (OpenShift's default) allows only to who may
		// update the owner's finalizers.
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets/finalizers"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims", "pods", "secrets", "services"}, Verbs: allVerbs},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
		{APIGroups: []string{"materialize.cloud"}, Resources: []string{"vpcendpoints"}, Verbs: allVerbs},
		{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"custom.metrics.k8s.io"}, Resources: []string{
			"persistentvolumeclaims/kubelet_volume_stats_used_bytes",
			"persistentvolumeclaims/kubelet_volume_stats_capacity_bytes"}, Verbs: []string{"get"}},
	}
}

// roleBinding grants environmentd's ServiceAccount the ClusterRole
// clusterRole (EnvironmentdRules) in the Materialize's namespace. A Role
// and RoleBinding named after the Materialize, made by upstream or by an
// earlier version of this operator, grant the same rules; they are left as
// they are, and garbage collection removes them with the Materialize.
func (e env) roleBinding(clusterRole string) *rbacv1ac.RoleBindingApplyConfiguration {
	return rbacv1ac.RoleBinding(e.roleBindingName(), e.ns()).WithLabels(e.labels()).WithOwnerReferences(e.owner()).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(clusterRole)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(e.serviceAccountName()).WithNamespace(e.ns()))
}

func tcpPolicyPort(p int32) *networkingv1ac.NetworkPolicyPortApplyConfiguration {
	return networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(p))
}

func cidrPeers(cidrs []string) []*networkingv1ac.NetworkPolicyPeerApplyConfiguration {
	peers := make([]*networkingv1ac.NetworkPolicyPeerApplyConfiguration, 0, len(cidrs))
	for _, c := range cidrs {
		peers = append(peers, networkingv1ac.NetworkPolicyPeer().WithIPBlock(networkingv1ac.IPBlock().WithCIDR(c)))
	}
	return peers
}

// networkPolicies are upstream's opt-in policies. The internal ones always
// come with "allow-orchestratord", so an enforcing CNI never cuts the
// operator off from the leader API.
func (e env) networkPolicies() []*networkingv1ac.NetworkPolicyApplyConfiguration {
	c := e.cfg
	policy := func(suffix string) *networkingv1ac.NetworkPolicyApplyConfiguration {
		return networkingv1ac.NetworkPolicy(e.name(suffix), e.ns()).WithLabels(e.labels()).WithOwnerReferences(e.owner())
	}
	var out []*networkingv1ac.NetworkPolicyApplyConfiguration
	if c.NetworkPoliciesInternalEnabled {
		allPods := metav1ac.LabelSelector().WithMatchLabels(map[string]string{children.ResourceIDLabel: e.id})
		environmentd := e.defaultLabels()
		environmentd[mzlabels.App] = environmentdApp
		operator := map[string]string{}
		for _, kv := range mustKeyValues(c.OperatorPodSelectorLabels) {
			operator[kv.key] = kv.value
		}
		out = append(out,
			policy("allow-all-within-environment").WithSpec(networkingv1ac.NetworkPolicySpec().
				WithPodSelector(allPods).
				WithPolicyTypes(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress).
				WithIngress(networkingv1ac.NetworkPolicyIngressRule().WithFrom(networkingv1ac.NetworkPolicyPeer().WithPodSelector(allPods))).
				WithEgress(networkingv1ac.NetworkPolicyEgressRule().WithTo(networkingv1ac.NetworkPolicyPeer().WithPodSelector(allPods)))),
			policy("allow-orchestratord").WithSpec(networkingv1ac.NetworkPolicySpec().
				WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(environmentd)).
				WithPolicyTypes(networkingv1.PolicyTypeIngress).
				WithIngress(networkingv1ac.NetworkPolicyIngressRule().
					WithFrom(networkingv1ac.NetworkPolicyPeer().
						WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"kubernetes.io/metadata.name": c.OperatorNamespace})).
						WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(operator))).
					WithPorts(tcpPolicyPort(c.HTTPPort), tcpPolicyPort(c.InternalHTTPPort)))),
		)
	}
	if c.NetworkPoliciesIngressEnabled {
		balancerd := e.defaultLabels()
		balancerd[mzlabels.App] = balancerdApp
		out = append(out, policy("sql-and-http-ingress").WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(balancerd)).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(networkingv1ac.NetworkPolicyIngressRule().
				WithFrom(cidrPeers(c.NetworkPoliciesIngressCIDRs)...).
				WithPorts(tcpPolicyPort(c.HTTPPort), tcpPolicyPort(c.SQLPort)))))
	}
	if c.NetworkPoliciesEgressEnabled {
		out = append(out, policy("sources-and-sinks-egress").WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(e.defaultLabels())).
			WithPolicyTypes(networkingv1.PolicyTypeEgress).
			WithEgress(networkingv1ac.NetworkPolicyEgressRule().WithTo(cidrPeers(c.NetworkPoliciesEgressCIDRs)...))))
	}
	return out
}

// sortedKeys returns m's keys in order: upstream's maps are BTreeMaps, and
// the order of the arguments built from them must be theirs.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
