// Package console reconciles Consoles: an environment's web console
// ConfigMap, Deployment, Service and NetworkPolicy, and the Console's Ready
// condition, which mirrors the Deployment's Available condition.
package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/kubernetes"
	appsv1listers "k8s.io/client-go/listers/apps/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	networkingv1listers "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	mzac "github.com/materializeinc/orchestratord/pkg/client/applyconfiguration/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	mzlisters "github.com/materializeinc/orchestratord/pkg/client/listers/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/component"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
)

// Name is the controller's name.
const Name = "console"

// Component is the value of children.ComponentLabel and the suffix of the
// child objects' names (mz{id}-console).
const Component = "console"

// HTTPPort is the console's only port.
const HTTPPort = 8080

// BalancerdHTTPPort is the balancerd port the console sends API requests to.
const BalancerdHTTPPort = 6876

// DefaultReplicas is used when spec.replicas is unset (the CRD defaults it too).
const DefaultReplicas = 2

const (
	// AppConfigKey is the ConfigMap key of the console's configuration.
	AppConfigKey = "app-config.json"
	// AppConfigMountPath is where the ConfigMap is mounted, read-only; the
	// console's web server serves app-config.json from there.
	AppConfigMountPath = "/usr/share/nginx/html/app-config"
	// AppConfigHashAnnotation on the pod template holds the SHA-256 of
	// app-config.json, so a configuration change rolls the pods.
	AppConfigHashAnnotation = "materialize.cloud/app-config-hash"
	// EndpointEnv is the environment variable with balancerd's HTTP URL.
	EndpointEnv = "MZ_ENDPOINT"
)

var gvk = v1alpha1.SchemeGroupVersion.WithKind("Console")

// AppConfig is app-config.json, the console's runtime configuration:
//
//	{"version":"1","auth":{"mode":"<spec.authenticatorKind>"}}
//
// version is the format's version; auth.mode tells the console how users
// log in (None, Password, Sasl, Frontegg, Oidc).
type AppConfig struct {
	Version string        `json:"version"`
	Auth    AppConfigAuth `json:"auth"`
}

// AppConfigAuth is the auth block of AppConfig.
type AppConfigAuth struct {
	Mode v1alpha1.AuthenticatorKind `json:"mode"`
}

// AppConfigJSON renders app-config.json for a Console spec.
func AppConfigJSON(spec v1alpha1.ConsoleSpec) string {
	mode := spec.AuthenticatorKind
	if mode == "" {
		mode = v1alpha1.AuthenticatorNone
	}
	raw, err := json.Marshal(AppConfig{Version: "1", Auth: AppConfigAuth{Mode: mode}})
	if err != nil {
		panic(err) // a struct of strings always marshals
	}
	return string(raw)
}

// Endpoint is balancerd's HTTP URL as the console reaches it.
func Endpoint(ref v1alpha1.BalancerdRef) string {
	scheme := ref.Scheme
	if scheme == "" {
		scheme = v1alpha1.SchemeHTTP
	}
	return fmt.Sprintf("%s://%s.%s.svc.cluster.local:%d", scheme, ref.ServiceName, ref.Namespace, BalancerdHTTPPort)
}

// kind is how the shared status code reads and writes Consoles.
func kind(mz versioned.Interface) component.Kind[*v1alpha1.Console, *mzac.ConsoleApplyConfiguration] {
	return component.Kind[*v1alpha1.Console, *mzac.ConsoleApplyConfiguration]{
		Status:             func(c *v1alpha1.Console) v1alpha1.ComponentStatus { return c.Status },
		SpecResourceID:     func(c *v1alpha1.Console) string { return c.Spec.ResourceID },
		ApplyConfiguration: mzac.Console,
		Client: func(ns string) component.StatusClient[*v1alpha1.Console, *mzac.ConsoleApplyConfiguration] {
			return mz.MaterializeV1alpha1().Consoles(ns)
		},
	}
}

type reconciler struct {
	kube            kubernetes.Interface
	consoles        mzlisters.ConsoleLister
	configMaps      corev1listers.ConfigMapLister
	deployments     appsv1listers.DeploymentLister
	services        corev1listers.ServiceLister
	networkPolicies networkingv1listers.NetworkPolicyLister
	recent          *component.RecentWrites
	owner           component.Owner[*v1alpha1.Console, *mzac.ConsoleApplyConfiguration]
}

// New builds the console controller. Child objects are watched through
// d.KubeInformers, which only hold objects labelled with the resource id.
func New(d controller.Deps) *controller.Controller {
	log := d.Log
	if log == nil {
		log = zap.NewNop()
	}
	crInformer := d.MZInformers.Materialize().V1alpha1().Consoles()
	cmInformer := d.KubeInformers.Core().V1().ConfigMaps()
	deployInformer := d.KubeInformers.Apps().V1().Deployments()
	svcInformer := d.KubeInformers.Core().V1().Services()
	npInformer := d.KubeInformers.Networking().V1().NetworkPolicies()
	recent := component.NewRecentWrites()
	r := &reconciler{
		kube:            d.Kube,
		consoles:        crInformer.Lister(),
		configMaps:      cmInformer.Lister(),
		deployments:     deployInformer.Lister(),
		services:        svcInformer.Lister(),
		networkPolicies: npInformer.Lister(),
		recent:          recent,
		owner:           component.NewOwner(kind(d.MZ), recent, d.Recorder),
	}
	c := controller.New(Name, r, d.Workers, log, d.Metrics, component.ListKeys(r.consoles.List),
		crInformer.Informer().HasSynced, cmInformer.Informer().HasSynced, deployInformer.Informer().HasSynced,
		svcInformer.Informer().HasSynced, npInformer.Informer().HasSynced)
	component.MustAddEventHandler(crInformer.Informer(), c.Handler())
	for _, inf := range []cache.SharedIndexInformer{cmInformer.Informer(), deployInformer.Informer(), svcInformer.Informer(), npInformer.Informer()} {
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
	cr, id, err := r.owner.ResourceID(ctx, key, cr)
	if err != nil {
		return controller.Result{}, err
	}
	config := AppConfigJSON(cr.Spec)
	if _, err := r.configMap(cr, id, config).Apply(ctx, r.recent, cr, key); err != nil {
		return controller.Result{}, err
	}
	dep, err := r.deployment(cr, id, config).Apply(ctx, r.recent, cr, key)
	if err != nil {
		return controller.Result{}, err
	}
	if _, err := r.service(cr, id).Apply(ctx, r.recent, cr, key); err != nil {
		return controller.Result{}, err
	}
	if _, err := r.networkPolicy(cr, id).Apply(ctx, r.recent, cr, key); err != nil {
		return controller.Result{}, err
	}
	return controller.Result{}, r.owner.WriteReady(ctx, key, cr, id, dep)
}

func (r *reconciler) configMap(cr *v1alpha1.Console, id, config string) component.Child[*corev1.ConfigMap, *corev1ac.ConfigMapApplyConfiguration] {
	name := children.Name(id, Component)
	desired := corev1ac.ConfigMap(name, cr.Namespace).
		WithLabels(children.Labels(id, Component, name)).
		WithOwnerReferences(children.OwnerReference(cr, gvk)).
		WithData(map[string]string{AppConfigKey: config})
	return component.NewChild("ConfigMap", name, desired, r.configMaps.ConfigMaps(cr.Namespace).Get,
		r.kube.CoreV1().ConfigMaps(cr.Namespace), corev1ac.ExtractConfigMap)
}

func (r *reconciler) deployment(cr *v1alpha1.Console, id, config string) component.Child[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration] {
	name := children.Name(id, Component)
	lbls := children.Labels(id, Component, name)
	replicas := int32(DefaultReplicas)
	if cr.Spec.Replicas != nil {
		replicas = *cr.Spec.Replicas
	}
	hash := sha256.Sum256([]byte(config))
	annotations := maps.Clone(cr.Spec.PodAnnotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AppConfigHashAnnotation] = hex.EncodeToString(hash[:])
	container := corev1ac.Container().
		WithName(Component).
		WithImage(cr.Spec.ConsoleImageRef).
		WithPorts(component.TCPPort("http", HTTPPort)).
		WithEnv(corev1ac.EnvVar().WithName(EndpointEnv).WithValue(Endpoint(cr.Spec.Balancerd))).
		WithReadinessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/").WithPort(intstr.FromString("http")))).
		WithVolumeMounts(
			corev1ac.VolumeMount().WithName("app-config").WithMountPath(AppConfigMountPath).WithReadOnly(true),
			corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"),
		).
		WithSecurityContext(children.RestrictedContainerSecurity())
	if rr := component.Resources(cr.Spec.ResourceRequirements); rr != nil {
		container.WithResources(rr)
	}
	desired := appsv1ac.Deployment(name, cr.Namespace).
		WithLabels(lbls).
		WithOwnerReferences(children.OwnerReference(cr, gvk)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{children.NameLabel: name})).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(component.PodLabels(cr.Spec.PodLabels, lbls)).
				WithAnnotations(annotations).
				WithSpec(corev1ac.PodSpec().
					WithAutomountServiceAccountToken(false).
					WithSecurityContext(children.RestrictedPodSecurity()).
					WithContainers(container).
					WithVolumes(
						corev1ac.Volume().WithName("app-config").
							WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(name)),
						// The root filesystem is read-only; the web server writes temporary files here.
						corev1ac.Volume().WithName("tmp").
							WithEmptyDir(corev1ac.EmptyDirVolumeSource().WithSizeLimit(resource.MustParse("64Mi"))),
					))))
	return component.NewChild("Deployment", name, desired, r.deployments.Deployments(cr.Namespace).Get,
		r.kube.AppsV1().Deployments(cr.Namespace), appsv1ac.ExtractDeployment)
}

func (r *reconciler) service(cr *v1alpha1.Console, id string) component.Child[*corev1.Service, *corev1ac.ServiceApplyConfiguration] {
	name := children.Name(id, Component)
	desired := corev1ac.Service(name, cr.Namespace).
		WithLabels(children.Labels(id, Component, name)).
		WithOwnerReferences(children.OwnerReference(cr, gvk)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(map[string]string{children.NameLabel: name}).
			WithPorts(component.ServicePort("http", HTTPPort)))
	return component.NewChild("Service", name, desired, r.services.Services(cr.Namespace).Get,
		r.kube.CoreV1().Services(cr.Namespace), corev1ac.ExtractService)
}

// networkPolicy admits traffic to the console's HTTP port from anywhere.
func (r *reconciler) networkPolicy(cr *v1alpha1.Console, id string) component.Child[*networkingv1.NetworkPolicy, *networkingv1ac.NetworkPolicyApplyConfiguration] {
	name := children.Name(id, Component)
	desired := networkingv1ac.NetworkPolicy(name, cr.Namespace).
		WithLabels(children.Labels(id, Component, name)).
		WithOwnerReferences(children.OwnerReference(cr, gvk)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{children.NameLabel: name})).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(networkingv1ac.NetworkPolicyIngressRule().
				WithPorts(networkingv1ac.NetworkPolicyPort().
					WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(HTTPPort)))))
	return component.NewChild("NetworkPolicy", name, desired, r.networkPolicies.NetworkPolicies(cr.Namespace).Get,
		r.kube.NetworkingV1().NetworkPolicies(cr.Namespace), networkingv1ac.ExtractNetworkPolicy)
}
