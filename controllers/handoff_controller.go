package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/remoteseal/orders"
	"github.com/sealfleet/sealfleet/internal/remoteseal/provider"
	"github.com/sealfleet/sealfleet/internal/render"
)

// HandoffReconciler gives every sector of a batch handed to a lotus-miner (spec.handoff) its
// SealOrder, with the miner's Secret as partner and the batch's ticket: from there the order
// controller hands the sector over once sealed (SectorReceive), passes lotus' seed to C1 and
// deletes the outputs when lotus is done with them, as it does for a Curio partner's order.
type HandoffReconciler struct {
	client.Client
	Recorder Recorder
	// PartnerNamespace holds the lotus-miner Secrets; OrderNamespace the orders and batches.
	PartnerNamespace, OrderNamespace string
	// OutputPath is the host output root the node agents serve.
	OutputPath string
	Now        func() time.Time
}

// handoffRetry is how soon a batch whose handoff cannot be honoured yet is looked at again.
const handoffRetry = time.Minute

// Reconcile creates the missing orders of one handed-over batch.
func (r *HandoffReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var b sealv1.SealBatch
	if err := r.Get(ctx, req.NamespacedName, &b); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if b.Spec.Handoff == nil || b.DeletionTimestamp != nil || b.Status.Phase == sealv1.PhaseCompleted || b.Status.Phase == sealv1.PhaseFailed {
		return reconcile.Result{}, nil
	}
	problem, err := provider.HandoffProblem(ctx, r.Client, &b, r.PartnerNamespace, r.OrderNamespace, r.OutputPath)
	if err != nil {
		return reconcile.Result{}, err
	}
	if problem != "" {
		// Placement holds the batch with the same explanation; nothing is sealed meanwhile.
		return reconcile.Result{RequeueAfter: handoffRetry}, nil
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	want, err := orders.ForHandoff(&b, func(i int) ([32]byte, error) {
		return render.Bytes32(fmt.Sprintf("spec.sectors[%d].ticket", i), b.Spec.Sectors[i].Ticket)
	}, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	for _, o := range want {
		status := o.Status
		var have sealv1.SealOrder
		err := r.Get(ctx, client.ObjectKeyFromObject(o), &have)
		switch {
		case apierrors.IsNotFound(err):
			if err := r.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return reconcile.Result{}, fmt.Errorf("order for sector %d of batch %s: %w", o.Spec.SectorNumber, b.Name, err)
			}
			have = *o
		case err != nil:
			return reconcile.Result{}, err
		case have.Labels[orders.LabelHandoff] != b.Name:
			r.Recorder.Eventf(&b, nil, corev1.EventTypeWarning, "HandoffConflict", "Handoff", "sector %d of %s is already ordered by partner %s (order %s): it is not handed to lotus-miner %s", o.Spec.SectorNumber, b.Spec.MinerID, have.Spec.Partner, have.Name, b.Spec.Handoff.LotusMiner)
			continue
		}
		if have.Status.Batch != "" {
			continue
		}
		if err := updateOrderStatus(ctx, r.Client, &have, func(x *sealv1.SealOrder) { x.Status = status }); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// SetupWithManager watches the batches of the remote-seal namespace that name a lotus-miner.
func (r *HandoffReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("handoff").
		For(&sealv1.SealBatch{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			b, ok := o.(*sealv1.SealBatch)
			return ok && b.Spec.Handoff != nil
		}))).
		Complete(r)
}
