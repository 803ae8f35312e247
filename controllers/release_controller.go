package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/render"
)

// ReleaseReconciler gives a batch's slot back: when its release policy says so, and always
// when the batch is deleted (a finalizer holds the object until then). Release stops the
// sealer pod, scrubs the slot's layer ranges on the node, and frees the ledger entry; it is
// idempotent, and a release that cannot finish is visible as a condition and an event.
type ReleaseReconciler struct {
	client.Client
	Recorder   Recorder
	ScrubImage string
	PullPolicy corev1.PullPolicy
	// PullSecrets of scrub pods.
	PullSecrets []string
	Timeout     time.Duration
	// HostNetwork runs scrub pods on the host network (--sealer-host-network).
	HostNetwork bool
	// APIReader reads past the informer cache (see needsScrub).
	APIReader client.Reader
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
		return reconcile.Result{RequeueAfter: 2 * time.Second}, err
	}
	if deleting {
		controllerutil.RemoveFinalizer(&b, Finalizer)
		return reconcile.Result{}, client.IgnoreNotFound(r.Update(ctx, &b))
	}
	return reconcile.Result{}, nil
}

// releaseDue applies the release policy to a live batch; wait is when to look again.
func releaseDue(b *sealv1.SealBatch, now time.Time) (due bool, wait time.Duration) {
	if b.Status.Node == "" || meta.IsStatusConditionTrue(b.Status.Conditions, CondReleased) {
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
	if meta.IsStatusConditionTrue(b.Status.Conditions, CondReleased) {
		return true, nil // released before (e.g. on completion), deleted now
	}

	// 1. The sealer must be gone before its slot is scrubbed or given to another batch, force
	// or not: a sealer on an unreachable node may still write the slot.
	waitFor, err := r.stopSealer(ctx, b)
	if err != nil {
		return false, err
	}
	if waitFor != "" {
		return false, r.waiting(ctx, b, ReasonWaitingForPod, waitFor)
	}
	// 2. Scrub the slot on the node (skipped when the node is gone: nothing left to scrub).
	if !force {
		scrubbed, msg, err := r.scrub(ctx, b)
		if err != nil {
			return false, err
		}
		if !scrubbed {
			return false, r.waiting(ctx, b, ReasonReleasePending, msg)
		}
	}
	// 3. The slot is free once the batch says Released, or once it is gone (the caller removes
	// the finalizer): the batch is the only record of its claim.
	if err := r.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: render.ScrubPodName(b)}}); client.IgnoreNotFound(err) != nil {
		logger.Error(err, "deleting the scrub pod")
	}
	reason, msg := ReasonSlotReleased, "slot released and scrubbed"
	if force {
		reason, msg = ReasonForcedRelease, "slot released by force (sealfleet.io/force-release): scratch not scrubbed"
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
		setCondition(b, CondReleased, metav1.ConditionTrue, reason, msg)
		meta.RemoveStatusCondition(&b.Status.Conditions, CondDeletionIsBlocked)
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, string(reason), "Release", "%s", msg)
	})
}

// waiting reports a pending release; past the timeout it is reported stuck.
func (r *ReleaseReconciler) waiting(ctx context.Context, b *sealv1.SealBatch, reason Reason, msg string) error {
	since := b.CreationTimestamp.Time
	if b.DeletionTimestamp != nil {
		since = b.DeletionTimestamp.Time
	} else if b.Status.CompletionTime != nil {
		since = b.Status.CompletionTime.Time
	}
	stuck := time.Since(since) > r.Timeout
	status := metav1.ConditionFalse
	if stuck {
		scrubbing := reason == ReasonReleasePending // a sealer pod is never skipped, a scrub may be
		reason = ReasonReleaseFailed
		msg = fmt.Sprintf("release stuck for %s: %s", r.Timeout, msg)
		if scrubbing {
			msg += fmt.Sprintf("; to give the slot back unscrubbed, annotate the SealBatch %s=true", AnnotationForceRelease)
		}
	}
	return updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		setCondition(b, CondReleased, status, reason, msg)
		if b.DeletionTimestamp != nil {
			setCondition(b, CondDeletionIsBlocked, metav1.ConditionTrue, reason, msg)
		}
	}, func(b *sealv1.SealBatch) {
		if stuck {
			metricReleaseFailures.WithLabelValues(string(ReasonReleaseFailed)).Inc()
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, string(reason), "Release", "%s", msg)
		}
	})
}

// stopSealer deletes the batch's sealer pods that have not finished and says what it still
// waits for ("" once no sealer can write the slot). A pod counts as stopped once it is gone, or
// once its node is gone or carries the out-of-service taint (the admin's word that the node is
// shut down: the pod is then deleted at once, as the kubelet will never confirm it).
func (r *ReleaseReconciler) stopSealer(ctx context.Context, b *sealv1.SealBatch) (string, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(b.Namespace), client.MatchingLabels(render.SealerPods(b))); err != nil {
		return "", err
	}
	var waiting []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		down, err := r.nodeDown(ctx, p.Spec.NodeName)
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

// scrub runs the scrub pod on the batch's node and reports whether it succeeded.
func (r *ReleaseReconciler) scrub(ctx context.Context, b *sealv1.SealBatch) (bool, string, error) {
	if b.Status.Node == "" || b.Status.Slot == nil {
		return true, "", nil
	}
	var sn sealv1.SealerNode
	if err := r.Get(ctx, client.ObjectKey{Name: b.Status.Node}, &sn); err != nil {
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "", err
	}
	claim, held := ledger.ClaimOf(b, func(string) ledger.Geometry { return ledger.GeometryOf(&sn) })
	if !held {
		return true, "", nil
	}
	var node corev1.Node
	if err := r.Get(ctx, client.ObjectKey{Name: b.Status.Node}, &node); apierrors.IsNotFound(err) {
		return true, "", nil
	}
	paths := render.LayerPaths(sn.Status.LayerDevices)
	if len(paths) == 0 || sn.Spec.DeviceMode == sealv1.DeviceModeVFIO {
		// vfio devices are not visible to the kernel; the next batch overwrites the slot.
		return true, "", nil
	}
	var pod corev1.Pod
	err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: render.ScrubPodName(b)}, &pod)
	if apierrors.IsNotFound(err) {
		if need, err := r.needsScrub(ctx, b); err != nil || !need {
			return !need, "", err
		}
		p := render.ScrubPod(render.ScrubInput{
			Batch: b, Node: b.Status.Node, Devices: sn.Status.LayerDevices,
			Offset:      claim.Range.OffsetBytes,
			Length:      claim.Range.LengthBytes, // the slot's whole share of each device
			HostNetwork: r.HostNetwork,
			PullSecrets: r.PullSecrets,
		}, r.ScrubImage, r.PullPolicy)
		if b.DeletionTimestamp == nil {
			if err := controllerutil.SetControllerReference(b, p, r.Scheme()); err != nil {
				return false, "", err
			}
		}
		if err := r.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, "", err
		}
		return false, "scrubbing the slot on " + b.Status.Node, nil
	}
	if err != nil {
		return false, "", err
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return true, "", nil
	case corev1.PodFailed:
		reason, msg, _ := podFailure(&pod)
		metricReleaseFailures.WithLabelValues("scrub").Inc()
		return false, fmt.Sprintf("scrub pod failed (%s): %s", reason, msg), nil
	}
	return false, "scrubbing the slot on " + b.Status.Node, nil
}

// needsScrub reads the batch from the API server before a scrub pod is created: a cached copy
// older than this controller's own last write (Released set, or the finalizer removed) would
// otherwise start a second scrub after the first one's pod was cleaned up.
func (r *ReleaseReconciler) needsScrub(ctx context.Context, b *sealv1.SealBatch) (bool, error) {
	if r.APIReader == nil {
		return true, nil
	}
	var fresh sealv1.SealBatch
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(b), &fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	released := meta.IsStatusConditionTrue(fresh.Status.Conditions, CondReleased)
	return fresh.UID == b.UID && !released && controllerutil.ContainsFinalizer(&fresh, Finalizer), nil
}

// SetupWithManager watches batches and their scrub pods.
func (r *ReleaseReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("release").
		WithOptions(controller.Options{MaxConcurrentReconciles: batchWorkers}).
		For(&sealv1.SealBatch{}).
		Owns(&corev1.Pod{}).
		Complete(r)
}
