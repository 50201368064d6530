// Package balancer reconciles Balancers: an environment's balancerd
// Deployment and Service, and the Balancer's Ready condition, which mirrors
// the Deployment's Available condition.
package balancer

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"

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
const Name = "balancer"

// Component is the app label (upstream's app_name) and the suffix of the
// child objects' names (mz{id}-balancerd).
const Component = "balancerd"

// Config is how balancerd runs, from upstream's operator flags.
type Config struct {
	Pods         podspec.PodSettings
	Certificates certificates.Defaults
	// Ports balancerd listens on (--balancerd-sql-port, --balancerd-http-port,
	// --balancerd-internal-http-port) and environmentd's it forwards to
	// (--environmentd-sql-port, --environmentd-http-port).
	SQLPort, HTTPPort, InternalHTTPPort       int32
	EnvironmentdSQLPort, EnvironmentdHTTPPort int32
	// QuietFor is how long a new Balancer gets no Ready condition while its
	// Deployment is not available (component.Owner.QuietFor); zero is
	// component.DefaultQuietFor, negative none.
	QuietFor time.Duration
}

// DefaultConfig has upstream's default ports.
func DefaultConfig() Config {
	return Config{SQLPort: 6875, HTTPPort: 6876, InternalHTTPPort: 8080, EnvironmentdSQLPort: 6875, EnvironmentdHTTPPort: 6876}
}

// DefaultReplicas is used when spec.replicas is unset (the CRD defaults it too).
const DefaultReplicas = 2

var gvk = v1alpha1.SchemeGroupVersion.WithKind("Balancer")

// kind is how the shared status code reads and writes Balancers.
func kind(mz versioned.Interface) component.Kind[*v1alpha1.Balancer, *mzac.BalancerApplyConfiguration] {
	return component.Kind[*v1alpha1.Balancer, *mzac.BalancerApplyConfiguration]{
		App:                Component,
		Status:             func(b *v1alpha1.Balancer) v1alpha1.ComponentStatus { return b.Status },
		SpecResourceID:     func(b *v1alpha1.Balancer) string { return b.Spec.ResourceID },
		ApplyConfiguration: mzac.Balancer,
		TypeMeta:           metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Balancer"},
		Client: func(ns string) component.StatusClient[*v1alpha1.Balancer, *mzac.BalancerApplyConfiguration] {
			return mz.MaterializeV1alpha1().Balancers(ns)
		},
	}
}

type reconciler struct {
	cfg         Config
	kube        kubeclient.Interface
	dyn         dynamic.Interface
	balancers   mzlisters.BalancerLister
	deployments controller.Lister[*appsv1.Deployment]
	services    controller.Lister[*corev1.Service]
	recent      *recent.Writes
	owner       component.Owner[*v1alpha1.Balancer, *mzac.BalancerApplyConfiguration]
}

// New builds the balancer controller. Child objects are watched through
// d.KubeInformers, which only hold objects labelled with the resource id.
func New(d controller.Deps, cfg Config) *controller.Controller {
	log := d.Log
	if log == nil {
		log = zap.NewNop()
	}
	crInformer := d.MZInformers.Materialize().V1alpha1().Balancers()
	recent := recent.NewWrites()
	r := &reconciler{
		cfg:         cfg,
		kube:        d.Kube,
		dyn:         d.Dynamic,
		balancers:   crInformer.Lister(),
		deployments: controller.DeploymentLister(d.KubeInformers),
		services:    controller.ServiceLister(d.KubeInformers),
		recent:      recent,
		owner:       component.NewOwner(kind(d.MZ), recent, d.Recorder, cfg.QuietFor),
	}
	c := controller.New(Name, r, d.Workers, log, d.Metrics, component.ListKeys(r.balancers.List),
		crInformer.Informer().HasSynced, r.deployments.Informer().HasSynced, r.services.Informer().HasSynced)
	component.MustAddEventHandler(crInformer.Informer(), c.Handler())
	component.MustAddEventHandler(r.deployments.Informer(), c.OwnerHandler(gvk.Kind))
	component.MustAddEventHandler(r.services.Informer(), c.OwnerHandler(gvk.Kind))
	return c
}

// Reconcile brings the Balancer's children and status to their desired state.
func (r *reconciler) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	cr, found, err := r.owner.Load(ctx, key, func(ns, name string) (*v1alpha1.Balancer, error) {
		return r.balancers.Balancers(ns).Get(name)
	})
	if !found || err != nil {
		return controller.Result{}, err
	}
	result, err := r.reconcile(ctx, key, cr)
	r.owner.ReportRefused(cr, err)
	return result, err
}

func (r *reconciler) reconcile(ctx context.Context, key string, cr *v1alpha1.Balancer) (controller.Result, error) {
	cr, id, err := r.owner.ResourceID(ctx, key, cr)
	if err != nil {
		return controller.Result{}, err
	}
	lbls := podspec.NewLabels(cr.Name, cr.Namespace, id, Component)
	certified, err := component.ApplyExternalCertificate(ctx, r.dyn, r.cfg.Certificates.BalancerdExternal, cr.Spec.ExternalCertificateSpec, cr, gvk, id, Component, lbls)
	if err != nil {
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
	recheck, err := r.owner.WriteReady(ctx, key, cr, id, dep)
	if certified {
		recheck = apply.WithinCertificateRecheck(recheck)
	}
	return controller.Result{RequeueAfter: recheck}, err
}

// Args are balancerd's command line, upstream's: listeners, static routing
// to environmentd's Service, TLS towards environmentd when an internal
// issuer is named, and external TLS from the mounted certificate when an
// external issuer is named (else plain, said explicitly).
func (c Config) Args(spec v1alpha1.BalancerSpec) ([]string, error) {
	args := []string{
		"service",
		fmt.Sprintf("--pgwire-listen-addr=0.0.0.0:%d", c.SQLPort),
		fmt.Sprintf("--https-listen-addr=0.0.0.0:%d", c.HTTPPort),
		fmt.Sprintf("--internal-http-listen-addr=0.0.0.0:%d", c.InternalHTTPPort),
	}
	switch {
	case spec.StaticRouting != nil && spec.FronteggRouting != nil:
		return nil, fmt.Errorf("spec: staticRouting and fronteggRouting are both set; choose one")
	case spec.FronteggRouting != nil:
		return nil, fmt.Errorf("spec.fronteggRouting: Frontegg routing is not implemented (upstream does not implement it either)")
	case spec.StaticRouting == nil:
		return nil, fmt.Errorf("spec: no routing configuration: set staticRouting")
	}
	host := fmt.Sprintf("%s.%s.svc.cluster.local", spec.StaticRouting.EnvironmentdServiceName, spec.StaticRouting.EnvironmentdNamespace)
	args = append(args,
		fmt.Sprintf("--https-resolver-template=%s:%d", host, c.EnvironmentdHTTPPort),
		fmt.Sprintf("--static-resolver-addr=%s:%d", host, c.EnvironmentdSQLPort))
	if certificates.IssuerRefDefined(c.Certificates.Internal, spec.InternalCertificateSpec) {
		args = append(args, "--internal-tls")
	}
	if certificates.IssuerRefDefined(c.Certificates.BalancerdExternal, spec.ExternalCertificateSpec) {
		return append(args, "--tls-mode=require", "--tls-cert="+ExternalTLSDir+"/tls.crt", "--tls-key="+ExternalTLSDir+"/tls.key"), nil
	}
	return append(args, "--tls-mode=disable"), nil
}

// ExternalTLSDir is where balancerd's external certificate is mounted.
const ExternalTLSDir = "/etc/external_tls"

func (r *reconciler) deployment(cr *v1alpha1.Balancer, id string, lbls podspec.Labels) (component.Child[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration], error) {
	var none component.Child[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration]
	name := children.Name(id, Component)
	args, err := r.cfg.Args(cr.Spec)
	if err != nil {
		return none, component.SpecError{Err: err}
	}
	replicas := int32(DefaultReplicas)
	if cr.Spec.Replicas != nil {
		replicas = *cr.Spec.Replicas
	}
	probe := func(path string) *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath(path).WithPort(intstr.FromInt32(r.cfg.InternalHTTPPort))).
			WithSuccessThreshold(1).WithTimeoutSeconds(1)
	}
	container := corev1ac.Container().
		WithName(Component).
		WithImage(cr.Spec.BalancerdImageRef).
		WithPorts(podspec.TCPPort("pgwire", r.cfg.SQLPort), podspec.TCPPort("http", r.cfg.HTTPPort), podspec.TCPPort("internal-http", r.cfg.InternalHTTPPort)).
		WithArgs(args...).
		WithStartupProbe(probe("/api/readyz").WithFailureThreshold(20).WithInitialDelaySeconds(3).WithPeriodSeconds(3)).
		WithReadinessProbe(probe("/api/readyz").WithFailureThreshold(3).WithPeriodSeconds(10)).
		WithLivenessProbe(probe("/api/livez").WithFailureThreshold(3).WithInitialDelaySeconds(8).WithPeriodSeconds(10))
	if err := r.cfg.Pods.Container(container, cr.Spec.ResourceRequirements); err != nil {
		return none, err
	}
	pod := corev1ac.PodSpec().
		WithSecurityContext(corev1ac.PodSecurityContext().WithFSGroup(999).WithRunAsUser(999).WithRunAsGroup(999))
	if certificates.IssuerRefDefined(r.cfg.Certificates.BalancerdExternal, cr.Spec.ExternalCertificateSpec) {
		pod.WithVolumes(podspec.SecretVolume("external-certificate", component.ExternalCertificateSecret(id, Component)))
		container.WithVolumeMounts(corev1ac.VolumeMount().WithName("external-certificate").WithMountPath(ExternalTLSDir).WithReadOnly(true))
	}
	if err := r.cfg.Pods.Pod(pod.WithContainers(container)); err != nil {
		return none, err
	}
	template := corev1ac.PodTemplateSpec().WithLabels(lbls.Pod(name)).WithSpec(pod)
	if a := r.cfg.Pods.ScrapeAnnotations(r.cfg.InternalHTTPPort); a != nil {
		template.WithAnnotations(a)
	}
	desired := appsv1ac.Deployment(name, cr.Namespace).
		WithLabels(lbls.Object()).
		WithOwnerReferences(children.OwnerReference(cr, gvk)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas).
			WithSelector(podspec.Selector(lbls.Selector(name))).
			// Surge a whole new set before the old pods go: connections drain
			// from balancerd pods that still run.
			WithStrategy(appsv1ac.DeploymentStrategy().WithRollingUpdate(appsv1ac.RollingUpdateDeployment().WithMaxSurge(intstr.FromString("100%")))).
			WithTemplate(template))
	return component.NewChild("Deployment", name, desired, r.deployments.In(cr.Namespace),
		r.kube.AppsV1().Deployments(cr.Namespace), appsv1ac.ExtractDeployment), nil
}

func (r *reconciler) service(cr *v1alpha1.Balancer, id string, lbls podspec.Labels) component.Child[*corev1.Service, *corev1ac.ServiceApplyConfiguration] {
	name := children.Name(id, Component)
	desired := corev1ac.Service(name, cr.Namespace).
		WithLabels(lbls.Object()).
		WithOwnerReferences(children.OwnerReference(cr, gvk)).
		WithSpec(podspec.HeadlessService(name, podspec.ServicePort("http", r.cfg.HTTPPort), podspec.ServicePort("pgwire", r.cfg.SQLPort)))
	return component.NewChild("Service", name, desired, r.services.In(cr.Namespace),
		r.kube.CoreV1().Services(cr.Namespace), corev1ac.ExtractService)
}
