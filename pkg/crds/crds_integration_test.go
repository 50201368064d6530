package crds_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	v1alpha1 "github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/crds"
	"github.com/materializeinc/orchestratord/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	controlplane.Main(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c })
}

func clients(t *testing.T) (versioned.Interface, string) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ns, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "crds-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return versioned.NewForConfigOrDie(cp.Config), ns.Name
}

func ptr[T any](v T) *T { return &v }

func fullMaterialize(ns string) *v1alpha1.Materialize {
	return &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "full", Namespace: ns, Labels: map[string]string{"team": "db"}},
		Spec: v1alpha1.MaterializeSpec{
			EnvironmentdImageRef:          "materialize/environmentd:v26.0.0",
			EnvironmentdExtraArgs:         []string{"--log-filter=info"},
			EnvironmentdExtraEnv:          []corev1.EnvVar{{Name: "MZ_X", Value: "1"}},
			EnvironmentdIamRoleArn:        "arn:aws:iam::1:role/env",
			EnvironmentdConnectionRoleArn: "arn:aws:iam::1:role/conn",
			EnvironmentdResourceRequirements: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")},
			},
			EnvironmentdScratchVolumeStorageRequirement: ptr(resource.MustParse("10Gi")),
			BalancerdReplicas:            ptr(int32(3)),
			ConsoleReplicas:              ptr(int32(1)),
			ServiceAccountAnnotations:    map[string]string{"a": "b"},
			PodLabels:                    map[string]string{"l": "v"},
			RequestRollout:               "6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00",
			ForceRollout:                 "7a1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00",
			ForcePromote:                 "6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00",
			RolloutStrategy:              v1alpha1.RolloutManuallyPromote,
			RolloutRequestTimeout:        "90m",
			BackendSecretName:            "mz-backend",
			AuthenticatorKind:            v1alpha1.AuthenticatorPassword,
			EnableRBAC:                   true,
			EnvironmentID:                "0b0b0b0b-1111-4222-8333-444444444444",
			SystemParameterConfigmapName: "params",
			InternalCertificateSpec: &v1alpha1.MaterializeCertSpec{
				DNSNames:  []string{"mz.internal"},
				Duration:  "2160h",
				IssuerRef: &v1alpha1.CertificateIssuerRef{Name: "ca", Kind: "ClusterIssuer"},
			},
		},
	}
}

func TestAllCRDsEstablished(t *testing.T) {
	// Start already waited for Established; this proves each is served.
	mz, ns := clients(t)
	ctx := context.Background()
	if _, err := mz.MaterializeV1alpha1().Materializes(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("materializes: %v", err)
	}
	if _, err := mz.MaterializeV1alpha1().Balancers(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("balancers: %v", err)
	}
	if _, err := mz.MaterializeV1alpha1().Consoles(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("consoles: %v", err)
	}
}

func TestMaterializeReadsBackEqual(t *testing.T) {
	mz, ns := clients(t)
	ctx := context.Background()
	want := fullMaterialize(ns)
	if _, err := mz.MaterializeV1alpha1().Materializes(ns).Create(ctx, want, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := mz.MaterializeV1alpha1().Materializes(ns).Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
		a, _ := json.Marshal(want.Spec)
		b, _ := json.Marshal(got.Spec)
		t.Errorf("spec changed on the way through the API server:\nsent %s\ngot  %s", a, b)
	}
	if got.Labels["team"] != "db" {
		t.Errorf("labels lost: %v", got.Labels)
	}
}

func TestSchemaDefaultsApplied(t *testing.T) {
	mz, ns := clients(t)
	ctx := context.Background()
	created, err := mz.MaterializeV1alpha1().Materializes(ns).Create(ctx, &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "minimal", Namespace: ns},
		Spec:       v1alpha1.MaterializeSpec{EnvironmentdImageRef: "mz:1", BackendSecretName: "s"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's schema defaults, and none it lacks: the replica counts stay
	// unset (both operators run 2 pods for an unset count).
	s := created.Spec
	const nilUUID = "00000000-0000-0000-0000-000000000000"
	if s.RolloutStrategy != v1alpha1.RolloutWaitUntilReady || s.RolloutRequestTimeout != "24h" ||
		s.AuthenticatorKind != v1alpha1.AuthenticatorNone || s.RequestRollout != nilUUID || s.ForceRollout != nilUUID ||
		s.EnvironmentID != nilUUID || s.BalancerdReplicas != nil || s.ConsoleReplicas != nil {
		b, _ := json.Marshal(s)
		t.Errorf("defaults not upstream's: %s", b)
	}

	bal, err := mz.MaterializeV1alpha1().Balancers(ns).Create(ctx, &v1alpha1.Balancer{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns},
		Spec: v1alpha1.BalancerSpec{BalancerdImageRef: "b:1", StaticRouting: &v1alpha1.StaticRoutingConfig{
			EnvironmentdNamespace: ns, EnvironmentdServiceName: "env"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bal.Spec.Replicas != nil {
		t.Errorf("balancer replicas defaulted to %d; upstream's schema has no default", *bal.Spec.Replicas)
	}
	con, err := mz.MaterializeV1alpha1().Consoles(ns).Create(ctx, &v1alpha1.Console{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns},
		Spec:       v1alpha1.ConsoleSpec{ConsoleImageRef: "c:1", Balancerd: v1alpha1.BalancerdRef{ServiceName: "b", Namespace: ns}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if con.Spec.Balancerd.Scheme != v1alpha1.SchemeHTTP || con.Spec.AuthenticatorKind != v1alpha1.AuthenticatorNone {
		t.Errorf("console defaults not applied: %+v", con.Spec)
	}
}

func TestInvalidObjectsRejectedNamingTheField(t *testing.T) {
	mz, ns := clients(t)
	ctx := context.Background()
	valid := func(name string) *v1alpha1.Materialize {
		return &v1alpha1.Materialize{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       v1alpha1.MaterializeSpec{EnvironmentdImageRef: "mz:1", BackendSecretName: "s"},
		}
	}
	badStrategy := valid("bad-strategy")
	badStrategy.Spec.RolloutStrategy = "YOLO"
	noImage := valid("no-image")
	noImage.Spec.EnvironmentdImageRef = ""
	badUUID := valid("bad-uuid")
	badUUID.Spec.RequestRollout = "not-a-uuid"

	cases := []struct {
		name   string
		create func() error
		field  string
	}{
		{"bad rolloutStrategy", func() error {
			_, err := mz.MaterializeV1alpha1().Materializes(ns).Create(ctx, badStrategy, metav1.CreateOptions{})
			return err
		}, "spec.rolloutStrategy"},
		{"missing environmentdImageRef", func() error {
			_, err := mz.MaterializeV1alpha1().Materializes(ns).Create(ctx, noImage, metav1.CreateOptions{})
			return err
		}, "spec.environmentdImageRef"},
		{"requestRollout not a UUID", func() error {
			_, err := mz.MaterializeV1alpha1().Materializes(ns).Create(ctx, badUUID, metav1.CreateOptions{})
			return err
		}, "spec.requestRollout"},
		{"balancer with two routing blocks", func() error {
			_, err := mz.MaterializeV1alpha1().Balancers(ns).Create(ctx, &v1alpha1.Balancer{
				ObjectMeta: metav1.ObjectMeta{Name: "two-routes", Namespace: ns},
				Spec: v1alpha1.BalancerSpec{
					BalancerdImageRef: "b:1",
					StaticRouting:     &v1alpha1.StaticRoutingConfig{EnvironmentdNamespace: ns, EnvironmentdServiceName: "e"},
					FronteggRouting:   &v1alpha1.FronteggRoutingConfig{},
				},
			}, metav1.CreateOptions{})
			return err
		}, "exactly one of staticRouting or fronteggRouting"},
		{"balancer with no routing block", func() error {
			_, err := mz.MaterializeV1alpha1().Balancers(ns).Create(ctx, &v1alpha1.Balancer{
				ObjectMeta: metav1.ObjectMeta{Name: "no-route", Namespace: ns},
				Spec:       v1alpha1.BalancerSpec{BalancerdImageRef: "b:1"},
			}, metav1.CreateOptions{})
			return err
		}, "exactly one of staticRouting or fronteggRouting"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.create()
			if err == nil {
				t.Fatal("the API server accepted an invalid object")
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error does not name %q: %v", tc.field, err)
			}
		})
	}
}

func TestEnvironmentIDCannotChangeOnceSet(t *testing.T) {
	mz, ns := clients(t)
	ctx := context.Background()
	obj := fullMaterialize(ns)
	created, err := mz.MaterializeV1alpha1().Materializes(ns).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Spec.EnvironmentID = "99999999-1111-4222-8333-444444444444"
	_, err = mz.MaterializeV1alpha1().Materializes(ns).Update(ctx, created, metav1.UpdateOptions{})
	if err == nil || !strings.Contains(err.Error(), "environmentId cannot change once set") {
		t.Fatalf("want the environmentId rule to reject the change, got %v", err)
	}
}

func TestExplainHasDescriptions(t *testing.T) {
	// kubectl explain reads the OpenAPI v3 document the API server publishes.
	// The API server builds it after the CRD is established.
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	var raw []byte
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		raw, err = kube.Discovery().RESTClient().Get().AbsPath("/openapi/v3/apis/materialize.cloud/v1alpha1").DoRaw(ctx)
		return err == nil && strings.Contains(string(raw), `"cloud.materialize.v1alpha1.Materialize"`), nil
	})
	if err != nil {
		t.Fatalf("the OpenAPI v3 document of materialize.cloud/v1alpha1 not published with the Materialize schema: %v", err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Description string `json:"description"`
					Properties  map[string]struct {
						Description string   `json:"description"`
						Enum        []string `json:"enum"`
						Default     any      `json:"default"`
					} `json:"properties"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	schema, ok := doc.Components.Schemas["cloud.materialize.v1alpha1.Materialize"]
	if !ok {
		t.Fatalf("no Materialize schema published")
	}
	rs := schema.Properties["spec"].Properties["rolloutStrategy"]
	if !strings.Contains(rs.Description, "ManuallyPromote waits at ReadyToPromote") || len(rs.Enum) != 3 || rs.Default != "WaitUntilReady" {
		t.Errorf("spec.rolloutStrategy not explained: %+v", rs)
	}
}

// The quantity pattern controller-gen writes admits strings Kubernetes
// cannot parse or takes for ever to; the tightened schema
// (hack/crd-bounds) refuses them when written, naming the field, in
// every CRD and version, while every quantity people write (an integer
// included) is admitted.
func TestUnparsableQuantitiesRejectedNamingTheField(t *testing.T) {
	mz, ns := clients(t)
	ctx := context.Background()
	create := func(version, resource, spec string) error {
		body := `{"apiVersion":"materialize.cloud/` + version + `","kind":"` + kinds[resource] + `",` +
			`"metadata":{"generateName":"q-"},"spec":` + spec + `}`
		return mz.MaterializeV1alpha1().RESTClient().Post().AbsPath("/apis/materialize.cloud", version, "namespaces", ns, resource).
			Body([]byte(body)).Do(ctx).Error()
	}
	mzSpec := func(extra string) string {
		return `{"environmentdImageRef":"materialize/environmentd:v26.0.0","backendSecretName":"s",` + extra + `}`
	}
	balancerSpec := func(extra string) string {
		return `{"balancerdImageRef":"b:1","staticRouting":{"environmentdNamespace":"n","environmentdServiceName":"e"},` + extra + `}`
	}
	consoleSpec := func(extra string) string {
		return `{"consoleImageRef":"c:1","balancerd":{"serviceName":"b","namespace":"n","scheme":"http"},` + extra + `}`
	}
	wantMessage := "should match '" + crds.QuantityPattern + "'"
	refused := []struct{ version, resource, spec, field string }{
		// resource.ParseQuantity would take for ever on this one, and
		// Quantity.String 30 ms on every encoding of the next.
		{"v1alpha1", "materializes", mzSpec(`"environmentdResourceRequirements":{"limits":{"cpu":"1e-100000000"}}`), "spec.environmentdResourceRequirements.limits.cpu"},
		{"v1alpha1", "balancers", balancerSpec(`"resourceRequirements":{"limits":{"cpu":"1000000000000000001e9999"}}`), "spec.resourceRequirements.limits.cpu"},
		{"v1alpha1", "materializes", mzSpec(`"environmentdResourceRequirements":{"requests":{"cpu":"1e1.5"}}`), "spec.environmentdResourceRequirements.requests.cpu"},
		{"v1", "materializes", mzSpec(`"environmentdResourceRequirements":{"limits":{"memory":"1e99999999999999999999"}}`), "spec.environmentdResourceRequirements.limits.memory"},
		{"v1alpha1", "materializes", mzSpec(`"environmentdScratchVolumeStorageRequirement":"2e0.5Gi"`), "spec.environmentdScratchVolumeStorageRequirement"},
		{"v1", "materializes", mzSpec(`"balancerdResourceRequirements":{"requests":{"cpu":".5e.5"}}`), "spec.balancerdResourceRequirements.requests.cpu"},
		{"v1alpha1", "materializes", mzSpec(`"environmentdExtraEnv":[{"name":"X","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"1e1.5"}}}]`), "spec.environmentdExtraEnv[0].valueFrom.resourceFieldRef.divisor"},
		{"v1alpha1", "balancers", balancerSpec(`"resourceRequirements":{"limits":{"cpu":"1e1.5"}}`), "spec.resourceRequirements.limits.cpu"},
		{"v1alpha1", "consoles", consoleSpec(`"resourceRequirements":{"requests":{"memory":"1e1.5"}}`), "spec.resourceRequirements.requests.memory"},
	}
	// And on a million digits (at most crds.QuantityMaxLength characters).
	long := create("v1alpha1", "materializes", mzSpec(`"environmentdResourceRequirements":{"limits":{"cpu":"`+strings.Repeat("7", 65)+`"}}`))
	if long == nil || !strings.Contains(long.Error(), "spec.environmentdResourceRequirements.limits.cpu") || !strings.Contains(strings.ToLower(long.Error()), "long") {
		t.Errorf("a quantity of 65 characters: %v, want it refused by name", long)
	}
	// And a map of more quantities than crds.QuantityMaxResources.
	var many []string
	for i := range 33 {
		many = append(many, fmt.Sprintf(`"example.com/r%d":"1"`, i))
	}
	tooMany := create("v1alpha1", "consoles", consoleSpec(`"resourceRequirements":{"requests":{`+strings.Join(many, ",")+`}}`))
	if tooMany == nil || !strings.Contains(tooMany.Error(), "spec.resourceRequirements.requests") || !strings.Contains(tooMany.Error(), "32") {
		t.Errorf("33 resources: %v, want them refused by name", tooMany)
	}
	for _, tc := range refused {
		t.Run("refused "+tc.version+" "+tc.field, func(t *testing.T) {
			err := create(tc.version, tc.resource, tc.spec)
			if err == nil {
				t.Fatal("the API server accepted a quantity Kubernetes cannot parse")
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), wantMessage) {
				t.Errorf("error does not name %q with %q: %v", tc.field, wantMessage, err)
			}
		})
	}
	// Admitted objects are stored, at v1alpha1: a v1 one would need the
	// conversion webhook, which this control plane does not run.
	admitted := []struct{ version, resource, spec string }{
		{"v1alpha1", "materializes", mzSpec(`"environmentdResourceRequirements":{"requests":{"cpu":2,"memory":"4Gi"},"limits":{"cpu":"1500m","memory":"1e9"}},"environmentdScratchVolumeStorageRequirement":"10Gi"`)},
		{"v1alpha1", "materializes", mzSpec(`"environmentdResourceRequirements":{"requests":{"cpu":"+.5","memory":"1.e-3"},"limits":{"cpu":"1E+3","memory":"1e-99"}}`)},
		{"v1alpha1", "materializes", mzSpec(`"consoleResourceRequirements":{"requests":{"cpu":"0.5","memory":"128974848"}},"environmentdExtraEnv":[{"name":"X","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"1m"}}}]`)},
		{"v1alpha1", "balancers", balancerSpec(`"resourceRequirements":{"limits":{"cpu":1,"memory":"1Gi"}}`)},
		{"v1alpha1", "consoles", consoleSpec(`"resourceRequirements":{"requests":{"memory":"64Mi"}}`)},
	}
	for _, tc := range admitted {
		if err := create(tc.version, tc.resource, tc.spec); err != nil {
			t.Errorf("%s %s refused: %v", tc.version, tc.resource, err)
		}
	}
}

var kinds = map[string]string{"materializes": "Materialize", "balancers": "Balancer", "consoles": "Console"}

// Every list and map of the specs is bounded (hack/crd-bounds): one past
// the bound is refused, naming the field, and the bound itself admitted.
func TestCollectionsAreBounded(t *testing.T) {
	mz, ns := clients(t)
	ctx := context.Background()
	create := func(spec string) error {
		body := `{"apiVersion":"materialize.cloud/v1alpha1","kind":"Materialize","metadata":{"generateName":"bounds-"},` +
			`"spec":{"environmentdImageRef":"materialize/environmentd:v26.0.0","backendSecretName":"s",` + spec + `}}`
		return mz.MaterializeV1alpha1().RESTClient().Post().Namespace(ns).Resource("materializes").Body([]byte(body)).Do(ctx).Error()
	}
	args := func(n int) string { return `"environmentdExtraArgs":["` + strings.Repeat(`--a","`, n-1) + `--a"]` }
	labels := func(n int) string {
		l := make([]string, n)
		for i := range l {
			l[i] = fmt.Sprintf(`"l%d":"v"`, i)
		}
		return `"podLabels":{` + strings.Join(l, ",") + `}`
	}
	if err := create(args(crds.MaxItems) + "," + labels(crds.MaxProperties)); err != nil {
		t.Errorf("a list and a map at their bounds refused: %v", err)
	}
	for field, spec := range map[string]string{
		"spec.environmentdExtraArgs": args(crds.MaxItems + 1),
		"spec.podLabels":             labels(crds.MaxProperties + 1),
	} {
		if err := create(spec); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s one past its bound: %v, want it refused by name", field, err)
		}
	}
}
