// Package console reconciles Consoles: an environment's web console
// ConfigMap, Deployment, Service and NetworkPolicy, and the Console's Ready
// condition, which mirrors the Deployment's Available condition.
package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/certificates"
	mzac "github.com/materializeinc/orchestratord/pkg/client/applyconfiguration/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	mzlisters "github.com/materializeinc/orchestratord/pkg/client/listers/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/component"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
	"github.com/materializeinc/orchestratord/pkg/controllers/podspec"
	"github.com/materializeinc/orchestratord/pkg/controllers/recent"
	"github.com/materializeinc/orchestratord/pkg/kubeclient"
)

// Name is the controller's name.
const Name = "console"

// Component is the app label (upstream's app_name) and the suffix of the
// child objects' names (mz{id}-console).
const Component = "console"

// Config is how the console runs, from upstream's operator flags.
type Config struct {
	Pods         podspec.PodSettings
	Certificates certificates.Defaults
	// HTTPPort is the console's port (--console-http-port);
	// BalancerdHTTPPort is balancerd's, where API requests go
	// (--balancerd-http-port).
	HTTPPort, BalancerdHTTPPort int32
	// IngressCIDRs admit traffic to the console's port when
	// IngressNetworkPolicy is set (--network-policies-ingress-enabled,
	// --network-policies-ingress-cidrs).
	IngressNetworkPolicy bool
	IngressCIDRs         []string
	// QuietFor is how long a new Console gets no Ready condition while its
	// Deployment is not available (component.Owner.QuietFor); zero is
	// component.DefaultQuietFor, negative none.
	QuietFor time.Duration
}

// DefaultConfig has upstream's default ports.
func DefaultConfig() Config { return Config{HTTPPort: 8080, BalancerdHTTPPort: 6876} }

// DefaultReplicas is used when spec.replicas is unset (the CRD defaults it too).
const DefaultReplicas = 2

const (
	// AppConfigKey is the ConfigMap key of the console's configuration.
	AppConfigKey = "app-config.json"
	// AppConfigMountPath is where the ConfigMap is mounted; nginx serves
	// app-config.json from there, and a change reaches running pods through
	// the volume without a restart.
	AppConfigMountPath = "/usr/share/nginx/html/app-config"
	// EndpointEnv is the environment variable with balancerd's HTTP URL.
	EndpointEnv = "MZ_ENDPOINT"
	// ListenerEnv is the nginx listen directive (and, with TLS, the
	// certificate) of the console image.
	ListenerEnv = "MZ_NGINX_LISTENER_CONFIG"
	// ExternalTLSDir is where the console's external certificate is mounted.
	ExternalTLSDir = "/nginx/tls"
)

var gvk = v1alpha1.SchemeGroupVersion.WithKind("Console")

// AppConfig is app-config.json, the console's runtime configuration, as
// upstream writes it (field order and names included):
//
//	{"version":"<console image tag>","auth":{"mode":"<authenticatorKind>"},"balancerd_dns_names":[...]}
type AppConfig struct {
	Version           string        `json:"version"`
	Auth              AppConfigAuth `json:"auth"`
	BalancerdDNSNames []string      `json:"balancerd_dns_names,omitempty"`
}

// AppConfigAuth is the auth block of AppConfig.
type AppConfigAuth struct {
	Mode v1alpha1.AuthenticatorKind `json:"mode"`
}

// AppConfigJSON renders app-config.json for a Console spec. version is what
// follows the image reference's last ':' (the whole reference without one).
func AppConfigJSON(spec v1alpha1.ConsoleSpec) string {
	mode := spec.AuthenticatorKind
	if mode == "" {
		mode = v1alpha1.AuthenticatorNone
	}
	ref := spec.ConsoleImageRef
	version := ref[strings.LastIndex(ref, ":")+1:]
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // serde_json leaves <, >, & as they are
	if err := enc.Encode(AppConfig{Version: version, Auth: AppConfigAuth{Mode: mode}, BalancerdDNSNames: spec.Balancerd.DNSNames}); err != nil {
		panic(err) // strings only: always marshals
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// Endpoint is balancerd's HTTP URL as the console reaches it.
func (c Config) Endpoint(ref v1alpha1.BalancerdRef) string {
	scheme := ref.Scheme
	if scheme == "" {
		scheme = v1alpha1.SchemeHTTP
	}
	return fmt.Sprintf("%s://%s.%s.svc.cluster.local:%d", scheme, ref.ServiceName, ref.Namespace, c.BalancerdHTTPPort)
}

// kind is how the shared status code reads and writes Consoles.
func kind(mz versioned.Interface) component.Kind[*v1alpha1.Console, *mzac.ConsoleApplyConfiguration] {
	return component.Kind[*v1alpha1.Console, *mzac.ConsoleApplyConfiguration]{
		App:                Component,
		Status:             func(c *v1alpha1.Console) v1alpha1.ComponentStatus { return c.Status },
		SpecResourceID:     func(c *v1alpha1.Console) string { return c.Spec.ResourceID },
		ApplyConfiguration: mzac.Console,
		TypeMeta:           metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Console"},
		Client: func(ns string) component.StatusClient[*v1alpha1.Console, *mzac.ConsoleApplyConfiguration] {
			return mz.MaterializeV1alpha1().Consoles(ns)
		},
	}
}

type reconciler struct {
	cfg             Config
	kube            kubeclient.Interface
	dyn             dynamic.Interface
	consoles        mzlisters.ConsoleLister
	configMaps      controller.Lister[*corev1.ConfigMap]
	deployments     controller.Lister[*appsv1.Deployment]
	services        controller.Lister[*corev1.Service]
	networkPolicies controller.Lister[*networkingv1.NetworkPolicy]
	recent          *recent.Writes
	owner           component.Owner[*v1alpha1.Console, *mzac.ConsoleApplyConfiguration]
}

// New builds the console controller. Child objects are watched through
// d.KubeInformers, which only hold objects labelled with the resource id.
func New(d controller.Deps, cfg Config) *controller.Controller {
	log := d.Log
	if log == nil {
		log = zap.NewNop()
	}
	crInformer := d.MZInformers.Materialize().V1alpha1().Consoles()
	recent := recent.NewWrites()
	r := &reconciler{
		cfg:             cfg,
		kube:            d.Kube,
		dyn:             d.Dynamic,
		consoles:        crInformer.Lister(),
		configMaps:      controller.ConfigMapLister(d.KubeInformers),
		deployments:     controller.DeploymentLister(d.KubeInformers),
		services:        controller.ServiceLister(d.KubeInformers),
		networkPolicies: controller.NetworkPolicyLister(d.KubeInformers),
		recent:          recent,
		owner:           component.NewOwner(kind(d.MZ), recent, d.Recorder, cfg.QuietFor),
	}
	c := controller.New(Name, r, d.Workers, log, d.Metrics, component.ListKeys(r.consoles.List),
		crInformer.Informer().HasSynced, r.configMaps.Informer().HasSynced, r.deployments.Informer().HasSynced,
		r.services.Informer().HasSynced, r.networkPolicies.Informer().HasSynced)
	component.MustAddEventHandler(crInformer.Informer(), c.Handler())
	for _, inf := range []cache.SharedIndexInformer{r.configMaps.Informer(), r.deployments.Informer(), r.services.Informer(), r.networkPolicies.Informer()} {
		component.MustAddEventHandler(inf, c.OwnerHandler(gvk.Kind))
	}
	return c
}

// Reconcile brings the Console's children and status to their desired state.
func (r *reconciler) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	cr, found, err := r.owner.Load(ctx, key, func(ns, name string) (*v1alpha1.Console, error) {
		return r.consoles.Consoles(ns).Get(name)
	})
	if !found || err != nil {
		return controller.Result{}, err
	}
	result, err := r.reconcile(ctx, key, cr)
	r.owner.ReportRefused(cr, err)
	return result, err
}

func (r *reconciler) reconcile(ctx context.Context, key string, cr *v1alpha1.Console) (controller.Result, error) {
	cr, id, err := r.owner.ResourceID(ctx, key, cr)
	if err != nil {
		return controller.Result{}, err
	}
	lbls := podspec.NewLabels(cr.Name, cr.Namespace, id, Component)
	if r.cfg.IngressNetworkPolicy {
		if _, err := r.networkPolicy(cr, id, lbls).Apply(ctx, r.recent, cr, key); err != nil {
			return controller.Result{}, err
		}
	}
	if _, err := r.configMap(cr, id, lbls).Apply(ctx, r.recent, cr, key); err != nil {
		return controller.Result{}, err
	}
	desired, err := r.deployment(cr, id, lbls)
	if err != nil {
		return controller.Result{}, err
	}
	workload := component.Workload{Deployment: desired, Selector: lbls.Selector(children.Name(id, Component)), Service: r.service(cr, id, lbls)}
	dep, requeue, err := workload.Apply(ctx, r.kube, r.recent, cr, key)
	if dep == nil || err != nil {
		return controller.Result{RequeueAfter: requeue}, err
	}
	certified, err := component.ApplyExternalCertificate(ctx, r.dyn, r.cfg.Certificates.ConsoleExternal, cr.Spec.ExternalCertificateSpec, cr, gvk, id, Component, lbls)
	if err != nil {
		return controller.Result{}, err
	}
	recheck, err := r.owner.WriteReady(ctx, key, cr, id, dep)
	if certified {
		recheck = apply.WithinCertificateRecheck(recheck)
	}
	return controller.Result{RequeueAfter: recheck}, err
}

func (r *reconciler) configMap(cr *v1alpha1.Console, id string, lbls podspec.Labels) component.Child[*corev1.ConfigMap, *corev1ac.ConfigMapApplyConfiguration] {
	name := children.Name(id, Component)
	desired := corev1ac.ConfigMap(name, cr.Namespace).
		WithLabels(lbls.Object()).
		WithOwnerReferences(children.OwnerReference(cr, gvk)).
		WithData(map[string]string{AppConfigKey: AppConfigJSON(cr.Spec)})
	return component.NewChild("ConfigMap", name, desired, r.configMaps.In(cr.Namespace),
		r.kube.CoreV1().ConfigMaps(cr.Namespace), corev1ac.ExtractConfigMap)
}

func (r *reconciler) deployment(cr *v1alpha1.Console, id string, lbls podspec.Labels) (component.Child[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration], error) {
	var none component.Child[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration]
	name := children.Name(id, Component)
	replicas := int32(DefaultReplicas)
	if cr.Spec.Replicas != nil {
		replicas = *cr.Spec.Replicas
	}
	tls := certificates.IssuerRefDefined(r.cfg.Certificates.ConsoleExternal, cr.Spec.ExternalCertificateSpec)
	volumes := []*corev1ac.VolumeApplyConfiguration{corev1ac.Volume().WithName("app-config").
		WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(name).WithDefaultMode(0o400).WithOptional(false).
			WithItems(corev1ac.KeyToPath().WithKey(AppConfigKey).WithPath(AppConfigKey)))}
	mounts := []*corev1ac.VolumeMountApplyConfiguration{corev1ac.VolumeMount().WithName("app-config").WithMountPath(AppConfigMountPath)}
	listener, scheme := fmt.Sprintf("listen %d;", r.cfg.HTTPPort), corev1.URISchemeHTTP
	if tls {
		volumes = append(volumes, podspec.SecretVolume("external-certificate", component.ExternalCertificateSecret(id, Component)))
		mounts = append(mounts, corev1ac.VolumeMount().WithName("external-certificate").WithMountPath(ExternalTLSDir).WithReadOnly(true))
		listener = fmt.Sprintf("listen %d ssl;\nssl_certificate %s/tls.crt;\nssl_certificate_key %s/tls.key;", r.cfg.HTTPPort, ExternalTLSDir, ExternalTLSDir)
		scheme = corev1.URISchemeHTTPS
	}
	probe := func() *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/").WithPort(intstr.FromInt32(r.cfg.HTTPPort)).WithScheme(scheme))
	}
	container := corev1ac.Container().
		WithName(Component).
		WithImage(cr.Spec.ConsoleImageRef).
		WithPorts(podspec.TCPPort("http", r.cfg.HTTPPort)).
		WithEnv(corev1ac.EnvVar().WithName(EndpointEnv).WithValue(r.cfg.Endpoint(cr.Spec.Balancerd)),
			corev1ac.EnvVar().WithName(ListenerEnv).WithValue(listener)).
		WithStartupProbe(probe().WithPeriodSeconds(1).WithFailureThreshold(10)).
		WithReadinessProbe(probe().WithPeriodSeconds(30).WithFailureThreshold(1)).
		WithLivenessProbe(probe().WithPeriodSeconds(30)).
		WithVolumeMounts(mounts...)
	if err := r.cfg.Pods.Container(container, cr.Spec.ResourceRequirements); err != nil {
		return none, err
	}
	// nginx-unprivileged runs as 101: the mounted files are readable to it.
	pod := corev1ac.PodSpec().WithContainers(container).WithVolumes(volumes...).
		WithSecurityContext(corev1ac.PodSecurityContext().WithFSGroup(101))
	if err := r.cfg.Pods.Pod(pod); err != nil {
		return none, err
	}
	desired := appsv1ac.Deployment(name, cr.Namespace).
		WithLabels(lbls.Object()).
		WithOwnerReferences(children.OwnerReference(cr, gvk)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas).
			WithSelector(podspec.Selector(lbls.Selector(name))).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(lbls.Pod(name)).WithSpec(pod)))
	return component.NewChild("Deployment", name, desired, r.deployments.In(cr.Namespace),
		r.kube.AppsV1().Deployments(cr.Namespace), appsv1ac.ExtractDeployment), nil
}

func (r *reconciler) service(cr *v1alpha1.Console, id string, lbls podspec.Labels) component.Child[*corev1.Service, *corev1ac.ServiceApplyConfiguration] {
	name := children.Name(id, Component)
	desired := corev1ac.Service(name, cr.Namespace).
		WithLabels(lbls.Object()).
		WithOwnerReferences(children.OwnerReference(cr, gvk)).
		WithSpec(podspec.HeadlessService(name, podspec.ServicePort("http", r.cfg.HTTPPort)))
	return component.NewChild("Service", name, desired, r.services.In(cr.Namespace),
		r.kube.CoreV1().Services(cr.Namespace), corev1ac.ExtractService)
}

// networkPolicy admits the configured CIDRs to the console's port
// (upstream's mz{id}-console-ingress).
func (r *reconciler) networkPolicy(cr *v1alpha1.Console, id string, lbls podspec.Labels) component.Child[*networkingv1.NetworkPolicy, *networkingv1ac.NetworkPolicyApplyConfiguration] {
	name := children.Name(id, "console-ingress")
	from := make([]*networkingv1ac.NetworkPolicyPeerApplyConfiguration, 0, len(r.cfg.IngressCIDRs))
	for _, cidr := range r.cfg.IngressCIDRs {
		from = append(from, networkingv1ac.NetworkPolicyPeer().WithIPBlock(networkingv1ac.IPBlock().WithCIDR(cidr)))
	}
	desired := networkingv1ac.NetworkPolicy(name, cr.Namespace).
		WithLabels(lbls.Object()).
		WithOwnerReferences(children.OwnerReference(cr, gvk)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(podspec.Selector(lbls.Default)).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(networkingv1ac.NetworkPolicyIngressRule().WithFrom(from...).
				WithPorts(networkingv1ac.NetworkPolicyPort().
					WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(r.cfg.HTTPPort)))))
	return component.NewChild("NetworkPolicy", name, desired, r.networkPolicies.In(cr.Namespace),
		r.kube.NetworkingV1().NetworkPolicies(cr.Namespace), networkingv1ac.ExtractNetworkPolicy)
}
