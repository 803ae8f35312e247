package controllers

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/cpuset"
	"github.com/sealfleet/sealfleet/internal/layout"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/placement"
)

// Recorder emits Kubernetes events.
type Recorder = events.EventRecorder

// queueKey is the single work item of the placement reconciler: every change that could
// let a pending batch fit re-runs one scheduling cycle over the whole queue, so batches are
// placed in priority and age order rather than in event order.
var queueKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "sealbatch-queue"}}

// requeuePending is the safety net for pending batches when no event arrives.
const requeuePending = 30 * time.Second

// statusWriters bounds the parallel status writes of one scheduling cycle.
const statusWriters = 8

// PlacementReconciler places pending SealBatches: it reserves a slot in a SealerNode's ledger
// (optimistic concurrency on the SealerNode) and then records the decision in the batch.
type PlacementReconciler struct {
	client.Client
	Recorder Recorder
}

// +kubebuilder:rbac:groups=sealfleet.io,resources=sealbatches,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=sealfleet.io,resources=sealbatches/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sealfleet.io,resources=sealernodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=sealfleet.io,resources=sealernodes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile runs one scheduling cycle.
func (r *PlacementReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	start := time.Now()
	var batches sealv1.SealBatchList
	if err := r.List(ctx, &batches); err != nil {
		return reconcile.Result{}, err
	}
	var sealerNodes sealv1.SealerNodeList
	if err := r.List(ctx, &sealerNodes); err != nil {
		return reconcile.Result{}, err
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return reconcile.Result{}, err
	}

	exportBatchMetrics(batches.Items)
	fleet, byName := fleetView(sealerNodes.Items, nodes.Items, batches.Items)
	var pending []*sealv1.SealBatch
	for i := range batches.Items {
		b := &batches.Items[i]
		if b.DeletionTimestamp != nil || b.Status.Node != "" || b.Status.Phase == sealv1.PhaseFailed {
			continue
		}
		// A reservation without a recorded decision means we crashed between the two
		// writes: finish the placement instead of booking a second slot.
		if sn, res := findReservation(byName, b.UID); res != nil {
			if err := r.recordPlacement(ctx, b, sn.Sealer.Name, res.Slot, nil); err != nil {
				return reconcile.Result{}, err
			}
			continue
		}
		pending = append(pending, b)
	}
	metricPending.Set(float64(len(pending)))
	if len(pending) == 0 {
		metricPendingNoFit.Set(0)
		return reconcile.Result{}, nil
	}

	decisions, failed := placement.Schedule(fleet, pending)
	metricPendingNoFit.Set(float64(len(failed)))

	// One ledger write per node: the in-memory SealerNodes already hold the new reservations
	// and the resourceVersion they were read at, so a concurrent writer makes this fail.
	touched := map[string]bool{}
	for _, d := range decisions {
		touched[d.Node] = true
	}
	now := metav1.Now()
	for name := range touched {
		sn := byName[name].Sealer
		for i := range sn.Status.Slots.Reservations {
			if sn.Status.Slots.Reservations[i].Since == nil {
				sn.Status.Slots.Reservations[i].Since = &now
			}
		}
		refreshSummary(sn)
		if err := r.Status().Update(ctx, sn); err != nil {
			if apierrors.IsConflict(err) {
				logger.V(1).Info("ledger changed under us; rescheduling", "node", name)
				return reconcile.Result{Requeue: true}, nil
			}
			return reconcile.Result{}, err
		}
	}
	// The slots are booked; the batch status writes are independent, so they go out in
	// parallel (a cycle can place hundreds of batches on a large fleet).
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(statusWriters)
	for _, d := range decisions {
		g.Go(func() error {
			if err := r.recordPlacement(gctx, d.Batch, d.Node, d.Slot, d.Layout); err != nil {
				return err
			}
			metricPlacementLatency.Observe(time.Since(d.Batch.CreationTimestamp.Time).Seconds())
			logger.Info("placed", "batch", ledger.BatchKey(d.Batch), "node", d.Node, "slot", d.Slot)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return reconcile.Result{}, err
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(statusWriters)
	for b, u := range failed {
		g.Go(func() error { return r.markUnschedulable(gctx, b, u.Error()) })
	}
	if err := g.Wait(); err != nil {
		return reconcile.Result{}, err
	}
	metricScheduleCycle.Observe(time.Since(start).Seconds())
	if len(failed) > 0 {
		return reconcile.Result{RequeueAfter: requeuePending}, nil
	}
	return reconcile.Result{}, nil
}

// recordPlacement writes the decision into the batch status.
func (r *PlacementReconciler) recordPlacement(ctx context.Context, b *sealv1.SealBatch, node string, slot int32, lay *layout.Layout) error {
	return updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		now := metav1.Now()
		if lay != nil {
			b.Status.CPUs = cpuset.Format(lay.CPUs())
			b.Status.CoreLayout = lay.Summary()
		}
		b.Status.Node = node
		b.Status.Slot = &slot
		b.Status.Phase = sealv1.PhasePlaced
		b.Status.PlacedTime = &now
		b.Status.Message = fmt.Sprintf("placed on %s, slot %d", node, slot)
		setCondition(b, CondPlaced, metav1.ConditionTrue, ReasonPlaced, b.Status.Message)
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, string(ReasonPlaced), "Place", "placed on node %s, slot %d", node, slot)
	})
}

// markUnschedulable keeps the batch Pending with the reason; an event fires when it changes.
// A reason that differs only in its numbers (free hugepages, node counts) is not rewritten:
// on a busy fleet those change every cycle and would turn into a stream of status writes.
func (r *PlacementReconciler) markUnschedulable(ctx context.Context, b *sealv1.SealBatch, why string) error {
	c := meta.FindStatusCondition(b.Status.Conditions, CondPlaced)
	if c != nil && c.Reason == string(ReasonUnschedulable) && b.Status.Phase == sealv1.PhasePending &&
		c.ObservedGeneration == b.Generation && digits.ReplaceAllString(c.Message, "#") == digits.ReplaceAllString(why, "#") {
		return nil
	}
	return updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		b.Status.Phase = sealv1.PhasePending
		b.Status.Message = why
		setCondition(b, CondPlaced, metav1.ConditionFalse, ReasonUnschedulable, why)
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, string(ReasonUnschedulable), "Place", "%s", why)
	})
}

var digits = regexp.MustCompile(`[0-9]+`)

// fleetView builds placement's view of every SealerNode (deep copies, so scheduling can
// mutate them), with what each node already runs.
func fleetView(sns []sealv1.SealerNode, nodes []corev1.Node, batches []sealv1.SealBatch) ([]*placement.Node, map[string]*placement.Node) {
	nodeByName := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		nodeByName[nodes[i].Name] = &nodes[i]
	}
	byName := make(map[string]*placement.Node, len(sns))
	fleet := make([]*placement.Node, 0, len(sns))
	for i := range sns {
		pn := &placement.Node{Sealer: sns[i].DeepCopy()}
		if n := nodeByName[sns[i].Name]; n != nil {
			pn.Labels, pn.Taints, pn.Unschedulable = n.Labels, n.Spec.Taints, n.Spec.Unschedulable
		} else {
			pn.NodeMissing = true
		}
		byName[pn.Sealer.Name] = pn
		fleet = append(fleet, pn)
	}
	for i := range batches {
		b := &batches[i]
		pn := byName[b.Status.Node]
		if pn == nil {
			continue
		}
		switch b.Status.Phase {
		case sealv1.PhasePlaced, sealv1.PhasePC1:
			pn.ActivePC1++
		}
		if runningPhase(b.Status.Phase) && b.Status.CPUs != "" {
			if cpus, err := cpuset.Parse(b.Status.CPUs); err == nil {
				pn.BusyCPUs = append(pn.BusyCPUs, cpus...)
			}
		}
		if b.Spec.PC2Engine == sealv1.PC2EngineGPU && (b.Status.Phase == sealv1.PhasePlaced ||
			b.Status.Phase == sealv1.PhasePC1 || b.Status.Phase == sealv1.PhasePC2) {
			pn.GPUsBusy++
		}
	}
	return fleet, byName
}

func findReservation(byName map[string]*placement.Node, uid types.UID) (*placement.Node, *sealv1.SlotReservation) {
	for _, n := range byName {
		if r := ledger.Holder(n.Sealer, uid); r != nil {
			return n, r
		}
	}
	return nil, nil
}

// SetupWithManager watches batches, SealerNodes and Nodes, all funnelled into the one queue
// item; Node updates count only when labels, taints or cordon change (not heartbeats).
func (r *PlacementReconciler) SetupWithManager(mgr ctrl.Manager) error {
	toQueue := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{queueKey}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("placement").
		Watches(&sealv1.SealBatch{}, toQueue, builder.WithPredicates(batchSchedulingChanged)).
		Watches(&sealv1.SealerNode{}, toQueue, builder.WithPredicates(sealerNodeChanged)).
		Watches(&corev1.Node{}, toQueue, builder.WithPredicates(nodeSchedulingChanged)).
		Complete(r)
}
