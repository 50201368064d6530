package environmentd

import (
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/materializeinc/orchestratord/pkg/controllers/materialize"
	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
	"github.com/materializeinc/orchestratord/pkg/imageref"
	"github.com/materializeinc/orchestratord/test/standin/clap"
)

// A process-orchestrated environmentd that starts, for the value tests.
func processArgs() ([]string, func(string) (string, bool), func(string) ([]byte, error)) {
	args := []string{
		"--environment-id=local-az1-9f00a1b2-0000-4000-8000-000000000001-0",
		"--orchestrator=process",
		"--orchestrator-process-secrets-directory=/secrets",
		`--cluster-replica-sizes={"25cc":{"workers":1,"scale":1,"credits_per_hour":"0.25"}}`,
		"--bootstrap-default-cluster-replica-size=25cc",
		"--listeners-config-path=/listeners.json",
		"--internal-persist-pubsub-listen-addr=0.0.0.0:6879",
		"--config-sync-loop-interval=1s",
	}
	env := map[string]string{"MZ_PERSIST_BLOB_URL": "s3://bucket/blob", "MZ_METADATA_BACKEND_URL": "postgres://mz@db/mz"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	read := func(p string) ([]byte, error) {
		if p == "/listeners.json" {
			return []byte(`{"sql":{},"http":{}}`), nil
		}
		return nil, fs.ErrNotExist
	}
	return args, lookup, read
}

// environmentd refuses to start, in clap's words and with clap's exit
// status, when a value does not parse as its Rust type.
func TestCheckRefusesValuesEnvironmentdRefuses(t *testing.T) {
	v := imageref.MustParseVersion("26.35.0")
	args, lookup, read := processArgs()
	if _, exit := Check(v, args, lookup, read); exit != nil {
		t.Fatalf("the base command line is refused: %v", exit)
	}
	for _, c := range []struct{ arg, want string }{
		// A host name where std's SocketAddr wants an IP address.
		{"--internal-persist-pubsub-listen-addr=localhost:6879",
			"error: invalid value 'localhost:6879' for '--internal-persist-pubsub-listen-addr <HOST:PORT>': invalid socket address syntax"},
		{"--config-sync-loop-interval=1 second later",
			"error: invalid value '1 second later' for '--config-sync-loop-interval <CONFIG_SYNC_LOOP_INTERVAL>': expected number at 9"},
		// SensitiveUrl redacts the value and gives no reason.
		{"--persist-blob-url=bucket/blob", "error: invalid value '<redacted>' for '--persist-blob-url <PERSIST_BLOB_URL>'"},
		{"--environment-id=local-az1-0", "error: invalid value 'local-az1-0' for '--environment-id <<CLOUD>-<REGION>-<ORG-ID>-<ORDINAL>>': invalid environment ID"},
		{"--system-parameter-default=enable_rbac_checks", "error: invalid value 'enable_rbac_checks' for '--system-parameter-default <SYSTEM_PARAMETER_DEFAULT>': must have format KEY=VALUE"},
		{"--startup-log-filter=debug,mz=loud", `error: invalid value 'debug,mz=loud' for '--startup-log-filter <FILTER>': error parsing level filter: expected one of "off", "error", "warn", "info", "debug", "trace", or a number 0-5`},
	} {
		_, exit := Check(v, append(append([]string(nil), args...), c.arg), lookup, read)
		if exit == nil || exit.Code != 2 || exit.Message != c.want {
			t.Errorf("%s: exit %+v, want code 2 %q", c.arg, exit, c.want)
		}
	}
	// The environment goes through the same parsers.
	bad := func(k string) (string, bool) {
		if k == "MZ_METADATA_BACKEND_URL" {
			return "postgres://db:port/mz", true
		}
		return lookup(k)
	}
	if _, exit := Check(v, args, bad, read); exit == nil || exit.Code != 2 ||
		exit.Message != "error: invalid value '<redacted>' for '--metadata-backend-url <METADATA_BACKEND_URL>'" {
		t.Errorf("a bad MZ_METADATA_BACKEND_URL: exit %+v", exit)
	}
}

// environmentd parses the command line of its own release: a flag upstream
// added later (--launchdarkly-base-uri, 26.33) is an unexpected argument
// (exit 2) for an older image and accepted by a newer one; its environment
// variable is ignored where the flag does not exist.
func TestCheckParsesTheCommandLineOfItsVersion(t *testing.T) {
	args, lookup, read := processArgs()
	flag := "--launchdarkly-base-uri=https://ld.example.com"
	for _, c := range []struct{ version, want string }{
		{"26.1.0", "error: unexpected argument '--launchdarkly-base-uri' found"},
		{"26.32.0", "error: unexpected argument '--launchdarkly-base-uri' found"},
		{"26.32.5", "error: unexpected argument '--launchdarkly-base-uri' found"},
		{"26.33.0-rc.1", ""},
		{"26.33.0", ""},
		{"26.38.1", ""},
	} {
		_, exit := Check(imageref.MustParseVersion(c.version), append(append([]string(nil), args...), flag), lookup, read)
		switch {
		case c.want == "" && exit != nil:
			t.Errorf("environmentd %s refuses %s: %v", c.version, flag, exit)
		case c.want != "" && (exit == nil || exit.Code != 2 || exit.Message != c.want):
			t.Errorf("environmentd %s with %s: exit %+v, want code 2 %q", c.version, flag, exit, c.want)
		}
	}
	withEnv := func(k string) (string, bool) {
		if k == "MZ_LAUNCHDARKLY_BASE_URI" {
			return "https://ld.example.com", true
		}
		return lookup(k)
	}
	plan, exit := Check(imageref.MustParseVersion("26.32.0"), args, withEnv, read)
	if exit != nil {
		t.Fatalf("26.32 with MZ_LAUNCHDARKLY_BASE_URI: %v", exit)
	}
	if _, ok := plan.Args.Get("launchdarkly-base-uri"); ok {
		t.Errorf("26.32 read MZ_LAUNCHDARKLY_BASE_URI")
	}
}

// The tables begin at the oldest environmentd the operator runs.
func TestTablesCoverTheOperatorsVersions(t *testing.T) {
	min := materialize.MinimumEnvironmentdVersion
	for _, cmd := range []*clap.Command{clap.Environmentd, clap.Balancerd} {
		if want := fmt.Sprintf("%d.%d", min.Major, min.Minor); len(cmd.Versions) == 0 || cmd.Versions[0] != want {
			t.Errorf("%s's table begins at %q, the operator's minimum environmentd is %s: regenerate with -since %s",
				cmd.Name, cmd.Versions, min, want)
		}
	}
}

// A stand-in plays the version its image names, else the newest release
// line of its table, environmentd's as balancerd's.
func TestVersionFromTheImage(t *testing.T) {
	image := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) { return v, k == "STANDIN_VERSION" }
	}
	for _, cmd := range []*clap.Command{clap.Environmentd, clap.Balancerd} {
		if v, err := Version(cmd, image("26.5.0")); err != nil || v.String() != "26.5.0" {
			t.Errorf("%s, STANDIN_VERSION=26.5.0: %v, %v", cmd.Name, v, err)
		}
		want := cmd.Versions[len(cmd.Versions)-1] + ".0"
		for _, unset := range []func(string) (string, bool){image(""), func(string) (string, bool) { return "", false }} {
			if v, err := Version(cmd, unset); err != nil || v.String() != want {
				t.Errorf("%s without STANDIN_VERSION: %v, %v, want %s", cmd.Name, v, err, want)
			}
		}
		if _, err := Version(cmd, image("v26")); err == nil {
			t.Errorf("%s: STANDIN_VERSION=v26 accepted", cmd.Name)
		}
	}
	if _, err := Version(&clap.Command{Name: "empty"}, image("")); err == nil {
		t.Errorf("no STANDIN_VERSION and no release line accepted")
	}
}

// Who a request is from, as environmentd's HTTP authentication says: on a
// listener without authentication, x-materialize-user only on the base
// routes and only for mz_system or mz_support, else the Basic username
// (password unchecked) or anonymous_http_user; every refusal, a disallowed
// role included, is 401; an unknown path is 404.
func TestListenerHandlerAuthenticatesAsEnvironmentd(t *testing.T) {
	d := NewDeployment()
	d.SetAdapterReady()
	open := Listener{Name: "external", AuthenticatorKind: "None", Routes: map[string]RouteGroup{
		"base":     {Enabled: true, AllowedRoles: "Normal"},
		"internal": {Enabled: true, AllowedRoles: "Internal"},
		"metrics":  {Enabled: true, AllowedRoles: "NormalAndInternal"}}}
	pw := Listener{Name: "internal", AuthenticatorKind: "Password", Routes: map[string]RouteGroup{
		"internal": {Enabled: true, AllowedRoles: "Internal"}}}
	openSrv := httptest.NewServer(ListenerHandler(open, "", d))
	defer openSrv.Close()
	pwSrv := httptest.NewServer(ListenerHandler(pw, "pw", d))
	defer pwSrv.Close()

	for _, c := range []struct {
		name, url, header, basicUser string
		want                         int
	}{
		{"base, default user", openSrv.URL + "/", "", "", 200},
		{"base, header names mz_system (internal: not Normal)", openSrv.URL + "/", "mz_system", "", 401},
		{"base, header names a normal user", openSrv.URL + "/", "alice", "", 401},
		{"leader route ignores the header", openSrv.URL + mzenv.StatusPath, "mz_system", "", 401},
		{"leader route, Basic mz_system unchecked", openSrv.URL + mzenv.StatusPath, "", "mz_system", 200},
		{"metrics, reserved name refused", openSrv.URL + "/metrics", "", "mz_other", 401},
		{"metrics, analytics is internal", openSrv.URL + "/metrics", "", "mz_analytics", 200},
		{"base, external_ is reserved", openSrv.URL + "/", "", "external_x", 401},
		{"base, PUBLIC in any case is reserved", openSrv.URL + "/", "", "PUBLIC", 401},
		{"base, a normal user", openSrv.URL + "/", "", "alice", 200},
		{"webhook sources: no authentication", openSrv.URL + "/api/webhook/db/s/w", "", "mz_other", 200},
		{"unknown path", openSrv.URL + "/nothing", "", "", 404},
		{"password listener, no credentials", pwSrv.URL + mzenv.StatusPath, "", "", 401},
		{"password listener, wrong password", pwSrv.URL + mzenv.StatusPath, "", "mz_system:bad", 401},
		{"password listener, mz_system", pwSrv.URL + mzenv.StatusPath, "", "mz_system:pw", 200},
	} {
		req, _ := http.NewRequest(http.MethodGet, c.url, nil)
		if c.header != "" {
			req.Header.Set("x-materialize-user", c.header)
		}
		if c.basicUser != "" {
			u, p, _ := strings.Cut(c.basicUser, ":")
			req.SetBasicAuth(u, p)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
}
