package console

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/console"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func noPair(string, string) (tls.Certificate, error) {
	return tls.Certificate{}, errors.New("open: no such file")
}

func okPair(string, string) (tls.Certificate, error) { return tls.Certificate{}, nil }

// The environment the operator gives the console is accepted, with and
// without TLS.
func TestAcceptsTheOperatorsEnvironment(t *testing.T) {
	cfg := console.DefaultConfig()
	endpoint := cfg.Endpoint(v1alpha1.BalancerdRef{ServiceName: "mzabc-balancerd", Namespace: "envs"})
	for listener, tlsOn := range map[string]bool{
		"listen 8080;": false,
		"listen 8080 ssl;\nssl_certificate /nginx/tls/tls.crt;\nssl_certificate_key /nginx/tls/tls.key;": true,
	} {
		l, err := Check(env(map[string]string{"MZ_ENDPOINT": endpoint, "MZ_NGINX_LISTENER_CONFIG": listener}), okPair)
		if err != nil || l.Port != "8080" || (l.TLS != nil) != tlsOn {
			t.Errorf("%q: %+v, %v", listener, l, err)
		}
	}
}

func TestRefusesWhatTheImageCannotServe(t *testing.T) {
	ok := "http://b.n.svc.cluster.local:6876"
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"MZ_NGINX_LISTENER_CONFIG": "listen 8080;"}, "MZ_ENDPOINT is not set"},
		{map[string]string{"MZ_ENDPOINT": "b:6876", "MZ_NGINX_LISTENER_CONFIG": "listen 8080;"}, "not an http(s) URL"},
		{map[string]string{"MZ_ENDPOINT": ok}, "MZ_NGINX_LISTENER_CONFIG is not set"},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080"}, "unexpected end of file"},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080 ssl;"}, `no "ssl_certificate"`},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080 ssl; ssl_certificate /c; ssl_certificate_key /k;"}, "cannot load certificate"},
		{map[string]string{"MZ_ENDPOINT": ok, "MZ_NGINX_LISTENER_CONFIG": "listen 8080; server_name x;"}, `unknown directive "server_name"`},
	} {
		_, err := Check(env(c.vars), noPair)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.vars, err, c.want)
		}
	}
}
