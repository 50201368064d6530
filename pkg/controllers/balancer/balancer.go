// Package balancer reconciles Balancers: an environment's balancerd
// Deployment and Service, and the Balancer's Ready condition, which mirrors
// the Deployment's Available condition.
package balancer

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	appsv1listers "k8s.io/client-go/listers/apps/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	mzac "github.com/materializeinc/orchestratord/pkg/client/applyconfiguration/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	mzlisters "github.com/materializeinc/orchestratord/pkg/client/listers/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/children"
	"github.com/materializeinc/orchestratord/pkg/controllers/component"
	"github.com/materializeinc/orchestratord/pkg/controllers/controller"
)

// Name is the controller's name.
const Name = "balancer"

// Component is the value of children.ComponentLabel and the suffix of the
// child objects' names (mz{id}-balancerd).
const Component = "balancerd"

// Ports of balancerd.
const (
	PgwirePort       = 6875
	HTTPPort         = 6876
	InternalHTTPPort = 8080
)

// DefaultReplicas is used when spec.replicas is unset (the CRD defaults it too).
const DefaultReplicas = 2

var gvk = v1alpha1.SchemeGroupVersion.WithKind("Balancer")

// kind is how the shared status code reads and writes Balancers.
func kind(mz versioned.Interface) component.Kind[*v1alpha1.Balancer, *mzac.BalancerApplyConfiguration] {
	return component.Kind[*v1alpha1.Balancer, *mzac.BalancerApplyConfiguration]{
		Status:             func(b *v1alpha1.Balancer) v1alpha1.ComponentStatus { return b.Status },
		SpecResourceID:     func(b *v1alpha1.Balancer) string { return b.Spec.ResourceID },
		ApplyConfiguration: mzac.Balancer,
		Client: func(ns string) component.StatusClient[*v1alpha1.Balancer, *mzac.BalancerApplyConfiguration] {
			return mz.MaterializeV1alpha1().Balancers(ns)
		},
	}
}

type reconciler struct {
	kube        kubernetes.Interface
	balancers   mzlisters.BalancerLister
	deployments appsv1listers.DeploymentLister
	services    corev1listers.ServiceLister
	recent      *component.RecentWrites
	owner       component.Owner[*v1alpha1.Balancer, *mzac.BalancerApplyConfiguration]
}

// New builds the balancer controller. Child objects are watched through
// d.KubeInformers, which only hold objects labelled with the resource id.
func New(d controller.Deps) *controller.Controller {
	log := d.Log
	if log == nil {
		log = zap.NewNop()
	}
	crInformer := d.MZInformers.Materialize().V1alpha1().Balancers()
	deployInformer := d.KubeInformers.Apps().V1().Deployments()
	svcInformer := d.KubeInformers.Core().V1().Services()
	recent := component.NewRecentWrites()
	r := &reconciler{
		kube:        d.Kube,
		balancers:   crInformer.Lister(),
		deployments: deployInformer.Lister(),
		services:    svcInformer.Lister(),
		recent:      recent,
		owner:       component.NewOwner(kind(d.MZ), recent, d.Recorder),
	}
	c := controller.New(Name, r, d.Workers, log, d.Metrics, component.ListKeys(r.balancers.List),
		crInformer.Informer().HasSynced, deployInformer.Informer().HasSynced, svcInformer.Informer().HasSynced)
	component.MustAddEventHandler(crInformer.Informer(), c.Handler())
	component.MustAddEventHandler(deployInformer.Informer(), c.OwnerHandler(gvk.Kind))
	component.MustAddEventHandler(svcInformer.Informer(), c.OwnerHandler(gvk.Kind))
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
	cr, id, err := r.owner.ResourceID(ctx, key, cr)
	if err != nil {
		return controller.Result{}, err
	}
	dep, err := r.deployment(cr, id).Apply(ctx, r.recent, cr, key)
	if err != nil {
		return controller.Result{}, err
	}
	if _, err := r.service(cr, id).Apply(ctx, r.recent, cr, key); err != nil {
		return controller.Result{}, err
	}
	return controller.Result{}, r.owner.WriteReady(ctx, key, cr, id, dep)
}

// Args are balancerd's command line. With static routing every connection
// goes to the named environmentd Service (SQL 6875, HTTP 6876); Frontegg
// routing has no settings in the Balancer yet, so it adds none.
func Args(spec v1alpha1.BalancerSpec) []string {
	args := []string{
		"service",
		fmt.Sprintf("--pgwire-listen-addr=0.0.0.0:%d", PgwirePort),
		fmt.Sprintf("--https-listen-addr=0.0.0.0:%d", HTTPPort),
		fmt.Sprintf("--internal-http-listen-addr=0.0.0.0:%d", InternalHTTPPort),
	}
	if sr := spec.StaticRouting; sr != nil {
		host := fmt.Sprintf("%s.%s.svc.cluster.local", sr.EnvironmentdServiceName, sr.EnvironmentdNamespace)
		args = append(args,
			fmt.Sprintf("--https-resolver-template=%s:%d", host, HTTPPort),
			fmt.Sprintf("--static-resolver-addr=%s:%d", host, PgwirePort))
	}
	// External TLS comes with cert-manager certificates; until then balancerd
	// serves plain TCP, said explicitly as upstream does.
	return append(args, "--tls-mode=disable")
}

func (r *reconciler) deployment(cr *v1alpha1.Balancer, id string) component.Child[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration] {
	name := children.Name(id, Component)
	lbls := children.Labels(id, Component, name)
	replicas := int32(DefaultReplicas)
	if cr.Spec.Replicas != nil {
		replicas = *cr.Spec.Replicas
	}
	probe := func(path string) *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath(path).WithPort(intstr.FromString("internal-http")))
	}
	container := corev1ac.Container().
		WithName(Component).
		WithImage(cr.Spec.BalancerdImageRef).
		WithArgs(Args(cr.Spec)...).
		WithPorts(component.TCPPort("pgwire", PgwirePort), component.TCPPort("http", HTTPPort), component.TCPPort("internal-http", InternalHTTPPort)).
		WithReadinessProbe(probe("/api/readyz")).
		WithLivenessProbe(probe("/api/livez")).
		WithSecurityContext(children.RestrictedContainerSecurity())
	if rr := component.Resources(cr.Spec.ResourceRequirements); rr != nil {
		container.WithResources(rr)
	}
	podMeta := corev1ac.PodTemplateSpec().WithLabels(component.PodLabels(cr.Spec.PodLabels, lbls))
	if len(cr.Spec.PodAnnotations) > 0 {
		podMeta.WithAnnotations(cr.Spec.PodAnnotations)
	}
	desired := appsv1ac.Deployment(name, cr.Namespace).
		WithLabels(lbls).
		WithOwnerReferences(children.OwnerReference(cr, gvk)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{children.NameLabel: name})).
			WithTemplate(podMeta.WithSpec(corev1ac.PodSpec().
				WithAutomountServiceAccountToken(false).
				WithSecurityContext(children.RestrictedPodSecurity()).
				WithContainers(container))))
	return component.NewChild("Deployment", name, desired, r.deployments.Deployments(cr.Namespace).Get,
		r.kube.AppsV1().Deployments(cr.Namespace), appsv1ac.ExtractDeployment)
}

func (r *reconciler) service(cr *v1alpha1.Balancer, id string) component.Child[*corev1.Service, *corev1ac.ServiceApplyConfiguration] {
	name := children.Name(id, Component)
	desired := corev1ac.Service(name, cr.Namespace).
		WithLabels(children.Labels(id, Component, name)).
		WithOwnerReferences(children.OwnerReference(cr, gvk)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(map[string]string{children.NameLabel: name}).
			WithPorts(component.ServicePort("pgwire", PgwirePort), component.ServicePort("http", HTTPPort), component.ServicePort("internal-http", InternalHTTPPort)))
	return component.NewChild("Service", name, desired, r.services.Services(cr.Namespace).Get,
		r.kube.CoreV1().Services(cr.Namespace), corev1ac.ExtractService)
}
