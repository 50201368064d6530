package servingcert

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/materializeinc/orchestratord/test/controlplane"
)

// cp is the real etcd + kube-apiserver the tests talk to.
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	controlplane.Main(m, controlplane.Options{SkipCRDs: true}, func(c *controlplane.ControlPlane) { cp = c })
}

// pauseAfterFirstGet lets a client's first GET through, reports it, and
// holds every later request until release is closed: the replica has read
// the Secret and decided, and acts only after the other replica has.
type pauseAfterFirstGet struct {
	next    http.RoundTripper
	once    sync.Once
	read    chan struct{}
	release chan struct{}
	mu      sync.Mutex
	gets    int
}

func (p *pauseAfterFirstGet) RoundTrip(req *http.Request) (*http.Response, error) {
	p.mu.Lock()
	first := p.gets == 0 && req.Method == http.MethodGet
	if req.Method == http.MethodGet {
		p.gets++
	}
	p.mu.Unlock()
	if !first {
		<-p.release
	}
	resp, err := p.next.RoundTrip(req)
	if first {
		p.once.Do(func() { close(p.read) })
	}
	return resp, err
}

// Two replicas that find the CA near expiry at the same moment rotate it
// once: the second's update, conditional on the read it decided on,
// conflicts and it adopts the first's CA. Before, RotateCA re-read the
// Secret and rotated whatever it found, so the second replica rotated the
// first's new CA away and the bundle lost the CA replicas still signed with.
func TestConcurrentRotationRotatesOnce(t *testing.T) {
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	name := "rotation-race-ca"
	replica := func(client kubernetes.Interface, now func() time.Time) *SelfSigned {
		return &SelfSigned{Client: client, Namespace: "default", SecretName: name, DNSNames: []string{"webhook.default.svc"},
			Log: zaptest.NewLogger(t), Now: now}
	}
	// A CA created 300 days ago has a third of its year left: due.
	if err := replica(admin, func() time.Time { return time.Now().Add(-300 * 24 * time.Hour) }).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	original := caFingerprints(t, admin, name)

	gate := &pauseAfterFirstGet{read: make(chan struct{}), release: make(chan struct{})}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { gate.next = rt; return gate }
	b := replica(kubernetes.NewForConfigOrDie(cfg), time.Now)
	bDone := make(chan error, 1)
	go func() { bDone <- b.Sync(ctx) }()
	<-gate.read // b has read the Secret and decided to rotate

	a := replica(admin, time.Now)
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	afterA := caFingerprints(t, admin, name)
	close(gate.release)
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	final := caFingerprints(t, admin, name)

	if afterA[0] == original[0] || afterA[1] != original[0] {
		t.Fatalf("a did not rotate: %v -> %v", original, afterA)
	}
	if final != afterA {
		t.Errorf("rotated twice: %v -> %v -> %v; the bundle lost CA %s", original, afterA, final, original[0])
	}
	if a.leafCA != final[0] || b.leafCA != final[0] {
		t.Errorf("leaves signed by %s (a) and %s (b), want both by the current CA %s", a.leafCA, b.leafCA, final[0])
	}
}

// caFingerprints returns the Secret's current and previous CA.
func caFingerprints(t *testing.T, client kubernetes.Interface, name string) [2]string {
	t.Helper()
	secret, err := client.CoreV1().Secrets("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	current, previous, err := parseCASecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	out := [2]string{Fingerprint(current.Cert)}
	if previous != nil {
		out[1] = Fingerprint(previous.Cert)
	}
	if n := strings.Count(string(secret.Data[SecretKeyBundle]), "BEGIN CERTIFICATE"); previous != nil && n != 2 {
		t.Errorf("bundle holds %d certificates, want 2", n)
	}
	return out
}

// A CA is replaced once less than CARenewBefore is left of it (the chart's
// tls.caRenewBefore, upstream's operator.certificate.caRenewBefore), and a
// third of CAValidity without it; the new CA lasts CAValidity.
func TestCARenewBefore(t *testing.T) {
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	const validity = 240 * time.Hour
	start := time.Now()
	for _, tc := range []struct {
		name        string
		renewBefore time.Duration
		// ages at which a Sync finds the CA kept, then replaced
		kept, replaced time.Duration
	}{
		{"ca-renew-default", 0, 155 * time.Hour, 165 * time.Hour},               // a third: 80h before expiry, at 160h
		{"ca-renew-explicit", 24 * time.Hour, 210 * time.Hour, 220 * time.Hour}, // at 216h
	} {
		replica := func(age time.Duration) *SelfSigned {
			return &SelfSigned{Client: admin, Namespace: "default", SecretName: tc.name, DNSNames: []string{"webhook.default.svc"},
				CAValidity: validity, CARenewBefore: tc.renewBefore, Log: zaptest.NewLogger(t),
				Now: func() time.Time { return start.Add(age) }}
		}
		if err := replica(0).Sync(ctx); err != nil {
			t.Fatal(err)
		}
		created := caFingerprints(t, admin, tc.name)
		if err := replica(tc.kept).Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := caFingerprints(t, admin, tc.name); got != created {
			t.Errorf("%s: CA replaced at age %s: %v -> %v", tc.name, tc.kept, created, got)
		}
		if err := replica(tc.replaced).Sync(ctx); err != nil {
			t.Fatal(err)
		}
		got := caFingerprints(t, admin, tc.name)
		if got[0] == created[0] || got[1] != created[0] {
			t.Errorf("%s: CA not replaced at age %s: %v -> %v", tc.name, tc.replaced, created, got)
		}
		secret, err := admin.CoreV1().Secrets("default").Get(ctx, tc.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		current, _, err := parseCASecret(secret)
		if err != nil {
			t.Fatal(err)
		}
		if want := start.Add(tc.replaced + validity); current.Cert.NotAfter.Sub(want).Abs() > time.Minute {
			t.Errorf("%s: the new CA expires at %s, want %s", tc.name, current.Cert.NotAfter, want)
		}
	}
}
