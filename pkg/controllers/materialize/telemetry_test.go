package materialize

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/materializeinc/orchestratord/pkg/imageref"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
)

// configFrom is the Config the controllers build from these flags.
func configFrom(t *testing.T, args ...string) (*Config, error) {
	t.Helper()
	var c Config
	fs := pflag.NewFlagSet("environment", pflag.ContinueOnError)
	c.AddFlags(fs)
	// The required flags first; args come later and win.
	if err := fs.Parse(append([]string{"--cloud-provider=local", "--region=kind"}, args...)); err != nil {
		t.Fatal(err)
	}
	return &c, c.Complete()
}

// As upstream's, the program has no default cloud provider or region: a
// silent one would give a production install's environments a
// development cluster's ids. Its ports are refused at start where
// upstream's are, not when the first apply fails.
func TestCloudProviderAndRegionRequiredAndPortsBounded(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{nil, "--cloud-provider is required"},
		{[]string{"--region=us-east-1"}, "--cloud-provider is required"},
		{[]string{"--cloud-provider=gcp"}, "--region is required"},
		{[]string{"--cloud-provider=gcp", "--region=us-central1"}, ""},
		// Ports are what upstream's u16 flags take, less 0.
		{[]string{"--cloud-provider=gcp", "--region=us-central1", "--balancerd-http-port=70000"}, "--balancerd-http-port: 70000 is not a port"},
		{[]string{"--cloud-provider=gcp", "--region=us-central1", "--environmentd-sql-port=0"}, "--environmentd-sql-port: 0 is not a port"},
		{[]string{"--cloud-provider=gcp", "--region=us-central1", "--console-http-port=-1"}, "--console-http-port: -1 is not a port"},
		{[]string{"--cloud-provider=gcp", "--region=us-central1", "--console-http-port=65535"}, ""},
	} {
		var c Config
		fs := pflag.NewFlagSet("environment", pflag.ContinueOnError)
		c.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := c.Complete()
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}

// --segment-api-key and --segment-client-side reach environmentd where
// upstream's generation.rs puts them (after the OpenTelemetry resources), and
// the stand-in, parsing with upstream's clap table, accepts them; without a
// key nothing is passed, as upstream passes nothing for None.
func TestSegmentArgs(t *testing.T) {
	e := testEnv(testMaterialize("materialize/environmentd:v26.35.0", ""))
	if args := e.generationArgs(1); slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--segment-") }) {
		t.Errorf("segment flags by default: %q", args)
	}
	cfg, err := configFrom(t, "--segment-client-side")
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	if args := e.generationArgs(1); slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--segment-") }) {
		t.Errorf("--segment-client-side without a key: %q", args)
	}
	for _, clientSide := range []bool{false, true} {
		flags := []string{"--segment-api-key=k3y"}
		want := []string{"--opentelemetry-resource=environment_name=prod", "--segment-api-key=k3y"}
		if clientSide {
			flags = append(flags, "--segment-client-side")
			want = append(want, "--segment-client-side")
		}
		if e.cfg, err = configFrom(t, flags...); err != nil {
			t.Fatal(err)
		}
		args := e.generationArgs(1)
		i := slices.Index(args, want[0])
		if i < 0 || len(args) < i+len(want)+1 || !slices.Equal(args[i:i+len(want)], want) || strings.HasPrefix(args[i+len(want)], "--segment-") {
			t.Errorf("%q: args %q, want %q in a row", flags, args, want)
		}
		sts, cms := render(t, e, 3)
		argv, lookup, read := podInput(t, sts, cms, secrets())
		if _, exit := standin.Check(imageref.MustParseVersion("26.35.0"), argv, lookup, read); exit != nil {
			t.Errorf("%q: environmentd refuses the generation: exit %d: %s", flags, exit.Code, exit.Message)
		}
	}
}

// --image-pull-secrets go to environmentd's pod, its ServiceAccount (which
// clusterd's pods run as) and balancerd's and the console's pod settings;
// a name no Secret can have is refused.
func TestImagePullSecrets(t *testing.T) {
	e := testEnv(testMaterialize("materialize/environmentd:v26.35.0", ""))
	if sts, _ := render(t, e, 1); sts.Spec.Template.Spec.ImagePullSecrets != nil || e.serviceAccount().ImagePullSecrets != nil {
		t.Errorf("pull secrets by default: pod %v, ServiceAccount %v", sts.Spec.Template.Spec.ImagePullSecrets, e.serviceAccount().ImagePullSecrets)
	}
	cfg, err := configFrom(t, "--image-pull-secrets=registry-a,registry-b", "--image-pull-secrets=registry-c")
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	want := []corev1.LocalObjectReference{{Name: "registry-a"}, {Name: "registry-b"}, {Name: "registry-c"}}
	sts, _ := render(t, e, 1)
	if got := sts.Spec.Template.Spec.ImagePullSecrets; !slices.Equal(got, want) {
		t.Errorf("environmentd's pod: %v, want %v", got, want)
	}
	var sa corev1.ServiceAccount
	if err := json.Unmarshal([]byte(jsonString(e.serviceAccount())), &sa); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sa.ImagePullSecrets, want) {
		t.Errorf("environmentd's ServiceAccount: %v, want %v", sa.ImagePullSecrets, want)
	}
	names := []string{"registry-a", "registry-b", "registry-c"}
	if got := cfg.BalancerdPods().ImagePullSecrets; !slices.Equal(got, names) {
		t.Errorf("balancerd's pods: %v", got)
	}
	if got := cfg.ConsolePods().ImagePullSecrets; !slices.Equal(got, names) {
		t.Errorf("the console's pods: %v", got)
	}
	if _, err := configFrom(t, "--image-pull-secrets=Registry_A"); err == nil || !strings.Contains(err.Error(), "--image-pull-secrets") {
		t.Errorf("an invalid Secret name: %v", err)
	}
}
