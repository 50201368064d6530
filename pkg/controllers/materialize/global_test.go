package materialize

import (
	"encoding/json"
	"testing"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	mzlabels "github.com/materializeinc/orchestratord/pkg/labels"
)

// The listeners file upstream writes for the None authenticator in the
// 0.147.0 schema, derived from create_v0_147_0_listeners_config: field
// order is the Rust structs', maps are sorted.
const listeners147None = `{"version":"0.147.0",` +
	`"sql":{"external":{"addr":"0.0.0.0:6875","authenticator_kind":"None","allowed_roles":"Normal","enable_tls":false},` +
	`"internal":{"addr":"0.0.0.0:6877","authenticator_kind":"None","allowed_roles":"NormalAndInternal","enable_tls":false}},` +
	`"http":{"external":{"addr":"0.0.0.0:6876","authenticator_kind":"None","allowed_roles":"Normal","enable_tls":false,` +
	`"routes":{"base":true,"webhook":true,"internal":false,"metrics":false,"profiling":false,"mcp_agent":true,"mcp_developer":true,"console_config":true}},` +
	`"internal":{"addr":"0.0.0.0:6878","authenticator_kind":"None","allowed_roles":"NormalAndInternal","enable_tls":false,` +
	`"routes":{"base":true,"webhook":true,"internal":true,"metrics":true,"profiling":true,"mcp_agent":true,"mcp_developer":true,"console_config":false}}}}`

func TestListenersFilePerSchema(t *testing.T) {
	if got := testEnv(testMaterialize("materialize/environmentd:v26.31.9", "")).listenersJSON(); got != listeners147None {
		t.Errorf("26.31.9 / None:\n got %s\nwant %s", got, listeners147None)
	}
	// From 26.32.0-dev.0 on, and for tags that are not versions, the
	// 26.32.0 schema: each enabled group carries its listener's roles; with
	// a password, internal and profiling admit only internal users.
	for _, image := range []string{"materialize/environmentd:v26.32.0-dev.0", "materialize/environmentd:latest", "materialize/environmentd@sha256:00"} {
		var cfg struct {
			Version string
			HTTP    map[string]struct {
				Routes map[string]struct {
					Enabled      bool   `json:"enabled"`
					AllowedRoles string `json:"allowed_roles"`
				}
			}
		}
		raw := testEnv(testMaterialize(image, v1alpha1.AuthenticatorPassword)).listenersJSON()
		if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
			t.Fatal(err)
		}
		ext := cfg.HTTP["external"].Routes
		if cfg.Version != "26.32.0" || ext["internal"].AllowedRoles != "Internal" || ext["profiling"].AllowedRoles != "Internal" ||
			ext["base"].AllowedRoles != "NormalAndInternal" || ext["metrics"].Enabled || len(cfg.HTTP) != 2 {
			t.Errorf("%s / Password: %s", image, raw)
		}
		if _, ok := cfg.HTTP["metrics"]; !ok {
			t.Errorf("%s / Password: no metrics listener: %s", image, raw)
		}
	}
}

func TestServiceAccountIAMRole(t *testing.T) {
	mz := testMaterialize("materialize/environmentd:v26.35.0", "")
	mz.Spec.EnvironmentdIamRoleArn = "arn:aws:iam::1:role/spec"
	mz.Spec.ServiceAccountAnnotations = map[string]string{IAMRoleAnnotation: "arn:aws:iam::1:role/annotation", "a": "b"}
	e := testEnv(mz)
	if got := e.serviceAccount().Annotations[IAMRoleAnnotation]; got != "arn:aws:iam::1:role/annotation" {
		t.Errorf("outside AWS the annotation is the user's: %q", got)
	}
	e.cfg.CloudProvider, e.cfg.AWSAccountID = "aws", "1"
	if got := e.serviceAccount().Annotations[IAMRoleAnnotation]; got != "arn:aws:iam::1:role/spec" {
		t.Errorf("on AWS the (deprecated) spec field wins, as upstream: %q", got)
	}
	mz.Spec.EnvironmentdIamRoleArn = ""
	e.cfg.EnvironmentdIAMRoleARN = "arn:aws:iam::1:role/flag"
	if got := e.serviceAccount().Annotations[IAMRoleAnnotation]; got != "arn:aws:iam::1:role/flag" {
		t.Errorf("the operator's default applies without the spec field: %q", got)
	}
	if e.serviceAccount().Annotations["a"] != "b" {
		t.Error("other annotations lost")
	}
	args := e.generationArgs(1)
	for _, want := range []string{"--aws-account-id=1", "--aws-secrets-controller-tags=Environment=prod"} {
		found := false
		for _, a := range args {
			found = found || a == want
		}
		if !found {
			t.Errorf("AWS args lack %s", want)
		}
	}
}

func TestNetworkPoliciesAreOptIn(t *testing.T) {
	e := testEnv(testMaterialize("materialize/environmentd:v26.35.0", ""))
	if p := e.networkPolicies(); len(p) != 0 {
		t.Fatalf("%d policies without a switch", len(p))
	}
	e.cfg.NetworkPoliciesInternalEnabled = true
	e.cfg.NetworkPoliciesIngressEnabled, e.cfg.NetworkPoliciesIngressCIDRs = true, []string{"10.0.0.0/8"}
	e.cfg.NetworkPoliciesEgressEnabled, e.cfg.NetworkPoliciesEgressCIDRs = true, []string{"0.0.0.0/0"}
	e.cfg.OperatorNamespace = "orchestratord"
	e.cfg.OperatorPodSelectorLabels = []string{"app.kubernetes.io/name=orchestratord", "app.kubernetes.io/component=controllers"}
	names := map[string]bool{}
	for _, p := range e.networkPolicies() {
		names[*p.Name] = true
		if *p.Name != "mzabcdefghij-allow-orchestratord" {
			continue
		}
		// The operator's pods reach environmentd's HTTP ports: the leader API.
		rule := p.Spec.Ingress[0]
		from := rule.From[0]
		if from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "orchestratord" ||
			from.PodSelector.MatchLabels["app.kubernetes.io/component"] != "controllers" {
			t.Errorf("allow-orchestratord admits %+v", from)
		}
		if len(rule.Ports) != 2 || rule.Ports[0].Port.IntVal != 6876 || rule.Ports[1].Port.IntVal != 6878 {
			t.Errorf("allow-orchestratord ports %+v", rule.Ports)
		}
		if p.Spec.PodSelector.MatchLabels[mzlabels.App] != "environmentd" {
			t.Errorf("allow-orchestratord selects %v", p.Spec.PodSelector.MatchLabels)
		}
	}
	for _, want := range []string{"mzabcdefghij-allow-all-within-environment", "mzabcdefghij-allow-orchestratord",
		"mzabcdefghij-sql-and-http-ingress", "mzabcdefghij-sources-and-sinks-egress"} {
		if !names[want] {
			t.Errorf("no %s in %v", want, names)
		}
	}
}

func TestConsoleImageTag(t *testing.T) {
	mz := testMaterialize("registry.example/materialize/environmentd:v26.5.0", "")
	mz.Status.LastCompletedRolloutEnvironmentdImageRef = "registry.example/materialize/environmentd:v26.4.0"
	e := testEnv(mz)
	for _, c := range []struct {
		def  string
		tags []string
		want string
	}{
		// The active (last completed) image's tag, not the requested one.
		{"", nil, "registry.example/materialize/console:v26.4.0"},
		{"v26.38.1", nil, "registry.example/materialize/console:v26.38.1"},
		{"v26.38.1", []string{"v26.5.0=25.1.0", "v26.4.0=25.0.9", "v26.4.0=ignored"}, "registry.example/materialize/console:25.0.9"},
	} {
		e.cfg.ConsoleImageTagDefault, e.cfg.ConsoleImageTagMap = c.def, c.tags
		if got := e.consoleImage(); got != c.want {
			t.Errorf("default %q, map %v: %s, want %s", c.def, c.tags, got, c.want)
		}
	}
}
