package environmentd

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/materializeinc/orchestratord/pkg/servingcert"
)

// environmentd and balancerd serve OpenSSL's Mozilla intermediate profile:
// a TLS 1.2 client that offers only CBC suites (which Go's defaults would
// accept) fails its handshake; one that offers AES-GCM, and TLS 1.3, succeed.
func TestServerTLSIsMozillaIntermediate(t *testing.T) {
	ca, err := servingcert.NewCA("test", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.IssueServing([]string{"localhost"}, nil, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", ServerTLS(*pair))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	handshake := func(c *tls.Config) error {
		c.InsecureSkipVerify = true //nolint:gosec // the suites are under test, not the name
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ln.Addr().String(), c)
		if err == nil {
			conn.Close()
		}
		return err
	}
	cbc := &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{ //nolint:gosec // the suites a server must refuse
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA}}
	if err := handshake(cbc); err == nil {
		t.Error("a TLS 1.2 client offering only CBC suites completed its handshake")
	}
	gcm := &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}
	if err := handshake(gcm); err != nil {
		t.Errorf("TLS 1.2 with AES-GCM: %v", err)
	}
	if err := handshake(&tls.Config{MinVersion: tls.VersionTLS13}); err != nil {
		t.Errorf("TLS 1.3: %v", err)
	}
}
