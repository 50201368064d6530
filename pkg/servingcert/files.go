package servingcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// FileSource serves a certificate and key from files and re-reads them when
// their content changes (a mounted Secret is swapped atomically by the
// kubelet), so renewals by cert-manager or by hand need no restart.
type FileSource struct {
	CertFile, KeyFile string
	// CAFile, optional, is the bundle clients should trust; OnCABundle is
	// called with it whenever it changes.
	CAFile     string
	OnCABundle func(ctx context.Context, bundle []byte) error
	// Interval between checks of the files; default one second.
	Interval time.Duration
	Log      *zap.Logger

	current        atomic.Pointer[tls.Certificate]
	mu             sync.Mutex
	lastCert       []byte
	lastKey        []byte
	lastCA         []byte
	caBundlePushed bool
}

// GetCertificate returns the newest valid pair read from disk.
func (f *FileSource) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := f.current.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate loaded yet")
}

// Ready reports whether a certificate has been loaded.
func (f *FileSource) Ready() error {
	_, err := f.GetCertificate(nil)
	return err
}

// Run reloads the files until ctx ends. It returns an error only when the
// first load fails, so a misconfiguration is reported at start-up.
func (f *FileSource) Run(ctx context.Context) error {
	if err := f.reload(ctx); err != nil {
		return err
	}
	interval := f.Interval
	if interval <= 0 {
		interval = time.Second
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			if err := f.reload(ctx); err != nil {
				// Keep serving the previous pair: a half-written update
				// (new cert, old key) resolves at the next check.
				f.Log.Warn("serving certificate not reloaded", zap.Error(err))
			}
		}
	}
}

func (f *FileSource) reload(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	certPEM, err := os.ReadFile(f.CertFile)
	if err != nil {
		return fmt.Errorf("--tls-cert-file: %w", err)
	}
	keyPEM, err := os.ReadFile(f.KeyFile)
	if err != nil {
		return fmt.Errorf("--tls-key-file: %w", err)
	}
	if !bytes.Equal(certPEM, f.lastCert) || !bytes.Equal(keyPEM, f.lastKey) {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return fmt.Errorf("serving certificate %s with key %s: %w", f.CertFile, f.KeyFile, err)
		}
		f.current.Store(&pair)
		f.lastCert, f.lastKey = certPEM, keyPEM
		f.Log.Info("serving certificate loaded", zap.String("file", f.CertFile), zap.Time("notAfter", pair.Leaf.NotAfter))
	}
	if f.CAFile == "" || f.OnCABundle == nil {
		return nil
	}
	caPEM, err := os.ReadFile(f.CAFile)
	if err != nil {
		return fmt.Errorf("--tls-ca-file: %w", err)
	}
	if bytes.Equal(caPEM, f.lastCA) && f.caBundlePushed {
		return nil
	}
	if certs, err := ParseCertificates(caPEM); err != nil || len(certs) == 0 {
		return fmt.Errorf("--tls-ca-file %s holds no valid PEM certificate (%v)", f.CAFile, err)
	}
	f.lastCA = caPEM
	f.caBundlePushed = false
	if err := f.OnCABundle(ctx, caPEM); err != nil {
		return err
	}
	f.caBundlePushed = true
	return nil
}
