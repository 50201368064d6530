package materialize

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/controllers/apply"
	"github.com/materializeinc/orchestratord/pkg/controllers/unreadable"
)

// UpstreamFinalizer is the finalizer upstream orchestratord puts on every
// Materialize. This operator needs none (owner references and garbage
// collection remove the children), so it only takes upstream's away when a
// Materialize it took over is deleted; otherwise the delete would hang.
const UpstreamFinalizer = "orchestratord.materialize.cloud/materialize"

// releaseUpstreamFinalizer removes UpstreamFinalizer from a Materialize
// being deleted. Upstream's cleanup does nothing but forget the object, so
// there is nothing to do first. The patch carries the resourceVersion it was
// computed from, so a finalizer another controller added meanwhile is not
// dropped: the conflict retries with a fresh copy.
func (r *reconciler) releaseUpstreamFinalizer(ctx context.Context, mz *v1alpha1.Materialize) error {
	i := slices.Index(mz.Finalizers, UpstreamFinalizer)
	if i < 0 {
		return nil
	}
	rest := slices.Delete(slices.Clone(mz.Finalizers), i, i+1)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers":      rest,
		"resourceVersion": mz.ResourceVersion,
	}})
	if err != nil {
		return err
	}
	// An unreadable Materialize is released too: the patch takes effect
	// though its answer, the object, is not read (unreadable.GuardTransport).
	_, err = r.d.MZ.MaterializeV1alpha1().Materializes(mz.Namespace).Patch(ctx, mz.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: apply.FieldManager})
	if err != nil && !errors.Is(err, unreadable.ErrCostlyQuantity) {
		return err
	}
	r.d.Recorder.Eventf(mz, corev1.EventTypeNormal, "FinalizerRemoved", "removed upstream orchestratord's finalizer %s", UpstreamFinalizer)
	return nil
}
