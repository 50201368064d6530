package materialize

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/environmentd"
	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/fixture"
	standin "github.com/materializeinc/orchestratord/test/standin/environmentd"
	"github.com/materializeinc/orchestratord/test/standin/licensekey"
)

// The environmentd stand-in parses its command line as environmentd does
// (clap tables generated from upstream). These tests hand it the pod the
// operator renders — args, environment and mounted files resolved as the
// kubelet would — so a flag environmentd does not know, a missing required
// one, a malformed listeners file or a missing license key fails here.

func testMaterialize(image string, auth v1alpha1.AuthenticatorKind) *v1alpha1.Materialize {
	return &v1alpha1.Materialize{
		ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: "envs", UID: "9a0b5a1e-0000-4000-8000-000000000001",
			Annotations: map[string]string{ForceRolloutAnnotation: "1"}},
		Spec: v1alpha1.MaterializeSpec{
			EnvironmentdImageRef:         image,
			BackendSecretName:            "backend",
			EnvironmentID:                "0b0b0b0b-1111-4222-8333-444444444444",
			RequestRollout:               "6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00",
			AuthenticatorKind:            auth,
			PodLabels:                    map[string]string{"team": "db"},
			PodAnnotations:               map[string]string{"example.com/owner": "db"},
			EnvironmentdExtraArgs:        []string{"--startup-log-filter=info"},
			SystemParameterConfigmapName: "system-params",
		},
		Status: v1alpha1.MaterializeStatus{ResourceID: "abcdefghij"},
	}
}

func testEnv(mz *v1alpha1.Materialize) env {
	cfg := DefaultConfig()
	return env{mz: mz, id: mz.Status.ResourceID, cfg: &cfg}
}

// podInput resolves a StatefulSet's container as the kubelet would start
// it: its args, its environment (secret references read from secrets) and
// the files its volumes mount.
func podInput(t *testing.T, sts *appsv1.StatefulSet, configMaps map[string]map[string]string, secrets map[string]*corev1.Secret) (
	[]string, func(string) (string, bool), func(string) ([]byte, error)) {
	t.Helper()
	pod := sts.Spec.Template.Spec
	c := pod.Containers[0]
	secretData := func(name, key string) (string, bool) {
		s, ok := secrets[name]
		if !ok {
			return "", false
		}
		if v, ok := s.StringData[key]; ok {
			return v, true
		}
		v, ok := s.Data[key]
		return string(v), ok
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := secretData(ref.Name, ref.Key)
			if !ok && (ref.Optional == nil || !*ref.Optional) {
				t.Fatalf("env %s: Secret %s has no %s: the kubelet would not start the pod", e.Name, ref.Name, ref.Key)
			}
			if ok {
				env[e.Name] = v
			}
		}
	}
	files := map[string][]byte{}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Fatalf("mount %s has no volume", m.Name)
		}
		var data map[string]string
		var items []corev1.KeyToPath
		switch {
		case v.ConfigMap != nil:
			data, items = configMaps[v.ConfigMap.Name], v.ConfigMap.Items
			if data == nil && (v.ConfigMap.Optional == nil || !*v.ConfigMap.Optional) {
				t.Fatalf("volume %s: ConfigMap %s missing", v.Name, v.ConfigMap.Name)
			}
		case v.Secret != nil:
			s := secrets[v.Secret.SecretName]
			if s == nil {
				t.Fatalf("volume %s: Secret %s missing", v.Name, v.Secret.SecretName)
			}
			data, items = map[string]string{}, v.Secret.Items
			for k, val := range s.StringData {
				data[k] = val
			}
		}
		if items == nil {
			for k, val := range data {
				files[path.Join(m.MountPath, k)] = []byte(val)
			}
			continue
		}
		for _, it := range items {
			val, ok := data[it.Key]
			if !ok {
				t.Fatalf("volume %s: no key %s; the kubelet would not start the pod", v.Name, it.Key)
			}
			files[path.Join(m.MountPath, it.Path)] = []byte(val)
		}
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	read := func(p string) ([]byte, error) {
		if b, ok := files[p]; ok {
			return b, nil
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	return c.Args, lookup, read
}

// render turns the apply configurations into the objects the API server
// would store.
func render(t *testing.T, e env, gen uint64) (*appsv1.StatefulSet, map[string]map[string]string) {
	t.Helper()
	g := e.generation(gen)
	var sts appsv1.StatefulSet
	if err := json.Unmarshal([]byte(jsonString(g.statefulSet)), &sts); err != nil {
		t.Fatal(err)
	}
	return &sts, map[string]map[string]string{
		*g.listeners.Name: g.listeners.Data,
		"system-params":   {SystemParamsFile: `{"max_connections": "1000"}`},
	}
}

func secrets() map[string]*corev1.Secret {
	return map[string]*corev1.Secret{"backend": fixture.BackendSecret("envs", "backend")}
}

func TestStandInAcceptsTheGenerationOfEveryVersionAndAuthenticator(t *testing.T) {
	for _, image := range []string{"materialize/environmentd:v26.1.0", "materialize/environmentd:v26.5.0",
		"materialize/environmentd:v26.32.0-dev.0", "materialize/environmentd:v26.35.0"} {
		for _, auth := range []v1alpha1.AuthenticatorKind{"", v1alpha1.AuthenticatorNone, v1alpha1.AuthenticatorPassword, v1alpha1.AuthenticatorSasl, v1alpha1.AuthenticatorOidc} {
			if v, _, _ := imageref.EnvironmentdVersion(image); auth == v1alpha1.AuthenticatorOidc && !v.AtLeast(OidcVersion) {
				continue // refused before any pod starts: TestStandInRefusesOidcBefore2612
			}
			t.Run(image+"/"+string(auth), func(t *testing.T) {
				mz := testMaterialize(image, auth)
				sts, cms := render(t, testEnv(mz), 3)
				argv, lookup, read := podInput(t, sts, cms, secrets())
				v, _, _ := imageref.EnvironmentdVersion(image)
				plan, exit := standin.Check(v, argv, lookup, read)
				if exit != nil {
					t.Fatalf("environmentd %s refuses the generation: exit %d: %s", v, exit.Code, exit.Message)
				}
				if plan.Generation != "3" {
					t.Errorf("generation = %q", plan.Generation)
				}
			})
		}
	}
}

// The command line this operator rendered before it followed upstream.
func TestStandInRefusesTheOldStatefulSet(t *testing.T) {
	old := []string{
		"--environment-id=0b0b0b0b-1111-4222-8333-444444444444",
		"--deploy-generation=1",
		"--internal-http-listen-addr=0.0.0.0:6878",
		"--internal-sql-listen-addr=0.0.0.0:6877",
		"--listeners-config-path=/listeners/listeners.json",
		"--scratch-directory=/scratch",
		"--orchestrator=kubernetes",
		"--orchestrator-kubernetes-service-account=prod",
		"--secrets-controller=kubernetes",
	}
	env := map[string]string{"MZ_METADATA_BACKEND_URL": "postgres://x", "MZ_PERSIST_BLOB_URL": "s3://y"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	none := func(p string) ([]byte, error) { return nil, fs.ErrNotExist }
	// clap parses each value as it reads it: the bare UUID is refused first.
	_, exit := standin.Check(imageref.MustParseVersion("26.5.0"), old, lookup, none)
	if exit == nil || exit.Code != 2 || !strings.Contains(exit.Message,
		"error: invalid value '0b0b0b0b-1111-4222-8333-444444444444' for '--environment-id <<CLOUD>-<REGION>-<ORG-ID>-<ORDINAL>>': invalid environment ID") {
		t.Fatalf("old args: exit = %+v, want clap's invalid-value error for the bare UUID", exit)
	}
	// With an environment id environmentd reads, the removed flags are
	// unknown arguments.
	old[0] = "--environment-id=local-az1-0b0b0b0b-1111-4222-8333-444444444444-0"
	_, exit = standin.Check(imageref.MustParseVersion("26.5.0"), old, lookup, none)
	if exit == nil || exit.Code != 2 || exit.Message != "error: unexpected argument '--internal-http-listen-addr' found" {
		t.Fatalf("old args: exit = %+v, want clap's unexpected-argument error", exit)
	}
	// Without the removed flags environmentd still refuses: required
	// arguments are missing.
	var kept []string
	for _, a := range old {
		if !strings.HasPrefix(a, "--internal-") && !strings.HasPrefix(a, "--scratch-") {
			kept = append(kept, a)
		}
	}
	_, exit = standin.Check(imageref.MustParseVersion("26.5.0"), kept, lookup, none)
	if exit == nil || exit.Code != 2 || !strings.Contains(exit.Message, "the following required arguments were not provided") ||
		!strings.Contains(exit.Message, "--cluster-replica-sizes") {
		t.Fatalf("old args without removed flags: exit = %+v", exit)
	}
}

// setArg sets a flag of the container's command line, in place if it is
// there (a flag given twice is refused for its own reason).
func setArg(c *corev1.Container, flag, value string) {
	for i, a := range c.Args {
		if strings.HasPrefix(a, flag+"=") {
			c.Args[i] = flag + "=" + value
			return
		}
	}
	c.Args = append(c.Args, flag+"="+value)
}

// Bad input environmentd refuses: the stand-in must refuse it too, or the
// tests above prove nothing.
func TestStandInRefusesBrokenGenerations(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*appsv1.StatefulSet, map[string]map[string]string, map[string]*corev1.Secret)
		want   string
	}{
		{"no license key", func(sts *appsv1.StatefulSet, _ map[string]map[string]string, _ map[string]*corev1.Secret) {
			c := &sts.Spec.Template.Spec.Containers[0]
			var env []corev1.EnvVar
			for _, e := range c.Env {
				if e.Name != "MZ_LICENSE_KEY" {
					env = append(env, e)
				}
			}
			c.Env = env
		}, "environmentd: fatal: --license-key is required when running in Kubernetes"},
		{"empty license key", func(_ *appsv1.StatefulSet, _ map[string]map[string]string, s map[string]*corev1.Secret) {
			s["backend"].StringData["license_key"] = " \n"
		}, "failed to validate license key file"},
		{"a license key not signed by a trusted key", func(_ *appsv1.StatefulSet, _ map[string]map[string]string, s map[string]*corev1.Secret) {
			s["backend"].StringData["license_key"] = "TEST-STAND-IN-LICENSE-KEY"
		}, "environmentd: fatal: failed to validate license key file: InvalidToken"},
		{"an expired license key that disables", func(_ *appsv1.StatefulSet, _ map[string]map[string]string, s map[string]*corev1.Secret) {
			s["backend"].StringData["license_key"] = testLicense(t, time.Now().Add(-time.Hour), licensekey.Disable)
		}, "environmentd: fatal: The license key provided at /license_key/license_key is expired! Please contact Materialize for assistance."},
		{"unknown extra arg", func(sts *appsv1.StatefulSet, _ map[string]map[string]string, _ map[string]*corev1.Secret) {
			c := &sts.Spec.Template.Spec.Containers[0]
			c.Args = append(c.Args, "--no-such-flag=1")
		}, "error: unexpected argument '--no-such-flag' found"},
		{"listeners file in the old schema", func(_ *appsv1.StatefulSet, cms map[string]map[string]string, _ map[string]*corev1.Secret) {
			e := testEnv(testMaterialize("materialize/environmentd:v26.5.0", ""))
			cms["mzabcdefghij-listeners-3"]["listeners.json"] = e.listenersJSON()
		}, "environmentd: fatal: listeners file declares version \"0.147.0\", but this environmentd parses the 26.32.0 schema"},
		{"a cluster size without workers", func(sts *appsv1.StatefulSet, _ map[string]map[string]string, _ map[string]*corev1.Secret) {
			c := &sts.Spec.Template.Spec.Containers[0]
			for i, a := range c.Args {
				if strings.HasPrefix(a, "--cluster-replica-sizes=") {
					c.Args[i] = `--cluster-replica-sizes={"25cc":{"scale":1,"credits_per_hour":"0.25"}}`
				}
			}
		}, "size \"25cc\": missing field `workers`"},
		{"a cluster size without a memory limit", func(sts *appsv1.StatefulSet, _ map[string]map[string]string, _ map[string]*corev1.Secret) {
			c := &sts.Spec.Template.Spec.Containers[0]
			for i, a := range c.Args {
				if strings.HasPrefix(a, "--cluster-replica-sizes=") {
					c.Args[i] = `--cluster-replica-sizes={"25cc":{"scale":1,"workers":1,"credits_per_hour":"0.25"}}`
				}
			}
		}, "environmentd: fatal: parsing replica size map: No memory limit found in cluster definition for 25cc"},
		// What main.rs refuses with the Kubernetes orchestrator, and what
		// serve() refuses once the catalog is open: flags an extra arg of
		// the Materialize's could set.
		{"the local-file secrets controller", func(sts *appsv1.StatefulSet, _ map[string]map[string]string, _ map[string]*corev1.Secret) {
			setArg(&sts.Spec.Template.Spec.Containers[0], "--secrets-controller", "local-file")
		}, "environmentd: fatal: SecretsControllerKind::LocalFile is not compatible with Orchestrator::Kubernetes."},
		{"a process orchestrator's scratch directory", func(sts *appsv1.StatefulSet, _ map[string]map[string]string, _ map[string]*corev1.Secret) {
			setArg(&sts.Spec.Template.Spec.Containers[0], "--orchestrator-process-scratch-directory", "/scratch")
		}, "environmentd: fatal: --orchestrator-process-scratch-directory is not currently usable with the kubernetes orchestrator"},
		{"a default cluster size the size map lacks", func(sts *appsv1.StatefulSet, _ map[string]map[string]string, _ map[string]*corev1.Secret) {
			setArg(&sts.Spec.Template.Spec.Containers[0], "--bootstrap-default-cluster-replica-size", "no-such-size")
		}, "environmentd: fatal: bootstrap default cluster replica size is unknown"},
		{"listeners file without routes", func(_ *appsv1.StatefulSet, cms map[string]map[string]string, _ map[string]*corev1.Secret) {
			cms["mzabcdefghij-listeners-3"]["listeners.json"] = `{"sql":{},"http":{"x":{"addr":"0.0.0.0:1","authenticator_kind":"None","enable_tls":false}}}`
		}, "missing field `routes`"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sts, cms := render(t, testEnv(testMaterialize("materialize/environmentd:v26.35.0", "")), 3)
			sec := secrets()
			c.change(sts, cms, sec)
			argv, lookup, read := podInput(t, sts, cms, sec)
			_, exit := standin.Check(imageref.MustParseVersion("26.35.0"), argv, lookup, read)
			if exit == nil || !strings.Contains(exit.Message, c.want) {
				t.Fatalf("exit = %+v, want a message containing %q", exit, c.want)
			}
		})
	}
}

// The operator reaches the leader API where upstream does: on the internal
// port without a login for None, and as mz_system on the external port for
// Password and Sasl, whose internal routes admit only internal users.
func TestLeaderAPIThroughTheStandInsListeners(t *testing.T) {
	for _, c := range []struct {
		image string
		auth  v1alpha1.AuthenticatorKind
	}{
		{"materialize/environmentd:v26.5.0", v1alpha1.AuthenticatorNone},
		{"materialize/environmentd:v26.35.0", v1alpha1.AuthenticatorNone},
		{"materialize/environmentd:v26.5.0", v1alpha1.AuthenticatorPassword},
		{"materialize/environmentd:v26.35.0", v1alpha1.AuthenticatorPassword},
		{"materialize/environmentd:v26.35.0", v1alpha1.AuthenticatorSasl},
	} {
		t.Run(c.image+"/"+string(c.auth), func(t *testing.T) {
			mz := testMaterialize(c.image, c.auth)
			e := testEnv(mz)
			sts, cms := render(t, e, 3)
			argv, lookup, read := podInput(t, sts, cms, secrets())
			v, _, _ := imageref.EnvironmentdVersion(c.image)
			plan, exit := standin.Check(v, argv, lookup, read)
			if exit != nil {
				t.Fatal(exit.Message)
			}
			leader := standin.New()
			leader.AutoAdvance = true
			servers := map[string]*httptest.Server{} // by port
			for _, l := range plan.Listeners.HTTP {
				srv := httptest.NewServer(standin.ListenerHandler(l, plan.Password, leader))
				t.Cleanup(srv.Close)
				servers[fmt.Sprint(l.Addr.Port())] = srv
			}
			// The URL the reconciler uses, with the host swapped for the test server.
			want := e.leaderURL(3)
			port := want[strings.LastIndex(want, ":")+1:]
			srv, ok := servers[port]
			if !ok {
				t.Fatalf("no HTTP listener on port %s of %s", port, want)
			}
			client := &environmentd.Client{}
			password := ""
			if passwordLike(authenticatorKind(mz)) {
				password = fixture.MzSystemPassword
				if _, err := client.Status(context.Background(), srv.URL); !environmentd.IsStatusError(err, http.StatusUnauthorized) {
					t.Errorf("leader status without a login: err = %v, want 401", err)
				}
				client = client.WithPassword(password)
			}
			if s, err := client.Status(context.Background(), srv.URL); err != nil || s != environmentd.Initializing {
				t.Fatalf("leader status at %s: %q, %v", want, s, err)
			}
			// No other listener serves the leader API to the operator.
			for p, other := range servers {
				if p == port {
					continue
				}
				if _, err := client.Status(context.Background(), other.URL); err == nil {
					t.Errorf("listener on port %s also serves the leader API", p)
				}
			}
		})
	}
}

// testLicense is a license key the stand-in trusts, expiring at exp.
func testLicense(t *testing.T, exp time.Time, behavior string) string {
	t.Helper()
	key, err := licensekey.TestSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	nbf := exp.Add(-48 * time.Hour).Unix()
	jwt, err := licensekey.Sign(map[string]any{"sub": "0b0b0b0b-1111-4222-8333-444444444444", "aud": "00000000-0000-0000-0000-000000000000",
		"iss": licensekey.Issuer, "jti": "3c1c0f5e-7f0e-4b8a-9d0e-2a1b3c4d5e6f", "version": 1, "nbf": nbf, "iat": nbf, "exp": exp.Unix(),
		"max_credit_consumption_rate": 24.0, "expiration_behavior": behavior}, key)
	if err != nil {
		t.Fatal(err)
	}
	return jwt
}

// An expired key whose behaviour is Warn starts, with environmentd's warning.
func TestStandInWarnsOfAnExpiredLicenseKeyThatWarns(t *testing.T) {
	sts, cms := render(t, testEnv(testMaterialize("materialize/environmentd:v26.35.0", "")), 3)
	sec := secrets()
	sec["backend"].StringData["license_key"] = testLicense(t, time.Now().Add(-time.Hour), licensekey.Warn)
	argv, lookup, read := podInput(t, sts, cms, sec)
	plan, exit := standin.Check(imageref.MustParseVersion("26.35.0"), argv, lookup, read)
	if exit != nil || !strings.Contains(plan.LicenseWarning, "is expired!") {
		t.Fatalf("exit %+v, plan %+v", exit, plan)
	}
}
