package servingcert

import (
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestExpiryCollectorReportsTheServedCertificate(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("test", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueServing([]string{"svc"}, []net.IP{net.ParseIP("127.0.0.1")}, 30*time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	var served *tls.Certificate
	reg := prometheus.NewRegistry()
	reg.MustRegister(ExpiryCollector(func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if served == nil {
			return nil, errors.New("not loaded")
		}
		return served, nil
	}))
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("before a certificate is loaded: %d series (%v), want none", n, err)
	}
	served = leaf
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gathered %v (%v)", mfs, err)
	}
	if got, want := mfs[0].GetMetric()[0].GetGauge().GetValue(), float64(leaf.Leaf.NotAfter.Unix()); got != want {
		t.Errorf("expiry = %v, want the served certificate's notAfter %v", got, want)
	}
}
