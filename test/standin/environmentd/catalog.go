package environmentd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// errFenced is Open's refusal: a higher deploy generation holds the catalog.
var errFenced = errors.New("catalog is held by a higher deploy generation")

// errCorruptCatalog is a catalog that cannot be read: unlike an unreachable
// store, retrying does not help.
var errCorruptCatalog = errors.New("catalog cannot be decoded")

// UserItems are the catalog's user items (objects and replicas, one id
// space in the stand-in): the ids of those that exist, and the id
// allocator's next id, which DDL raises and dropping leaves.
type UserItems struct {
	IDs  []uint64
	Next uint64
}

// NextFromIDs is the next id as preflight computes it, from the items that
// exist: their highest id plus one.
func (u UserItems) NextFromIDs() uint64 {
	next := uint64(1)
	for _, id := range u.IDs {
		next = max(next, id+1)
	}
	return next
}

// Since are the ids at or above next: the items created since.
func (u UserItems) Since(next uint64) []uint64 {
	var out []uint64
	for _, id := range u.IDs {
		if id >= next {
			out = append(out, id)
		}
	}
	return out
}

// Has reports whether id is a user item of the catalog.
func (u UserItems) Has(id uint64) bool {
	return slices.Contains(u.IDs, id)
}

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
	// UserItems are the catalog's user objects and replicas.
	UserItems(ctx context.Context) (UserItems, error)
}

// MemoryCatalog is a Catalog in memory, for tests of one process.
type MemoryCatalog struct {
	mu    sync.Mutex
	gen   *uint64
	items UserItems
}

// DDL is a user object created by the leader: a new id.
func (c *MemoryCatalog) DDL() {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := max(c.items.Next, c.items.NextFromIDs())
	c.items.IDs = append(c.items.IDs, id)
	c.items.Next = id + 1
}

// Drop is a user object dropped by the leader.
func (c *MemoryCatalog) Drop(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items.IDs = slices.DeleteFunc(slices.Clone(c.items.IDs), func(i uint64) bool { return i == id })
}

func (c *MemoryCatalog) UserItems(context.Context) (UserItems, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return UserItems{IDs: slices.Clone(c.items.IDs), Next: c.items.Next}, nil
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

// Secret entries: the generation; the user items' ids ("u1 u5") and the id
// allocator's next (a test writes both to play DDL run against the
// leader, or objects whose secrets are left behind).
const (
	catalogGenerationKey = "deploy-generation"
	catalogUserItemsKey  = "user-item-ids"
	catalogNextUserKey   = "next-user-item-id"
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
		return 0, false, fmt.Errorf("%w: Secret %s: %w", errCorruptCatalog, c.Name, err)
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

func (c *SecretCatalog) UserItems(ctx context.Context) (UserItems, error) {
	var u UserItems
	s, err := c.Kube.CoreV1().Secrets(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return u, nil
	}
	if err != nil {
		return u, fmt.Errorf("reading the catalog: %w", err)
	}
	for field := range strings.FieldsSeq(string(s.Data[catalogUserItemsKey])) {
		id, ok := parseUserID(field)
		if !ok {
			return u, fmt.Errorf("%w: Secret %s: %s: %q is not a user item id", errCorruptCatalog, c.Name, catalogUserItemsKey, field)
		}
		u.IDs = append(u.IDs, id)
	}
	if raw, ok := s.Data[catalogNextUserKey]; ok {
		if u.Next, err = strconv.ParseUint(string(raw), 10, 64); err != nil {
			return u, fmt.Errorf("%w: Secret %s: %s: %v", errCorruptCatalog, c.Name, catalogNextUserKey, err)
		}
	}
	u.Next = max(u.Next, u.NextFromIDs())
	return u, nil
}

// parseUserID parses a user CatalogItemId as upstream prints it: u7.
func parseUserID(s string) (uint64, bool) {
	rest, ok := strings.CutPrefix(s, "u")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	return id, err == nil
}
