package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/render"
)

// ScrubReconciler scrubs the dirty slots that releases recorded on each SealerNode: one scrub
// pod per slot in the operator's node-pod namespace (never a tenant's, so no tenant quota or
// admission policy can refuse it), retried with back-off until it succeeds; then the record
// goes and the slot is free for placement. It touches only the devices the SealerNode spec
// names, whatever the status lists.
type ScrubReconciler struct {
	client.Client
	Recorder Recorder
	// Namespace holds the scrub pods.
	Namespace  string
	Image      string
	PullPolicy corev1.PullPolicy
	// PullSecrets of scrub pods (they must exist in Namespace).
	PullSecrets []string
	// HostNetwork runs scrub pods on the host network (--sealer-host-network).
	HostNetwork bool
}

// Back-off between scrub attempts of one slot: first retry after scrubBackoffBase, doubling
// up to scrubBackoffMax.
const (
	scrubBackoffBase = 10 * time.Second
	scrubBackoffMax  = 10 * time.Minute
)

// +kubebuilder:rbac:groups=sealfleet.io,resources=sealernodes/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete

// slotChange is what one pass decided for a dirty slot.
type slotChange struct {
	remove bool
	next   sealv1.DirtySlot
}

// Reconcile drives every dirty slot of one SealerNode one step.
func (r *ScrubReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var sn sealv1.SealerNode
	if err := r.Get(ctx, req.NamespacedName, &sn); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	pods, err := r.scrubPods(ctx, sn.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	blocked, err := r.nodeBlocked(ctx, sn.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := time.Now()
	var wait time.Duration
	changes := map[int32]slotChange{}
	for _, d := range sn.Status.DirtySlots {
		name := render.ScrubPodName(sn.Name, d.Slot, d.BatchUID)
		pod := pods[name]
		if pod != nil && pod.Annotations[render.AnnotationScrubBatchUID] != d.BatchUID {
			pod = nil // another record's pod that happens to share the name: deleted below
		} else {
			delete(pods, name)
		}
		c, after, err := r.step(ctx, &sn, d, pod, blocked, now)
		if err != nil {
			return reconcile.Result{}, err
		}
		if c.remove || c.next != d {
			changes[d.Slot] = c
		}
		if after > 0 && (wait == 0 || after < wait) {
			wait = after
		}
	}
	for _, p := range pods { // leftovers of records that are gone
		if p.DeletionTimestamp != nil {
			continue
		}
		if err := r.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
	}
	if len(changes) > 0 {
		err := patchDirtySlots(ctx, r.Client, &sn, func(dirty []sealv1.DirtySlot) []sealv1.DirtySlot {
			return slices.DeleteFunc(applyChanges(dirty, changes), func(d sealv1.DirtySlot) bool { return d.Slot < 0 })
		})
		if err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

// applyChanges applies each slot's change to the entry it was decided for (same slot and
// batch): a record replaced since is left alone. Removed entries get slot -1.
func applyChanges(dirty []sealv1.DirtySlot, changes map[int32]slotChange) []sealv1.DirtySlot {
	for i := range dirty {
		c, ok := changes[dirty[i].Slot]
		if !ok || c.next.BatchUID != dirty[i].BatchUID {
			continue
		}
		if c.remove {
			dirty[i].Slot = -1
		} else {
			dirty[i] = c.next
		}
	}
	return dirty
}

// step moves one dirty slot on: start its scrub pod, or read the pod's outcome. after is when
// to look again (0: a pod event will wake it).
func (r *ScrubReconciler) step(ctx context.Context, sn *sealv1.SealerNode, d sealv1.DirtySlot, pod *corev1.Pod, blocked string, now time.Time) (slotChange, time.Duration, error) {
	next := d
	what := fmt.Sprintf("slot %d of %s (%d bytes at offset %d of each layer device, left by %s)", d.Slot, sn.Name, d.LengthBytes, d.OffsetBytes, d.Batch)
	if pod != nil && pod.DeletionTimestamp != nil && pod.Status.Phase != corev1.PodSucceeded {
		// On its way out: a failure counted when this controller deleted it, or a pod someone
		// else deleted; the next one starts once it is gone.
		return slotChange{next: d}, releaseRetry, nil
	}
	if pod != nil {
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				return slotChange{}, 0, err
			}
			r.Recorder.Eventf(sn, nil, corev1.EventTypeNormal, string(sealv1.ReasonSlotScrubbed), "Scrub", "%s scrubbed", what)
			return slotChange{remove: true, next: d}, 0, nil
		case corev1.PodFailed:
			reason, msg, _ := podFailure(pod)
			if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				return slotChange{}, 0, err
			}
			next.Attempts++
			next.LastAttemptTime = &metav1.Time{Time: now.Truncate(time.Second)}
			next.Message = truncate(fmt.Sprintf("scrub pod failed (%s): %s; retrying", reason, msg), 1000)
			metricReleaseFailures.WithLabelValues("scrub").Inc()
			r.Recorder.Eventf(sn, nil, corev1.EventTypeWarning, string(sealv1.ReasonScrubFailed), "Scrub", "%s: %s", what, next.Message)
			return slotChange{next: next}, scrubBackoff(next.Attempts), nil
		}
		if why := render.Unschedulable(pod); why != "" {
			next.Message = truncate("scrub pod waits for kube-scheduler: "+why, 1000)
		}
		return slotChange{next: next}, 0, nil // pending or running
	}
	devices := scrubDevices(sn)
	if len(devices) == 0 || sn.Spec.DeviceMode == sealv1.DeviceModeVFIO {
		// vfio devices are not visible to the kernel, and a node without layer devices has
		// nothing left to discard: the next batch overwrites the range.
		r.Recorder.Eventf(sn, nil, corev1.EventTypeNormal, string(sealv1.ReasonScrubSkipped), "Scrub", "%s: no kernel-visible layer device to discard; the next batch overwrites it", what)
		return slotChange{remove: true, next: d}, 0, nil
	}
	if blocked != "" {
		next.Message = "waiting: " + blocked
		return slotChange{next: next}, time.Minute, nil
	}
	if strings.HasPrefix(d.BatchUID, qualifyBatchPrefix) && d.Message == qualifyBookedMessage && now.Sub(d.Since.Time) < qualifyTimeout+time.Minute {
		// A qualification's write test: discarded once the qualifier recorded its end (or it
		// was lost for longer than any qualification runs), never under its pod.
		return slotChange{next: d}, requeuePending, nil
	}
	if d.LastAttemptTime != nil {
		if left := d.LastAttemptTime.Add(scrubBackoff(d.Attempts)).Sub(now); left > 0 {
			return slotChange{next: d}, left, nil
		}
	}
	p := render.ScrubPod(render.ScrubInput{
		Namespace: r.Namespace, Node: sn.Name, Slot: d.Slot, BatchUID: d.BatchUID, Devices: devices, Roots: sn.Spec.Roots(),
		Offset: d.OffsetBytes, Length: d.LengthBytes,
		HostNetwork: r.HostNetwork, PullSecrets: r.PullSecrets,
	}, r.Image, r.PullPolicy)
	if err := controllerutil.SetControllerReference(sn, p, r.Scheme()); err != nil {
		return slotChange{}, 0, err
	}
	if err := r.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
		reason, ok := refusalReason(err)
		if !ok && apierrors.IsNotFound(err) { // the scrub namespace is missing: say so on the record
			reason, ok = "NamespaceNotFound", true
		}
		if !ok {
			return slotChange{}, 0, err
		}
		next.Attempts++
		next.LastAttemptTime = &metav1.Time{Time: now.Truncate(time.Second)}
		next.Message = truncate(fmt.Sprintf("scrub pod %s/%s refused (%s): %v; retrying", r.Namespace, p.Name, reason, err), 1000)
		metricReleaseFailures.WithLabelValues("scrub").Inc()
		r.Recorder.Eventf(sn, nil, corev1.EventTypeWarning, string(sealv1.ReasonScrubFailed), "Scrub", "%s: %s", what, next.Message)
		return slotChange{next: next}, scrubBackoff(next.Attempts), nil
	}
	log.FromContext(ctx).Info("scrubbing", "node", sn.Name, "slot", d.Slot, "pod", p.Name, "leftBy", d.Batch)
	return slotChange{next: d}, 0, nil // the record keeps its message: one write less per slot
}

// scrubBackoff is the wait after the n-th failed attempt.
func scrubBackoff(n int32) time.Duration {
	d := scrubBackoffBase
	for i := int32(1); i < n && d < scrubBackoffMax; i++ {
		d *= 2
	}
	return min(d, scrubBackoffMax)
}

// nodeBlocked says why no scrub pod can run on the node now ("" when one can): it has no
// Node, or the admin marked it out of service (it is shut down; the record waits for it).
func (r *ScrubReconciler) nodeBlocked(ctx context.Context, name string) (string, error) {
	var n corev1.Node
	if err := r.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		if apierrors.IsNotFound(err) {
			return "node " + name + " not found", nil
		}
		return "", err
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService {
			return fmt.Sprintf("node %s is tainted %s (shut down); the scrub runs when it is back", name, corev1.TaintNodeOutOfService), nil
		}
	}
	return "", nil
}

// scrubPods lists the node's scrub pods by name.
func (r *ScrubReconciler) scrubPods(ctx context.Context, node string) (map[string]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(r.Namespace),
		client.MatchingLabels{render.LabelComponent: render.ComponentScrub}); err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		if p := &list.Items[i]; p.Annotations[render.AnnotationScrubNode] == node {
			out[p.Name] = p
		}
	}
	return out, nil
}

// scrubDevices are the node's usable layer devices (named by its spec) the kernel sees.
func scrubDevices(sn *sealv1.SealerNode) []sealv1.LayerDeviceStatus {
	return slices.DeleteFunc(sn.UsableLayerDevices(), func(d sealv1.LayerDeviceStatus) bool { return d.Path == "" })
}

// needsScrub reports whether a released slot on the node leaves anything to discard.
func needsScrub(sn *sealv1.SealerNode) bool {
	return sn.Spec.DeviceMode != sealv1.DeviceModeVFIO && len(scrubDevices(sn)) > 0
}

// addDirty records a dirty range; a record for the same slot (a geometry change left two
// ranges under one index) widens to cover both.
func addDirty(dirty []sealv1.DirtySlot, d sealv1.DirtySlot) []sealv1.DirtySlot {
	for i := range dirty {
		if dirty[i].Slot != d.Slot {
			continue
		}
		end := max(dirty[i].OffsetBytes+dirty[i].LengthBytes, d.OffsetBytes+d.LengthBytes)
		d.OffsetBytes = min(dirty[i].OffsetBytes, d.OffsetBytes)
		d.LengthBytes = end - d.OffsetBytes
		d.Since = dirty[i].Since
		dirty[i] = d
		return dirty
	}
	return append(dirty, d)
}

// patchDirtySlots rewrites a SealerNode's status.dirtySlots (the one status field the
// operator owns) with an optimistic lock, retrying on conflicts with the agent's writes; sn is
// updated to what was written.
func patchDirtySlots(ctx context.Context, c client.Client, sn *sealv1.SealerNode, mutate func([]sealv1.DirtySlot) []sealv1.DirtySlot) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := sn
		if !first {
			cur = &sealv1.SealerNode{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(sn), cur); err != nil {
				return err
			}
		}
		first = false
		next := cur.DeepCopy()
		next.Status.DirtySlots = mutate(slices.Clone(cur.Status.DirtySlots))
		if err := c.Status().Patch(ctx, next, client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		*sn = *next
		return nil
	})
}

// SetupWithManager watches SealerNodes with dirty slots and the scrub pods they own.
func (r *ScrubReconciler) SetupWithManager(mgr ctrl.Manager) error {
	hasDirty := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return dirtyOf(e.Object) > 0 },
		UpdateFunc:  func(e event.UpdateEvent) bool { return dirtyOf(e.ObjectNew) > 0 || dirtyOf(e.ObjectOld) > 0 },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("scrub").
		WithOptions(controller.Options{MaxConcurrentReconciles: batchWorkers}).
		For(&sealv1.SealerNode{}, builder.WithPredicates(hasDirty)).
		Owns(&corev1.Pod{}).
		Complete(r)
}

func dirtyOf(o client.Object) int {
	if sn, ok := o.(*sealv1.SealerNode); ok {
		return len(sn.Status.DirtySlots)
	}
	return 0
}
