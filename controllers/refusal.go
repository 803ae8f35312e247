package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// creationRefused is an object the batch's run needs that the API server refused by policy
// (quota, Pod Security admission, a webhook, RBAC, validation): retrying at once cannot help,
// and only the batch's status and events can tell its owner, who may not read operator logs.
type creationRefused struct {
	what   string // e.g. "sealer pod b-sealer-1"
	reason sealv1.Reason
	err    error
}

func (e *creationRefused) Error() string { return fmt.Sprintf("%s refused: %v", e.what, e.err) }
func (e *creationRefused) Unwrap() error { return e.err }

// refusalReason classifies a create error: ok is false for errors that are not a refusal by
// policy (a timeout, a conflict, the API server unreachable), which are retried as they are.
func refusalReason(err error) (reason sealv1.Reason, ok bool) {
	switch {
	case apierrors.IsInvalid(err):
		return sealv1.ReasonObjectInvalid, true
	case !apierrors.IsForbidden(err):
		return "", false
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "exceeded quota") || strings.Contains(msg, "for quota"):
		return sealv1.ReasonQuotaExceeded, true
	case strings.Contains(msg, "PodSecurity"):
		return sealv1.ReasonPodSecurity, true
	case strings.Contains(msg, "admission webhook") || strings.Contains(msg, "ValidatingAdmissionPolicy"):
		return sealv1.ReasonWebhookRefused, true
	}
	return sealv1.ReasonForbidden, true
}

// create makes obj (what names it in messages); one that exists already counts as made. A
// refusal by policy comes back as *creationRefused.
func (r *SealerReconciler) create(ctx context.Context, obj client.Object, what string) error {
	err := r.Create(ctx, obj)
	if err == nil || apierrors.IsAlreadyExists(err) {
		return nil
	}
	if reason, ok := refusalReason(err); ok {
		return &creationRefused{what: what, reason: reason, err: err}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// recordRefusal puts a refusal on the batch: the PodCreationRefused condition, the status
// message and a warning event, each once per distinct refusal. The error goes back to the
// controller, whose rate limiter backs the retries off (milliseconds doubling to minutes)
// while nothing changes; an edit of the batch, or the operator's resync, tries again at once.
// The batch keeps what placement gave it (node, slot, cores): a refusal is usually a quota or
// a policy its owner can fix, and deleting the batch frees them.
func (r *SealerReconciler) recordRefusal(ctx context.Context, key types.NamespacedName, refused *creationRefused) error {
	var b sealv1.SealBatch
	if err := r.Get(ctx, key, &b); err != nil {
		return client.IgnoreNotFound(err)
	}
	msg := fmt.Sprintf("%s: the API server refused it (%s): %v. The batch keeps its node, slot and cores and retries with backoff: fix the namespace's quota or policy, or delete the batch to free them",
		refused.what, refused.reason, refused.err)
	if err := updateStatus(ctx, r.Client, &b, func(b *sealv1.SealBatch) {
		setCondition(b, sealv1.CondPodCreationRefused, metav1.ConditionTrue, refused.reason, msg)
		b.Status.Message = msg
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, string(sealv1.CondPodCreationRefused), "Seal", "%s", msg)
	}); err != nil {
		return errors.Join(refused, err)
	}
	return refused
}

// clearRefusal marks an earlier refusal over once the pod exists (nothing when there was none).
func clearRefusal(b *sealv1.SealBatch, msg string) {
	if c := meta.FindStatusCondition(b.Status.Conditions, sealv1.CondPodCreationRefused); c != nil && c.Status == metav1.ConditionTrue {
		setCondition(b, sealv1.CondPodCreationRefused, metav1.ConditionFalse, sealv1.ReasonPodCreated, msg)
	}
}
