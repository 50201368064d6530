package component

import (
	"context"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/materializeinc/orchestratord/pkg/leaderelection/fence"
)

// What the owner can mend is reported; what retries mend is not, or a
// tenant would read Warnings about the operator's own passing troubles.
func TestRefusedIsTheSpecsToMend(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	for err, want := range map[error]bool{
		apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "d", field.ErrorList{field.Invalid(field.NewPath("spec"), 1, "no")}): true,
		apierrors.NewForbidden(gr, "d", errors.New("denied by policy")):                                                                                true,
		apierrors.NewBadRequest("bad"): true,
		fmt.Errorf("certificate x: %w", SpecError{Err: errors.New("ECDSA key size")}): true,
		apierrors.NewTooManyRequests("slow down", 1):                                  false,
		apierrors.NewServiceUnavailable("away"):                                       false,
		apierrors.NewTimeoutError("timeout", 1):                                       false,
		apierrors.NewConflict(gr, "d", errors.New("changed")):                         false,
		fmt.Errorf("PATCH x: %w", fence.ErrFenced):                                    false,
		context.Canceled:                 false,
		errors.New("connection refused"): false,
	} {
		if got := Refused(err); got != want {
			t.Errorf("Refused(%v) = %v, want %v", err, got, want)
		}
	}
	if Refused(nil) {
		t.Error("Refused(nil)")
	}
}
