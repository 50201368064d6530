package environmentd

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// userManagedSecretPrefix is upstream's SECRET_NAME_PREFIX
// (orchestrator-kubernetes/src/secrets.rs): the Secret of catalog item id
// is {name prefix}user-managed-{id}.
const userManagedSecretPrefix = "user-managed-"

// SecretUserIDs are the user item ids of the namespace's Secrets named as
// environmentd's secrets controller names them; other Secrets are not its.
func (o *Orchestrator) SecretUserIDs(ctx context.Context) ([]uint64, error) {
	list, err := o.Kube.CoreV1().Secrets(o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var ids []uint64
	for _, s := range list.Items {
		rest, ok := strings.CutPrefix(s.Name, o.Prefix+userManagedSecretPrefix)
		if !ok {
			continue
		}
		if id, ok := parseUserID(rest); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// DeleteSecret starts the deletion of item id's Secret; one already gone
// is deleted.
func (o *Orchestrator) DeleteSecret(ctx context.Context, id uint64) error {
	name := fmt.Sprintf("%s%su%d", o.Prefix, userManagedSecretPrefix, id)
	err := o.Kube.CoreV1().Secrets(o.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// cleanupOrphanedSecrets is the leader coordinator's cleanup at boot
// (upstream adapter/src/coord.rs): every Secret of a user item the catalog
// no longer has is deleted, unless its id is one the catalog has not
// allocated yet (a newer generation made it). Failures are logged and left
// to the next boot.
func (p *Process) cleanupOrphanedSecrets(ctx context.Context) {
	o := p.Orchestrator
	if o == nil {
		return
	}
	var items UserItems
	if err := p.catalogCall(ctx, func() (err error) { items, err = p.Catalog.UserItems(ctx); return err }); err != nil {
		return
	}
	p.Log.Info("coordinator init: cleaning up orphaned secrets")
	ids, err := o.SecretUserIDs(ctx)
	if err != nil {
		p.Log.Warn(fmt.Sprintf("Failed to list secrets during orphan cleanup: %v", err))
		return
	}
	for _, id := range ids {
		switch {
		case items.Has(id):
		case id >= items.Next:
			p.Log.Info(fmt.Sprintf("coordinator init: not deleting orphaned secret u%d that was likely created by a newer deploy generation", id),
				"next_user_item_id", items.Next)
		default:
			p.Log.Info(fmt.Sprintf("coordinator init: deleting orphaned secret u%d", id))
			if err := o.DeleteSecret(ctx, id); err != nil {
				p.Log.Warn(fmt.Sprintf("Dropping orphaned secret has encountered an error: %v", err))
			}
		}
	}
}
