// Package podspec builds what the pods of every component share, upstream
// orchestratord's pod settings: labels, security context, scheduling, pull
// secrets, resources and scrape annotations, and the Services and volumes
// around them.
package podspec

import (
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	mzlabels "github.com/materializeinc/orchestratord/pkg/labels"
)

// PodSettings are the operator-wide settings of a component's pods, upstream
// orchestratord's flags of the same names (--image-pull-policy,
// --scheduler-name, --<component>-node-selector, -affinity, -toleration,
// -default-resources, --enable-security-context,
// --enable-prometheus-scrape-annotations), and this operator's
// --image-pull-secrets.
type PodSettings struct {
	ImagePullPolicy  corev1.PullPolicy
	ImagePullSecrets []string
	SchedulerName    string
	NodeSelector     map[string]string
	Affinity         *corev1.Affinity
	Tolerations      []corev1.Toleration
	DefaultResources *corev1.ResourceRequirements
	SecurityContext  bool
	PrometheusScrape bool
}

// Labels are upstream's labels of a component's children.
type Labels struct {
	// Default are ManagedResource::default_labels: organization name and
	// namespace (the custom resource's), resource id, materialize.cloud/app.
	Default map[string]string
	App     string
}

// NewLabels returns the labels of the children of the named custom
// resource with the given resource id, for app (balancerd, console).
func NewLabels(crName, namespace, resourceID, app string) Labels {
	return Labels{App: app, Default: map[string]string{
		mzlabels.OrganizationName:      crName,
		mzlabels.OrganizationNamespace: namespace,
		children.ResourceIDLabel:       resourceID,
		mzlabels.App:                   app,
	}}
}

// Recommended are recommended_k8s_labels(app).
func Recommended(app string) map[string]string {
	return map[string]string{
		mzlabels.K8sManagedBy: mzlabels.ManagedBy,
		mzlabels.K8sPartOf:    "materialize",
		mzlabels.K8sName:      app,
		mzlabels.LegacyApp:    app,
	}
}

// Object are the labels of a child object (managed_resource_meta).
func (l Labels) Object() map[string]string {
	out := maps.Clone(l.Default)
	maps.Copy(out, Recommended(l.App))
	return out
}

// Selector selects the pods of the named Deployment: the default labels,
// materialize.cloud/name and app.
func (l Labels) Selector(deployment string) map[string]string {
	out := maps.Clone(l.Default)
	out[children.NameLabel] = deployment
	out[mzlabels.LegacyApp] = l.App
	return out
}

// Pod are the pod template's labels: the selector's and the recommended.
func (l Labels) Pod(deployment string) map[string]string {
	out := l.Selector(deployment)
	maps.Copy(out, Recommended(l.App))
	return out
}

// Container sets the pull policy, resources (the component's own, else the
// default) and, when enabled, the security context on c.
func (s PodSettings) Container(c *corev1ac.ContainerApplyConfiguration, own *corev1.ResourceRequirements) error {
	if s.ImagePullPolicy != "" {
		c.WithImagePullPolicy(s.ImagePullPolicy)
	}
	rr := own
	if rr == nil {
		rr = s.DefaultResources
	}
	if rr != nil {
		ac, err := convert[corev1ac.ResourceRequirementsApplyConfiguration](rr)
		if err != nil {
			return err
		}
		c.WithResources(ac)
	}
	if s.SecurityContext {
		c.WithSecurityContext(ContainerSecurityContext())
	}
	return nil
}

// ContainerSecurityContext is upstream's container security context under
// --enable-security-context, the same for environmentd, balancerd and the
// console.
func ContainerSecurityContext() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithRunAsNonRoot(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)).
		WithAllowPrivilegeEscalation(false)
}

// Pod sets the scheduling settings and pull secrets on p.
func (s PodSettings) Pod(p *corev1ac.PodSpecApplyConfiguration) error {
	p.WithImagePullSecrets(PullSecrets(s.ImagePullSecrets)...)
	if len(s.NodeSelector) > 0 {
		p.WithNodeSelector(s.NodeSelector)
	}
	if s.Affinity != nil {
		ac, err := convert[corev1ac.AffinityApplyConfiguration](s.Affinity)
		if err != nil {
			return err
		}
		p.WithAffinity(ac)
	}
	for i := range s.Tolerations {
		ac, err := convert[corev1ac.TolerationApplyConfiguration](&s.Tolerations[i])
		if err != nil {
			return err
		}
		p.WithTolerations(ac)
	}
	if s.SchedulerName != "" {
		p.WithSchedulerName(s.SchedulerName)
	}
	return nil
}

// PullSecrets are references to the named Secrets, for a pod's or a
// ServiceAccount's imagePullSecrets.
func PullSecrets(names []string) []*corev1ac.LocalObjectReferenceApplyConfiguration {
	var out []*corev1ac.LocalObjectReferenceApplyConfiguration
	for _, name := range names {
		out = append(out, corev1ac.LocalObjectReference().WithName(name))
	}
	return out
}

// ScrapeAnnotations are upstream's Prometheus annotations for a pod serving
// metrics on port at /metrics, nil when disabled.
func (s PodSettings) ScrapeAnnotations(port int32) map[string]string {
	if !s.PrometheusScrape {
		return nil
	}
	return map[string]string{
		"prometheus.io/scrape": "true",
		"prometheus.io/port":   fmt.Sprint(port),
		"prometheus.io/path":   "/metrics",
		"prometheus.io/scheme": "http",
	}
}

// HeadlessService is upstream's component Service: ClusterIP None, pods
// selected by materialize.cloud/name, numeric target ports.
func HeadlessService(deployment string, ports ...*corev1ac.ServicePortApplyConfiguration) *corev1ac.ServiceSpecApplyConfiguration {
	return corev1ac.ServiceSpec().
		WithType(corev1.ServiceTypeClusterIP).
		WithClusterIP(corev1.ClusterIPNone).
		WithSelector(map[string]string{children.NameLabel: deployment}).
		WithPorts(ports...)
}

// ServicePort forwards port to the same container port.
func ServicePort(name string, port int32) *corev1ac.ServicePortApplyConfiguration {
	return corev1ac.ServicePort().WithName(name).WithProtocol(corev1.ProtocolTCP).
		WithPort(port).WithTargetPort(intstr.FromInt32(port))
}

// TCPPort is a named TCP container port; the protocol is explicit because
// it is part of the list key, so the applied and the live port compare equal.
func TCPPort(name string, port int32) *corev1ac.ContainerPortApplyConfiguration {
	return corev1ac.ContainerPort().WithName(name).WithContainerPort(port).WithProtocol(corev1.ProtocolTCP)
}

// Selector is a label selector of exactly these labels.
func Selector(labels map[string]string) *metav1ac.LabelSelectorApplyConfiguration {
	return metav1ac.LabelSelector().WithMatchLabels(labels)
}

// SecretVolume mounts a TLS Secret read-only (mode 0400), as upstream does
// for certificates.
func SecretVolume(name, secret string) *corev1ac.VolumeApplyConfiguration {
	return corev1ac.Volume().WithName(name).WithSecret(corev1ac.SecretVolumeSource().
		WithDefaultMode(0o400).WithSecretName(secret).WithOptional(false))
}

// convert turns a typed API value into its apply configuration; both have
// the same JSON form.
func convert[AC any, T any](v *T) (*AC, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := new(AC)
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("converting %T: %w", v, err)
	}
	return out, nil
}
