package controllers

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/placement"
)

// setCondition sets a condition stamped with the batch's generation.
func setCondition(b *sealv1.SealBatch, t string, s metav1.ConditionStatus, reason sealv1.Reason, msg string) {
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
		Type: t, Status: s, Reason: string(reason), Message: msg, ObservedGeneration: b.Generation,
	})
}

// updateStatus applies mutate to the freshest copy of the batch and writes the status,
// retrying on conflicts; it writes only when something changed, and then calls after (for
// events). b is updated to what was written. Every phase change of a batch goes through here
// and must be one the phase machine allows (sealv1.SealBatchPhase.CanMoveTo).
func updateStatus(ctx context.Context, c client.Client, b *sealv1.SealBatch, mutate func(*sealv1.SealBatch), after func(*sealv1.SealBatch)) error {
	first := true
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := b
		if !first {
			cur = &sealv1.SealBatch{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil {
				return err
			}
		}
		first = false
		next := cur.DeepCopy()
		mutate(next)
		if from, to := cur.Status.Phase, next.Status.Phase; !from.CanMoveTo(to) {
			// A decision made on a batch that moved on since (another writer completed or
			// failed it): never written, the next reconcile decides again.
			return fmt.Errorf("batch %s/%s: the phase machine does not move %q to %q", cur.Namespace, cur.Name, from, to)
		}
		next.Status.ObservedGeneration = next.Generation
		next.Status.BatchSize = int32(len(next.Spec.Sectors))
		if equality.Semantic.DeepEqual(cur.Status, next.Status) {
			*b = *cur
			return nil
		}
		if err := c.Status().Update(ctx, next); err != nil {
			return err
		}
		changed = true
		*b = *next
		return nil
	})
	if err == nil && changed && after != nil {
		after(b)
	}
	return err
}

// sealerNodeChanged ignores SealerNode updates that change nothing placement (or the
// qualification it runs) reads (e.g. a
// rescan that only bumped lastScanTime). Of the dirty slots only a scrubbed one counts (it
// frees a slot): a new record frees nothing, and a scrub's attempts and messages are many.
var sealerNodeChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*sealv1.SealerNode)
		n, ok2 := e.ObjectNew.(*sealv1.SealerNode)
		if !ok1 || !ok2 {
			return true
		}
		if scrubbedOne(o.Status.DirtySlots, n.Status.DirtySlots) {
			return true
		}
		os, ns := o.Status.DeepCopy(), n.Status.DeepCopy()
		os.LastScanTime, ns.LastScanTime = nil, nil
		os.DirtySlots, ns.DirtySlots = nil, nil
		for i := range os.Conditions {
			os.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		for i := range ns.Conditions {
			ns.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		if o.Annotations[sealv1.AnnotationQualify] != n.Annotations[sealv1.AnnotationQualify] {
			return true // a qualification request: the cycle starts it
		}
		return !reflect.DeepEqual(o.Spec, n.Spec) || !equality.Semantic.DeepEqual(os, ns)
	},
}

// batchSchedulingChanged passes batch updates that can change a scheduling decision: a spec
// edit, or a phase, node or release change (capacity taken or freed). Progress, condition and
// unschedulable-reason writes (the bulk of status traffic) do not rerun the queue.
var batchSchedulingChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*sealv1.SealBatch)
		n, ok2 := e.ObjectNew.(*sealv1.SealBatch)
		if !ok1 || !ok2 {
			return true
		}
		return o.Generation != n.Generation || o.Status.Phase != n.Status.Phase || o.Status.Node != n.Status.Node ||
			meta.IsStatusConditionTrue(o.Status.Conditions, sealv1.CondReleased) != meta.IsStatusConditionTrue(n.Status.Conditions, sealv1.CondReleased)
	},
}

// nodeSchedulingChanged passes Node updates that change labels, taints, cordon or the GPUs the
// kubelet can grant; heartbeats (other status updates) are dropped.
var nodeSchedulingChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return !reflect.DeepEqual(o.Labels, n.Labels) || !reflect.DeepEqual(o.Spec.Taints, n.Spec.Taints) ||
			o.Spec.Unschedulable != n.Spec.Unschedulable || placement.AllocatableGPUs(o) != placement.AllocatableGPUs(n)
	},
}

// scrubbedOne reports whether a dirty slot of before is gone from after.
func scrubbedOne(before, after []sealv1.DirtySlot) bool {
	left := make(map[string]bool, len(after))
	for _, d := range after {
		left[d.BatchUID] = true
	}
	for _, d := range before {
		if !left[d.BatchUID] {
			return true
		}
	}
	return false
}
