// Package upstream builds objects as upstream orchestratord (Rust) makes
// them, so tests can show this operator adopting them in place. Each
// function is a hand translation of upstream's code (cited per function),
// written separately from this operator's reconcilers: a test that compares
// the two compares two readings of upstream, not the code with itself.
package upstream

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/materializeinc/orchestratord/pkg/controllers/podspec"
)

// FieldManager is upstream's (src/orchestratord/src/k8s.rs).
const FieldManager = "orchestratord.materialize.cloud"

// Finalizer is upstream's on every Materialize (controller/materialize.rs).
const Finalizer = "orchestratord.materialize.cloud/materialize"

// Owner is the custom resource that owns a component's children.
type Owner struct {
	APIVersion, Kind, Name, Namespace string
	UID                               types.UID
	ResourceID                        string
}

// Settings are the operator flags of upstream's Helm chart by default:
// --enable-security-context always, Prometheus scrape annotations on,
// balancerd and console default resources from its values.yaml.
type Settings struct {
	SecurityContext, PrometheusScrape bool
	ImagePullPolicy                   corev1.PullPolicy
	DefaultResources                  *corev1.ResourceRequirements
}

// ChartDefaults are Settings as upstream's chart renders them by default
// (misc/helm-charts/operator: balancerd/console defaultResources limits
// memory 256Mi, requests cpu 500m memory 256Mi).
func ChartDefaults(pull corev1.PullPolicy) Settings {
	return Settings{
		SecurityContext: true, PrometheusScrape: true, ImagePullPolicy: pull,
		DefaultResources: &corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
	}
}

// defaultLabels are ManagedResource::default_labels of a Balancer/Console.
func (o Owner) defaultLabels(app string) map[string]string {
	return map[string]string{
		"materialize.cloud/organization-name":      o.Name,
		"materialize.cloud/organization-namespace": o.Namespace,
		"materialize.cloud/mz-resource-id":         o.ResourceID,
		"materialize.cloud/app":                    app,
	}
}

func recommended(app string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/managed-by": "materialize-operator",
		"app.kubernetes.io/part-of":    "materialize",
		"app.kubernetes.io/name":       app,
		"app":                          app,
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// meta is managed_resource_meta (crd.rs): default + recommended labels and
// an owner reference with blockOwnerDeletion and no controller.
func (o Owner) meta(name, app string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: o.Namespace,
		Labels: merge(o.defaultLabels(app), recommended(app)),
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID, BlockOwnerDeletion: ptrTo(true),
		}},
	}
}

func (s Settings) containerSecurity() *corev1.SecurityContext {
	if !s.SecurityContext {
		return nil
	}
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptrTo(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		AllowPrivilegeEscalation: ptrTo(false),
	}
}

func (o Owner) name(suffix string) string { return fmt.Sprintf("mz%s-%s", o.ResourceID, suffix) }

// BalancerDeployment is create_deployment_object (controller/balancer.rs)
// for a Balancer with static routing to environmentd, no TLS and the
// default ports.
func BalancerDeployment(o Owner, s Settings, image string, replicas int32, environmentdService, environmentdNamespace string) *appsv1.Deployment {
	name := o.name("balancerd")
	selector := merge(o.defaultLabels("balancerd"), map[string]string{
		"materialize.cloud/name": name, "app": "balancerd", "materialize.cloud/app": "balancerd",
	})
	host := fmt.Sprintf("%s.%s.svc.cluster.local", environmentdService, environmentdNamespace)
	probe := func(path string) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080), Path: path}}
	}
	var annotations map[string]string
	if s.PrometheusScrape {
		annotations = map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080", "prometheus.io/path": "/metrics", "prometheus.io/scheme": "http"}
	}
	var resources corev1.ResourceRequirements
	if s.DefaultResources != nil {
		resources = *s.DefaultResources
	}
	surge := intstr.FromString("100%")
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: o.meta(name, "balancerd"),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Strategy: appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotations, Labels: merge(selector, recommended("balancerd"))},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "balancerd", Image: image, ImagePullPolicy: s.ImagePullPolicy,
						Ports: []corev1.ContainerPort{
							{ContainerPort: 6875, Name: "pgwire", Protocol: corev1.ProtocolTCP},
							{ContainerPort: 6876, Name: "http", Protocol: corev1.ProtocolTCP},
							{ContainerPort: 8080, Name: "internal-http", Protocol: corev1.ProtocolTCP},
						},
						Args: []string{
							"service",
							"--pgwire-listen-addr=0.0.0.0:6875",
							"--https-listen-addr=0.0.0.0:6876",
							"--internal-http-listen-addr=0.0.0.0:8080",
							fmt.Sprintf("--https-resolver-template=%s:6876", host),
							fmt.Sprintf("--static-resolver-addr=%s:6875", host),
							"--tls-mode=disable",
						},
						StartupProbe: &corev1.Probe{ProbeHandler: probe("/api/readyz"), FailureThreshold: 20, InitialDelaySeconds: 3,
							PeriodSeconds: 3, SuccessThreshold: 1, TimeoutSeconds: 1},
						ReadinessProbe: &corev1.Probe{ProbeHandler: probe("/api/readyz"), FailureThreshold: 3, PeriodSeconds: 10,
							SuccessThreshold: 1, TimeoutSeconds: 1},
						LivenessProbe: &corev1.Probe{ProbeHandler: probe("/api/livez"), FailureThreshold: 3, InitialDelaySeconds: 8,
							PeriodSeconds: 10, SuccessThreshold: 1, TimeoutSeconds: 1},
						Resources:       resources,
						SecurityContext: s.containerSecurity(),
					}},
					SecurityContext: &corev1.PodSecurityContext{FSGroup: ptrTo[int64](999), RunAsUser: ptrTo[int64](999), RunAsGroup: ptrTo[int64](999)},
				},
			},
		},
	}
}

// headless is create_service_object (balancer.rs, console.rs).
func (o Owner) headless(name, app string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: o.meta(name, app),
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone,
			Selector: map[string]string{"materialize.cloud/name": name},
			Ports:    ports,
		},
	}
}

func port(name string, n int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: n, TargetPort: intstr.FromInt32(n)}
}

// BalancerService is balancerd's Service.
func BalancerService(o Owner) *corev1.Service {
	return o.headless(o.name("balancerd"), "balancerd", port("http", 6876), port("pgwire", 6875))
}

// ConsoleService is the console's Service.
func ConsoleService(o Owner) *corev1.Service {
	return o.headless(o.name("console"), "console", port("http", 8080))
}

// ConsoleConfigMap is create_console_app_configmap_object (console.rs):
// serde_json of AppConfig {version, auth: {mode}} without dnsNames.
func ConsoleConfigMap(o Owner, image, version, authMode string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: o.meta(o.name("console"), "console"),
		Data:       map[string]string{"app-config.json": fmt.Sprintf(`{"version":%q,"auth":{"mode":%q}}`, version, authMode)},
	}
}

// ConsoleDeployment is create_console_deployment_object (console.rs)
// without TLS, reaching balancerd over http.
func ConsoleDeployment(o Owner, s Settings, image string, replicas int32, balancerdService, balancerdNamespace string) *appsv1.Deployment {
	name := o.name("console")
	selector := merge(o.defaultLabels("console"), map[string]string{
		"materialize.cloud/name": name, "app": "console", "materialize.cloud/app": "console",
	})
	handler := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}}
	var resources corev1.ResourceRequirements
	if s.DefaultResources != nil {
		resources = *s.DefaultResources
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: o.meta(name, "console"),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: merge(selector, recommended("console"))},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "console", Image: image, ImagePullPolicy: s.ImagePullPolicy,
						Ports: []corev1.ContainerPort{{ContainerPort: 8080, Name: "http", Protocol: corev1.ProtocolTCP}},
						Env: []corev1.EnvVar{
							{Name: "MZ_ENDPOINT", Value: fmt.Sprintf("http://%s.%s.svc.cluster.local:6876", balancerdService, balancerdNamespace)},
							{Name: "MZ_NGINX_LISTENER_CONFIG", Value: "listen 8080;"},
						},
						StartupProbe:    &corev1.Probe{ProbeHandler: handler, PeriodSeconds: 1, FailureThreshold: 10},
						ReadinessProbe:  &corev1.Probe{ProbeHandler: handler, PeriodSeconds: 30, FailureThreshold: 1},
						LivenessProbe:   &corev1.Probe{ProbeHandler: handler, PeriodSeconds: 30},
						Resources:       resources,
						SecurityContext: s.containerSecurity(),
						VolumeMounts:    []corev1.VolumeMount{{Name: "app-config", MountPath: "/usr/share/nginx/html/app-config"}},
					}},
					Volumes: []corev1.Volume{{Name: "app-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: name}, DefaultMode: ptrTo[int32](256), Optional: ptrTo(false),
						Items: []corev1.KeyToPath{{Key: "app-config.json", Path: "app-config.json"}},
					}}}},
					SecurityContext: &corev1.PodSecurityContext{FSGroup: ptrTo[int64](101)},
				},
			},
		},
	}
}

// ApplyPatch is how upstream's apply_resource writes obj: a server-side
// apply of the whole object under FieldManager, forced. Use it with a typed
// client's Patch(ctx, name, types.ApplyPatchType, body, opts).
func ApplyPatch(obj any) ([]byte, metav1.PatchOptions, error) {
	body, err := json.Marshal(obj)
	return body, metav1.PatchOptions{FieldManager: FieldManager, Force: ptrTo(true)}, err
}

// Pods are these settings as this operator's podspec.PodSettings, to run
// a controller configured as upstream's chart configures upstream.
func (s Settings) Pods() podspec.PodSettings {
	return podspec.PodSettings{
		ImagePullPolicy: s.ImagePullPolicy, SecurityContext: s.SecurityContext,
		PrometheusScrape: s.PrometheusScrape, DefaultResources: s.DefaultResources,
	}
}

func ptrTo[T any](v T) *T { return &v }
