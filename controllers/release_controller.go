package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/render"
)

// ReleaseReconciler gives a batch's slot back: when its release policy says so, and always
// when the batch is deleted (a finalizer holds the object until then). Release stops the
// sealer pod, hands the slot's layer range to the node's scrubber (a dirty-slot record on the
// SealerNode, see ScrubReconciler) and frees the batch's claim; it is idempotent, needs no pod
// of its own, and a release that cannot finish is visible as a condition and an event.
type ReleaseReconciler struct {
	client.Client
	Recorder Recorder
	Timeout  time.Duration
	// Home is where the batches' pods and ConfigMaps live.
	Home render.Home
	// Pods reads the batches' pods, there or where a batch's status recorded them.
	Pods podReads
}

// Reconcile releases when due.
func (r *ReleaseReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var b sealv1.SealBatch
	if err := r.Get(ctx, req.NamespacedName, &b); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	deleting := b.DeletionTimestamp != nil
	if !controllerutil.ContainsFinalizer(&b, Finalizer) {
		// A batch holds nothing until it is placed, and its sealer starts only once the
		// finalizer is on: an unplaced batch is deleted at once, with nothing to release.
		if deleting || b.Status.Node == "" {
			return reconcile.Result{}, nil
		}
		controllerutil.AddFinalizer(&b, Finalizer)
		return reconcile.Result{}, client.IgnoreNotFound(r.Update(ctx, &b))
	}
	if !deleting {
		due, wait := releaseDue(&b, time.Now())
		if !due {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	done, err := r.release(ctx, &b, deleting)
	if err != nil || !done {
		return reconcile.Result{RequeueAfter: releaseRetry}, err
	}
	if deleting {
		if err := r.removeLeftovers(ctx, &b); err != nil {
			return reconcile.Result{}, err
		}
		controllerutil.RemoveFinalizer(&b, Finalizer)
		return reconcile.Result{}, client.IgnoreNotFound(r.Update(ctx, &b))
	}
	return reconcile.Result{}, nil
}

// removeLeftovers deletes what a deleted batch left in the shared sealer namespace (finished
// pods, its ConfigMaps and disruption budget): no owner reference crosses namespaces, so the
// garbage collector does not. In the batch's own namespace the collector does it.
func (r *ReleaseReconciler) removeLeftovers(ctx context.Context, b *sealv1.SealBatch) error {
	if !r.Home.Shared() {
		return nil
	}
	ns := r.Home.NamespaceOf(b)
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{render.LabelBatchUID: string(b.UID)}); err != nil {
		return err
	}
	objs := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.Home.ConfigMapName(b)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.Home.SeedsConfigMapName(b)}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.Home.DisruptionBudgetName(b)}},
	}
	for i := range pods.Items {
		objs = append(objs, &pods.Items[i])
	}
	for _, o := range objs {
		if err := r.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %s/%s of the deleted batch: %w", ns, o.GetName(), err)
		}
	}
	return nil
}

// releaseRetry is how soon a release that waits looks again (a sealer pod's end, or its own
// dirty-slot record reaching the cache, also wake it).
const releaseRetry = 2 * time.Second

// releaseDue applies the release policy to a live batch; wait is when to look again.
func releaseDue(b *sealv1.SealBatch, now time.Time) (due bool, wait time.Duration) {
	if b.Status.Node == "" || meta.IsStatusConditionTrue(b.Status.Conditions, sealv1.CondReleased) {
		return false, 0
	}
	switch b.Status.Phase {
	case sealv1.PhaseCompleted:
	case sealv1.PhaseFailed:
		// A failed batch keeps its layers (for inspection or a manual resume) unless the
		// policy releases on completion, or the outputs were declared taken.
		return b.Spec.ReleasePolicy == sealv1.ReleaseOnCompletion || b.Spec.OutputsTaken, 0
	default:
		return false, 0
	}
	switch b.Spec.ReleasePolicy {
	case sealv1.ReleaseOnOutputsTaken:
		return b.Spec.OutputsTaken, 0
	case sealv1.ReleaseAfterTTL:
		if b.Spec.OutputsTaken {
			return true, 0
		}
		ttl := time.Duration(0)
		if b.Spec.ReleaseTTL != nil {
			ttl = b.Spec.ReleaseTTL.Duration
		}
		end := now
		if b.Status.CompletionTime != nil {
			end = b.Status.CompletionTime.Add(ttl)
		}
		if now.Before(end) {
			return false, end.Sub(now)
		}
		return true, 0
	}
	return true, 0
}

// release runs the steps; done is false while it waits on a pod.
func (r *ReleaseReconciler) release(ctx context.Context, b *sealv1.SealBatch, deleting bool) (bool, error) {
	logger := log.FromContext(ctx).WithValues("batch", ledger.BatchKey(b), "node", b.Status.Node)
	force := b.Annotations[AnnotationForceRelease] == "true"
	if meta.IsStatusConditionTrue(b.Status.Conditions, sealv1.CondReleased) {
		return true, nil // released before (e.g. on completion), deleted now
	}

	// 1. The sealer must be gone before its slot is scrubbed or given to another batch, force
	// or not: a sealer on an unreachable node may still write the slot.
	waitFor, err := r.stopSealer(ctx, b)
	if err != nil {
		return false, err
	}
	if waitFor != "" {
		return false, r.waiting(ctx, b, sealv1.ReasonWaitingForPod, waitFor)
	}
	// 2. Hand the slot's range to the node's scrubber: recorded dirty on the SealerNode, it
	// stays booked until the scrub succeeds, so the batch need not wait for it (nor for a pod
	// that a quota or a down node would refuse) and its deletion always finishes.
	if !force {
		recorded, err := r.markDirty(ctx, b)
		if err != nil || !recorded {
			return false, err
		}
	}
	// 3. The slot is free once the batch says Released, or once it is gone (the caller removes
	// the finalizer): the batch is the only record of its claim.
	reason, msg := sealv1.ReasonSlotReleased, fmt.Sprintf("slot released; node %s scrubs it before its next batch", b.Status.Node)
	if force {
		reason, msg = sealv1.ReasonForcedRelease, "slot released by force (sealfleet.io/force-release): scratch not scrubbed"
	}
	switch {
	case b.Status.Node == "":
		msg = "nothing to release: the batch was never placed"
	case b.Spec.IsUpdate() && !force:
		msg = "cores and output booking released (an update holds no slot)"
	}
	logger.Info("released", "reason", reason)
	if deleting {
		return true, nil
	}
	return true, updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		setCondition(b, sealv1.CondReleased, metav1.ConditionTrue, reason, msg)
		meta.RemoveStatusCondition(&b.Status.Conditions, sealv1.CondDeletionIsBlocked)
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, string(reason), "Release", "%s", msg)
	})
}

// waiting reports a pending release; past the timeout it is reported stuck.
func (r *ReleaseReconciler) waiting(ctx context.Context, b *sealv1.SealBatch, reason sealv1.Reason, msg string) error {
	since := b.CreationTimestamp.Time
	if b.DeletionTimestamp != nil {
		since = b.DeletionTimestamp.Time
	} else if b.Status.CompletionTime != nil {
		since = b.Status.CompletionTime.Time
	}
	stuck := time.Since(since) > r.Timeout
	status := metav1.ConditionFalse
	if stuck {
		reason = sealv1.ReasonReleaseFailed
		msg = fmt.Sprintf("release stuck for %s: %s", r.Timeout, msg)
	}
	return updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		setCondition(b, sealv1.CondReleased, status, reason, msg)
		if b.DeletionTimestamp != nil {
			setCondition(b, sealv1.CondDeletionIsBlocked, metav1.ConditionTrue, reason, msg)
		}
	}, func(b *sealv1.SealBatch) {
		if stuck {
			metricReleaseFailures.WithLabelValues(string(sealv1.ReasonReleaseFailed)).Inc()
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, string(reason), "Release", "%s", msg)
		}
	})
}

// stopSealer deletes the batch's sealer pods that have not finished and says what it still
// waits for ("" once no sealer can write the slot). A pod counts as stopped once it is gone, or
// once its node is gone or carries the out-of-service taint (the admin's word that the node is
// shut down: the pod is then deleted at once, as the kubelet will never confirm it).
func (r *ReleaseReconciler) stopSealer(ctx context.Context, b *sealv1.SealBatch) (string, error) {
	// Where Home puts them, and where they were before a move of the sealer namespace (the
	// one its status recorded; the batch's own for a pod recorded before namespaces were).
	var pods corev1.PodList
	recorded := b.Status.PodNamespace
	if recorded == "" && b.Status.PodName != "" {
		recorded = b.Namespace
	}
	namespaces := []string{r.Home.NamespaceOf(b), recorded}
	slices.Sort(namespaces)
	for _, ns := range slices.Compact(namespaces) {
		if ns == "" {
			continue
		}
		var in corev1.PodList
		if err := r.Pods.List(ctx, ns, &in, client.MatchingLabels(render.SealerPods(b))); err != nil {
			return "", err
		}
		pods.Items = append(pods.Items, in.Items...)
	}
	var waiting []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		down, err := r.nodeDown(ctx, render.PodNode(p))
		if err != nil {
			return "", err
		}
		var opts []client.DeleteOption
		if down {
			opts = append(opts, client.GracePeriodSeconds(0))
		}
		if p.DeletionTimestamp == nil || down {
			if err := r.Delete(ctx, p, opts...); client.IgnoreNotFound(err) != nil {
				return "", err
			}
		}
		if !down {
			waiting = append(waiting, p.Name)
		}
	}
	if len(waiting) == 0 {
		return "", nil
	}
	return fmt.Sprintf("waiting for sealer pod %s on node %s to terminate (it may still write the slot); if the node is down, taint it %s=nodeshutdown:NoExecute or delete the Node, and the slot is freed",
		strings.Join(waiting, ", "), b.Status.Node, corev1.TaintNodeOutOfService), nil
}

// nodeDown reports whether no pod can run on the node any more: it is gone, or the admin marked
// it shut down with the out-of-service taint.
func (r *ReleaseReconciler) nodeDown(ctx context.Context, name string) (bool, error) {
	if name == "" {
		return false, nil
	}
	var n corev1.Node
	if err := r.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService {
			return true, nil
		}
	}
	return false, nil
}

// markDirty records the batch's slot range in its SealerNode's status.dirtySlots (unless there
// is nothing to scrub) and reports whether this controller's cache shows the record: placement
// reads the same cache, and so sees the dirty range before it sees the batch let go of it.
func (r *ReleaseReconciler) markDirty(ctx context.Context, b *sealv1.SealBatch) (bool, error) {
	if b.Status.Node == "" || b.Status.Slot == nil {
		return true, nil // an update holds no slot; an unplaced batch nothing
	}
	var sn sealv1.SealerNode
	if err := r.Get(ctx, client.ObjectKey{Name: b.Status.Node}, &sn); err != nil {
		// No SealerNode (the Node was deleted, and its SealerNode with it): nowhere to keep
		// a record, and no agent to report the devices.
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	claim, held := ledger.ClaimOf(b, func(string) ledger.Geometry { return ledger.GeometryOf(&sn) })
	if !held || !needsScrub(&sn) {
		return true, nil
	}
	for _, d := range sn.Status.DirtySlots {
		if d.BatchUID == string(b.UID) {
			return true, nil
		}
	}
	err := patchDirtySlots(ctx, r.Client, &sn, func(dirty []sealv1.DirtySlot) []sealv1.DirtySlot {
		return addDirty(dirty, sealv1.DirtySlot{
			Slot: claim.Slot, OffsetBytes: claim.Range.OffsetBytes, LengthBytes: claim.Range.LengthBytes,
			Batch: ledger.BatchKey(b), BatchUID: string(b.UID), Since: metav1.Now(),
			Message: "waiting for the scrub pod",
		})
	})
	if err == nil {
		r.Recorder.Eventf(b, &sn, corev1.EventTypeNormal, string(sealv1.ReasonSlotLeftToScrub), "Release",
			"slot %d of %s (%d bytes at offset %d of each layer device) left to scrub: the node's scrub pod discards it before another batch gets it (kubectl get sealernode %s -o jsonpath='{.status.dirtySlots}')",
			claim.Slot, sn.Name, claim.Range.LengthBytes, claim.Range.OffsetBytes, sn.Name)
	}
	return false, err
}

// SetupWithManager watches batches, their sealer pods (a release waits for them to end) and
// SealerNodes (a release waits for its dirty-slot record to show).
func (r *ReleaseReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("release").
		WithOptions(controller.Options{MaxConcurrentReconciles: batchWorkers}).
		For(&sealv1.SealBatch{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(batchOfObject)).
		Watches(&sealv1.SealerNode{}, handler.EnqueueRequestsFromMapFunc(dirtyBatches)).
		Complete(r)
}

// dirtyBatches maps a SealerNode to the batches its dirty slots name (those still releasing).
func dirtyBatches(_ context.Context, o client.Object) []reconcile.Request {
	sn, ok := o.(*sealv1.SealerNode)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	for _, d := range sn.Status.DirtySlots {
		if ns, name, ok := strings.Cut(d.Batch, "/"); ok {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	return out
}
