package component

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/materializeinc/orchestratord/pkg/boundedtext"
)

// ReasonFailedApply is the Warning Event of a child the API server refused,
// or that the owner's spec cannot make, which retries will not mend: only
// a change to the spec (or to the policy that refused it) does.
const ReasonFailedApply = "FailedApply"

// maxRefusalBytes bounds the Event's message: the API server's refusal
// quotes what the tenant wrote.
const maxRefusalBytes = 1024

// SpecError is a child the owner's spec cannot make (a certificate spec
// cert-manager would refuse).
type SpecError struct{ Err error }

func (e SpecError) Error() string { return e.Err.Error() }
func (e SpecError) Unwrap() error { return e.Err }

// ReportRefused records a Warning Event on cr for err when it is the
// spec's to mend (a SpecError, or the API server refusing a child as
// invalid or forbidden): without it the owner would see a Ready condition
// that never comes, or one that no longer tells the truth, and nothing
// saying why. Other errors (the API server away, a conflict) are retried
// without a word.
func (o Owner[T, AC]) ReportRefused(cr T, err error) {
	if !Refused(err) {
		return
	}
	o.Recorder.Eventf(cr, corev1.EventTypeWarning, ReasonFailedApply, "Failed to apply %s's objects: %s",
		o.Kind.App, boundedtext.Cut(err.Error(), maxRefusalBytes))
}

// Refused reports whether err is the spec's to mend: a SpecError, or the
// API server refusing an object as invalid or forbidden (a policy, a
// quota). Throttling, timeouts, an API server away, a fenced write or a
// cancelled term are not: retries mend those.
func Refused(err error) bool {
	var spec SpecError
	return err != nil && (errors.As(err, &spec) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err))
}
