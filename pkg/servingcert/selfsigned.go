package servingcert

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/materializeinc/orchestratord/pkg/kubeclient"
)

// Keys of the CA Secret. The CA signing leaves is tls.crt/tls.key; the one
// before it stays as previous.* so replicas can keep signing with it until
// the new CA has reached every API server; ca.crt is the trust bundle.
const (
	SecretKeyCert         = corev1.TLSCertKey
	SecretKeyKey          = corev1.TLSPrivateKeyKey
	SecretKeyBundle       = "ca.crt"
	SecretKeyPreviousCert = "previous.crt"
	SecretKeyPreviousKey  = "previous.key"
)

// Defaults of the self-signed mode.
const (
	DefaultCAValidity       = 365 * 24 * time.Hour
	DefaultLeafValidity     = 7 * 24 * time.Hour
	DefaultPropagationDelay = 10 * time.Second
	DefaultResync           = 10 * time.Second
)

// SelfSigned issues this replica's serving certificate from a CA kept in a
// Secret that whichever replica comes first creates. Creation is race-free
// (the API server accepts one create; the others read the winner's Secret),
// and rotation is an update conditional on the resourceVersion.
//
// Overlap: the caBundle always holds the current and the previous CA, and a
// replica signs with a new CA only after it has seen that CA in the CRD's
// caBundle for PropagationDelay; until then it keeps signing with the
// previous one. So no API server is ever shown a leaf it cannot verify.
type SelfSigned struct {
	Client     kubeclient.Interface
	Namespace  string
	SecretName string
	// CABundle, when set, receives the trust bundle.
	CABundle   *CRDCABundle
	DNSNames   []string
	IPs        []net.IP
	CAValidity time.Duration
	// CARenewBefore is how long before its expiry a CA is replaced; zero
	// means a third of CAValidity.
	CARenewBefore time.Duration
	LeafValidity  time.Duration
	// PropagationDelay is how long a CA must have been in the CRD's caBundle
	// before leaves it signs are served.
	PropagationDelay time.Duration
	// Resync is how often the Secret and the CRD are re-read.
	Resync time.Duration
	Log    *zap.Logger
	Now    func() time.Time

	leaf      atomic.Pointer[tls.Certificate]
	mu        sync.Mutex
	leafCA    string
	seenInCRD map[string]time.Time
}

func (s *SelfSigned) defaults() {
	if s.CAValidity <= 0 {
		s.CAValidity = DefaultCAValidity
	}
	if s.LeafValidity <= 0 {
		s.LeafValidity = DefaultLeafValidity
	}
	if s.PropagationDelay < 0 {
		s.PropagationDelay = 0
	}
	if s.Resync <= 0 {
		s.Resync = DefaultResync
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.seenInCRD == nil {
		s.seenInCRD = map[string]time.Time{}
	}
}

// caRenewBefore is CARenewBefore, or a third of CAValidity.
func (s *SelfSigned) caRenewBefore() time.Duration {
	if s.CARenewBefore > 0 {
		return s.CARenewBefore
	}
	return s.CAValidity / 3
}

// GetCertificate returns this replica's current serving certificate.
func (s *SelfSigned) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.leaf.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate issued yet")
}

// Ready reports whether a serving certificate has been issued.
func (s *SelfSigned) Ready() error {
	_, err := s.GetCertificate(nil)
	return err
}

// Run keeps the CA, the caBundle and the serving certificate current until
// ctx ends. Failures are logged and retried; the webhook stays unready until
// the first certificate exists.
func (s *SelfSigned) Run(ctx context.Context) error {
	s.mu.Lock()
	s.defaults()
	s.mu.Unlock()
	for {
		if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
			s.Log.Warn("self-signed certificate sync failed; retrying", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.Resync):
		}
	}
}

// Sync performs one pass: make sure the CA exists (rotating it near expiry),
// publish the bundle, and (re)issue the leaf when needed.
func (s *SelfSigned) Sync(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defaults()
	now := s.Now()

	secret, err := s.ensureSecret(ctx, now)
	if err != nil {
		return err
	}
	current, previous, err := parseCASecret(secret)
	if err != nil {
		return fmt.Errorf("CA Secret %s/%s: %w", s.Namespace, s.SecretName, err)
	}
	if current.Cert.NotAfter.Sub(now) < s.caRenewBefore() {
		s.Log.Info("CA near expiry; rotating", zap.Time("notAfter", current.Cert.NotAfter))
		if secret, err = RotateCA(ctx, s.Client, secret, s.CAValidity, now); err != nil {
			if !apierrors.IsConflict(err) {
				return err
			}
			// Another replica rotated first; use its CA.
			if secret, err = s.Client.CoreV1().Secrets(s.Namespace).Get(ctx, s.SecretName, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		if current, previous, err = parseCASecret(secret); err != nil {
			return err
		}
	}

	signer := current
	if s.CABundle != nil {
		crdBundle, err := s.CABundle.Ensure(ctx, secret.Data[SecretKeyBundle])
		if err != nil {
			s.Log.Warn("caBundle not published", zap.Error(err))
		}
		fp := Fingerprint(current.Cert)
		if bundleContains(crdBundle, current.Cert) {
			if _, ok := s.seenInCRD[fp]; !ok {
				s.seenInCRD[fp] = now
			}
		} else {
			delete(s.seenInCRD, fp)
		}
		seen, ok := s.seenInCRD[fp]
		propagated := ok && now.Sub(seen) >= s.PropagationDelay
		if !propagated && previous != nil && previous.Cert.NotAfter.After(now) {
			signer = previous
		}
	}
	return s.ensureLeaf(signer, now)
}

func (s *SelfSigned) ensureLeaf(signer *CA, now time.Time) error {
	fp := Fingerprint(signer.Cert)
	if leaf := s.leaf.Load(); leaf != nil && s.leafCA == fp && leaf.Leaf.NotAfter.Sub(now) > s.LeafValidity/3 {
		return nil
	}
	leaf, err := signer.IssueServing(s.DNSNames, s.IPs, s.LeafValidity, now)
	if err != nil {
		return fmt.Errorf("issuing serving certificate: %w", err)
	}
	s.leaf.Store(leaf)
	s.leafCA = fp
	s.Log.Info("serving certificate issued", zap.String("ca", fp), zap.Strings("dnsNames", s.DNSNames),
		zap.Time("notAfter", leaf.Leaf.NotAfter))
	return nil
}

func (s *SelfSigned) ensureSecret(ctx context.Context, now time.Time) (*corev1.Secret, error) {
	secrets := s.Client.CoreV1().Secrets(s.Namespace)
	secret, err := secrets.Get(ctx, s.SecretName, metav1.GetOptions{})
	if err == nil {
		return secret, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading CA Secret %s/%s: %w", s.Namespace, s.SecretName, err)
	}
	ca, err := NewCA("orchestratord-webhook-ca", s.CAValidity, now)
	if err != nil {
		return nil, err
	}
	secret, err = secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: s.SecretName, Namespace: s.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "orchestratord-webhook"}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{SecretKeyCert: ca.CertPEM, SecretKeyKey: ca.KeyPEM, SecretKeyBundle: ca.CertPEM},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Another replica won the race; everyone uses its CA.
		return secrets.Get(ctx, s.SecretName, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("creating CA Secret %s/%s: %w", s.Namespace, s.SecretName, err)
	}
	s.Log.Info("CA created", zap.String("secret", s.Namespace+"/"+s.SecretName), zap.String("ca", Fingerprint(ca.Cert)))
	return secret, nil
}

// RotateCA replaces the CA in read, the Secret as it was read when the
// rotation was decided, by a new one, keeping the old as previous and both
// in the bundle. The update is conditional on read's resourceVersion: of two
// replicas that decided at once, one gets a Conflict and adopts the other's
// CA. Re-reading here instead would rotate twice, dropping from the bundle
// the CA that replicas still sign with until the first rotation propagates.
func RotateCA(ctx context.Context, client kubeclient.Interface, read *corev1.Secret, validity time.Duration, now time.Time) (*corev1.Secret, error) {
	current, _, err := parseCASecret(read)
	if err != nil {
		return nil, err
	}
	next, err := NewCA("orchestratord-webhook-ca", validity, now)
	if err != nil {
		return nil, err
	}
	secret := read.DeepCopy()
	secret.Data = map[string][]byte{
		SecretKeyCert:         next.CertPEM,
		SecretKeyKey:          next.KeyPEM,
		SecretKeyPreviousCert: current.CertPEM,
		SecretKeyPreviousKey:  current.KeyPEM,
		SecretKeyBundle:       append(append([]byte{}, next.CertPEM...), current.CertPEM...),
	}
	return client.CoreV1().Secrets(read.Namespace).Update(ctx, secret, metav1.UpdateOptions{})
}

func parseCASecret(secret *corev1.Secret) (current, previous *CA, err error) {
	current, err = ParseCA(secret.Data[SecretKeyCert], secret.Data[SecretKeyKey])
	if err != nil {
		return nil, nil, fmt.Errorf("current CA: %w", err)
	}
	if len(secret.Data[SecretKeyPreviousCert]) > 0 {
		if previous, err = ParseCA(secret.Data[SecretKeyPreviousCert], secret.Data[SecretKeyPreviousKey]); err != nil {
			return nil, nil, fmt.Errorf("previous CA: %w", err)
		}
	}
	return current, previous, nil
}
