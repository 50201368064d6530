package environmentd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// errFenced is Open's refusal: a higher deploy generation holds the catalog.
var errFenced = errors.New("catalog is held by a higher deploy generation")

// Catalog is the part of environmentd's durable catalog that decides what a
// process may do at boot (upstream src/environmentd/src/deployment/preflight.rs):
// the deploy generation that last opened it for writing.
type Catalog interface {
	// Generation is the catalog's deploy generation; ok is false for a
	// catalog never opened (a fresh environment).
	Generation(ctx context.Context) (gen uint64, ok bool, err error)
	// Open opens the catalog for writing as gen, fencing out every lower
	// generation. It fails, changing nothing, when a higher one holds it.
	Open(ctx context.Context, gen uint64) error
	// UserItems counts the catalog's user objects and replicas: DDL
	// changes it (upstream's preflight compares the next user ids).
	UserItems(ctx context.Context) (uint64, error)
}

// MemoryCatalog is a Catalog in memory, for tests of one process.
type MemoryCatalog struct {
	mu    sync.Mutex
	gen   *uint64
	items uint64
}

// DDL is a user object created by the leader.
func (c *MemoryCatalog) DDL() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items++
}

func (c *MemoryCatalog) UserItems(context.Context) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.items, nil
}

func (c *MemoryCatalog) Generation(context.Context) (uint64, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == nil {
		return 0, false, nil
	}
	return *c.gen, true, nil
}

func (c *MemoryCatalog) Open(_ context.Context, gen uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != nil && *c.gen > gen {
		return fmt.Errorf("%w: %d", errFenced, *c.gen)
	}
	c.gen = &gen
	return nil
}

// Secret entries: the generation, and the count of user objects (a test
// writes it to play DDL run against the leader).
const (
	catalogGenerationKey = "deploy-generation"
	catalogUserItemsKey  = "user-items"
)

// SecretCatalog keeps the stand-in's catalog in a Secret of the pod's
// namespace, written with the pod's own ServiceAccount (environmentd's Role
// lets it write Secrets: its secrets controller keeps connection secrets
// there). Real environmentd keeps the catalog in its metadata backend, keyed
// by organization; so the Secret's name comes from the metadata backend URL
// and the organization id: the same backend and environment share one
// catalog, across generations and Materialize objects, as they would.
type SecretCatalog struct {
	Kube      kubernetes.Interface
	Namespace string
	Name      string
}

// CatalogSecretName names the catalog of one metadata backend and
// organization.
func CatalogSecretName(metadataBackendURL, organizationID string) string {
	sum := sha256.Sum256([]byte(metadataBackendURL + "\x00" + organizationID))
	return "standin-catalog-" + hex.EncodeToString(sum[:8])
}

func (c *SecretCatalog) Generation(ctx context.Context) (uint64, bool, error) {
	s, err := c.Kube.CoreV1().Secrets(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the catalog: %w", err)
	}
	gen, err := strconv.ParseUint(string(s.Data[catalogGenerationKey]), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("catalog Secret %s: %w", c.Name, err)
	}
	return gen, true, nil
}

// Open writes gen with the resourceVersion it read, so two processes that
// race to open cannot both win.
func (c *SecretCatalog) Open(ctx context.Context, gen uint64) error {
	secrets := c.Kube.CoreV1().Secrets(c.Namespace)
	value := []byte(strconv.FormatUint(gen, 10))
	s, err := secrets.Get(ctx, c.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace,
				Labels: map[string]string{"app.kubernetes.io/name": "standin-catalog"}},
			Data: map[string][]byte{catalogGenerationKey: value},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return fmt.Errorf("reading the catalog: %w", err)
	}
	if held, perr := strconv.ParseUint(string(s.Data[catalogGenerationKey]), 10, 64); perr == nil && held > gen {
		return fmt.Errorf("%w: %d", errFenced, held)
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[catalogGenerationKey] = value
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	return err
}

func (c *SecretCatalog) UserItems(ctx context.Context) (uint64, error) {
	s, err := c.Kube.CoreV1().Secrets(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the catalog: %w", err)
	}
	raw, ok := s.Data[catalogUserItemsKey]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("catalog Secret %s: %s: %w", c.Name, catalogUserItemsKey, err)
	}
	return n, nil
}
