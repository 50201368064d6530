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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	appsv1listers "k8s.io/client-go/listers/apps/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	mzac "github.com/materializeinc/orchestratord/pkg/client/applyconfiguration/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	mzlisters "github.com/materializeinc/orchestratord/pkg/client/listers/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
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

type reconciler struct {
	kube        kubernetes.Interface
	mz          versioned.Interface
	balancers   mzlisters.BalancerLister
	deployments appsv1listers.DeploymentLister
	services    corev1listers.ServiceLister
	recorder    record.EventRecorder
	recent      *component.RecentWrites
}

// New builds the balancer controller. Child objects are watched through
// d.KubeInformers, which only hold objects labelled with the resource id.
func New(d controller.Deps) *controller.Controller {
	log := d.Log
	if log == nil {
		log = zap.NewNop()
	}
	recorder := d.Recorder
	if recorder == nil {
		recorder = &record.FakeRecorder{} // drops events
	}
	crInformer := d.MZInformers.Materialize().V1alpha1().Balancers()
	deployInformer := d.KubeInformers.Apps().V1().Deployments()
	svcInformer := d.KubeInformers.Core().V1().Services()
	r := &reconciler{
		kube:        d.Kube,
		mz:          d.MZ,
		balancers:   crInformer.Lister(),
		deployments: deployInformer.Lister(),
		services:    svcInformer.Lister(),
		recorder:    recorder,
		recent:      component.NewRecentWrites(),
	}
	listKeys := func() []string {
		all, err := r.balancers.List(labels.Everything())
		if err != nil {
			return nil
		}
		keys := make([]string, 0, len(all))
		for _, b := range all {
			keys = append(keys, b.Namespace+"/"+b.Name)
		}
		return keys
	}
	c := controller.New(Name, r, d.Workers, log, d.Metrics, listKeys,
		crInformer.Informer().HasSynced, deployInformer.Informer().HasSynced, svcInformer.Informer().HasSynced)
	mustAdd(crInformer.Informer(), c.Handler())
	mustAdd(deployInformer.Informer(), c.OwnerHandler(gvk.Kind))
	mustAdd(svcInformer.Informer(), c.OwnerHandler(gvk.Kind))
	return c
}

func mustAdd(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) {
	if _, err := inf.AddEventHandler(h); err != nil {
		// Only fails once the informer has stopped, which New never sees.
		panic(fmt.Sprintf("adding event handler: %v", err))
	}
}

// Reconcile brings the Balancer's children and status to their desired state.
func (r *reconciler) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return controller.Result{}, nil // not retryable
	}
	cr, err := r.balancers.Balancers(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Garbage collection removes the children through their owner references.
		r.recent.Forget(key)
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	cr, _, _ = component.Current(ctx, r.recent, key, "", cr, true, nil)

	cr, id, err := r.resourceID(ctx, key, cr)
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
	return controller.Result{}, r.status(ctx, key, cr, id, dep)
}

// resourceID returns the id in the children's names: status.resourceId,
// else spec.resourceId, else a random one, written to status before any
// child is created. The assignment reads the object from the API server and
// applies with its resourceVersion, so a stale cache cannot assign twice.
func (r *reconciler) resourceID(ctx context.Context, key string, cr *v1alpha1.Balancer) (*v1alpha1.Balancer, string, error) {
	if cr.Status.ResourceID != "" {
		return cr, cr.Status.ResourceID, nil
	}
	client := r.mz.MaterializeV1alpha1().Balancers(cr.Namespace)
	live, err := client.Get(ctx, cr.Name, metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	if live.Status.ResourceID != "" {
		return live, live.Status.ResourceID, nil
	}
	id := live.Spec.ResourceID
	if id == "" {
		id = children.NewResourceID()
	}
	st := mzac.ComponentStatus().WithResourceID(id)
	if c := meta.FindStatusCondition(live.Status.Conditions, component.ReadyCondition); c != nil {
		st.WithConditions(component.ConditionApplyConfiguration(*c)) // keep the condition this manager owns
	}
	desired := mzac.Balancer(live.Name, live.Namespace).WithResourceVersion(live.ResourceVersion).WithStatus(st)
	var out *v1alpha1.Balancer
	if _, err := apply.Object(ctx, live, true, desired, ownedStatus, func(ctx context.Context, ac *mzac.BalancerApplyConfiguration, opts metav1.ApplyOptions) (*v1alpha1.Balancer, error) {
		var err error
		out, err = client.ApplyStatus(ctx, ac, opts)
		return out, err
	}); err != nil {
		return nil, "", fmt.Errorf("writing status.resourceId: %w", err)
	}
	r.recent.Put(key, "", out)
	r.recorder.Eventf(out, corev1.EventTypeNormal, "ResourceIDAssigned", "Child objects are named mz%s-…", id)
	return out, id, nil
}

// ownedStatus is the part of the live status this controller writes: the
// resource id and the Ready condition. Comparing it with the desired status
// (rather than the whole object) ignores fields of other writers and the
// object's empty TypeMeta in informer caches.
func ownedStatus(live *v1alpha1.Balancer, _ string) (*mzac.BalancerApplyConfiguration, error) {
	st := mzac.ComponentStatus()
	if live.Status.ResourceID != "" {
		st.WithResourceID(live.Status.ResourceID)
	}
	if c := meta.FindStatusCondition(live.Status.Conditions, component.ReadyCondition); c != nil {
		st.WithConditions(component.ConditionApplyConfiguration(*c))
	}
	return mzac.Balancer(live.Name, live.Namespace).WithStatus(st), nil
}

// status writes the Ready condition, when it changed, and emits an Event
// when its status changed.
func (r *reconciler) status(ctx context.Context, key string, cr *v1alpha1.Balancer, id string, dep *appsv1.Deployment) error {
	prev := meta.FindStatusCondition(cr.Status.Conditions, component.ReadyCondition)
	conds := append([]metav1.Condition(nil), cr.Status.Conditions...)
	meta.SetStatusCondition(&conds, component.ReadyFromDeployment(dep, cr.Generation)) // keeps lastTransitionTime unless the status changes
	ready := *meta.FindStatusCondition(conds, component.ReadyCondition)

	desired := mzac.Balancer(cr.Name, cr.Namespace).
		WithStatus(mzac.ComponentStatus().WithResourceID(id).WithConditions(component.ConditionApplyConfiguration(ready)))
	client := r.mz.MaterializeV1alpha1().Balancers(cr.Namespace)
	var out *v1alpha1.Balancer
	wrote, err := apply.Object(ctx, cr, true, desired, ownedStatus, func(ctx context.Context, ac *mzac.BalancerApplyConfiguration, opts metav1.ApplyOptions) (*v1alpha1.Balancer, error) {
		var err error
		out, err = client.ApplyStatus(ctx, ac, opts)
		return out, err
	})
	if err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	if !wrote {
		return nil
	}
	r.recent.Put(key, "", out)
	if prev == nil || prev.Status != ready.Status {
		eventType, reason := component.TransitionEvent(prev, ready)
		r.recorder.Eventf(out, eventType, reason, "Ready is %s: %s: %s", ready.Status, ready.Reason, ready.Message)
	}
	return nil
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
			fmt.Sprintf("--static-resolver-addr=%s:%d", host, PgwirePort),
			fmt.Sprintf("--https-resolver-template=%s:%d", host, HTTPPort))
	}
	return args
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
	client := r.kube.AppsV1().Deployments(cr.Namespace)
	return component.Child[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration]{
		Kind: "Deployment", Name: name, Desired: desired,
		Cached:  r.deployments.Deployments(cr.Namespace).Get,
		Get:     client.Get,
		Extract: appsv1ac.ExtractDeployment,
		Write:   client.Apply,
	}
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
	client := r.kube.CoreV1().Services(cr.Namespace)
	return component.Child[*corev1.Service, *corev1ac.ServiceApplyConfiguration]{
		Kind: "Service", Name: name, Desired: desired,
		Cached:  r.services.Services(cr.Namespace).Get,
		Get:     client.Get,
		Extract: corev1ac.ExtractService,
		Write:   client.Apply,
	}
}
