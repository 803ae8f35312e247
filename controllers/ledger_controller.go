package controllers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/ledger"
)

// orphanGrace keeps a reservation whose batch is not (yet) in the cache from being
// collected: placement writes the ledger before the batch status.
const orphanGrace = 2 * time.Minute

// LedgerReconciler keeps each SealerNode's ledger geometry (slot size and count) in step with
// its ready layer devices and spec, collects reservations of batches that no longer exist, and
// exports slot metrics.
type LedgerReconciler struct {
	client.Client
}

// Reconcile updates one SealerNode's ledger.
func (r *LedgerReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var sn sealv1.SealerNode
	if err := r.Get(ctx, req.NamespacedName, &sn); err != nil {
		if client.IgnoreNotFound(err) == nil {
			metricSlots.DeleteLabelValues(req.Name, "free")
			metricSlots.DeleteLabelValues(req.Name, "used")
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	next := sn.DeepCopy()
	ledger.Geometry(next)

	var batches sealv1.SealBatchList
	if err := r.List(ctx, &batches); err != nil {
		return reconcile.Result{}, err
	}
	live := make(map[string]bool, len(batches.Items))
	for i := range batches.Items {
		live[string(batches.Items[i].UID)] = true
	}
	requeue := time.Duration(0)
	kept := next.Status.Slots.Reservations[:0]
	for _, res := range next.Status.Slots.Reservations {
		if !live[res.BatchUID] {
			if res.Since == nil || time.Since(res.Since.Time) > orphanGrace {
				log.FromContext(ctx).Info("dropping reservation of a batch that no longer exists", "node", sn.Name, "slot", res.Slot, "batch", res.Batch)
				continue
			}
			requeue = orphanGrace
		}
		kept = append(kept, res)
	}
	next.Status.Slots.Reservations = kept
	refreshSummary(next)
	used := len(next.Status.Slots.Reservations)
	metricSlots.WithLabelValues(sn.Name, "used").Set(float64(used))
	metricSlots.WithLabelValues(sn.Name, "free").Set(float64(next.Status.FreeSlots))
	if !equality.Semantic.DeepEqual(sn.Status, next.Status) {
		if err := r.Status().Update(ctx, next); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// SetupWithManager watches SealerNodes, and batch deletions (their reservations may be gone).
func (r *LedgerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("ledger").
		For(&sealv1.SealerNode{}).
		Watches(&sealv1.SealBatch{}, handler.EnqueueRequestsFromMapFunc(r.nodesHolding), builderDeleted()).
		Complete(r)
}

// nodesHolding maps a deleted batch to the SealerNodes whose ledger may still name it: the
// node in its status or, for a batch deleted between placement's ledger write and its status
// write, any node holding its UID (without this it stayed booked until an unrelated event).
func (r *LedgerReconciler) nodesHolding(ctx context.Context, o client.Object) []reconcile.Request {
	b := o.(*sealv1.SealBatch)
	if b.Status.Node != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: b.Status.Node}}}
	}
	var sns sealv1.SealerNodeList
	if err := r.List(ctx, &sns); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range sns.Items {
		if ledger.Holder(&sns.Items[i], b.UID) != nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: sns.Items[i].Name}})
		}
	}
	return reqs
}
