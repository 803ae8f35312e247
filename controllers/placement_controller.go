package controllers

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
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
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/placement"
	"github.com/sealfleet/sealfleet/internal/predict"
	"github.com/sealfleet/sealfleet/internal/remoteseal/provider"
)

// Recorder emits Kubernetes events.
type Recorder = events.EventRecorder

// queueKey is the single work item of the placement reconciler: every change that could
// let a pending batch fit re-runs one scheduling cycle over the whole queue, so batches are
// placed in priority and age order rather than in event order.
var queueKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "sealbatch-queue"}}

// requeuePending is the safety net for pending batches when no event arrives.
const requeuePending = 30 * time.Second

// commitWriters bounds the parallel decision writes of one scheduling cycle.
const commitWriters = 16

// uncertainCommit is how long a decision whose write failed without a clear answer keeps its
// claim: long enough for the informer cache to show the write if it was stored.
const uncertainCommit = time.Minute

// PlacementReconciler places pending SealBatches. A decision is committed with one write: the
// batch's status (node, slot and its range, hugepages, layout, cpus), which is the only record
// of what the batch holds (see internal/ledger). Decisions are taken against an in-memory view
// of the fleet: the informer cache plus the decisions written but not yet seen there.
type PlacementReconciler struct {
	client.Client
	Recorder Recorder
	// Caches builds the parent caches batches wait for (nil: no node caches; sealers build
	// their own).
	Caches *ParentCaches
	// Qualify measures the nodes (nil: no qualification pods); it books the slot and
	// hugepage its pods use in the same view placement decides on.
	Qualify *Qualifier

	// Handoff says why a batch's spec.handoff cannot be honoured ("" when it can, or the
	// batch has none); such a batch is held. nil: every handoff is refused.
	Handoff func(context.Context, *sealv1.SealBatch) (string, error)

	assumed *ledger.Assumed
	explain *explainer
}

// +kubebuilder:rbac:groups=sealfleet.io,resources=sealbatches,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=sealfleet.io,resources=sealbatches/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sealfleet.io,resources=sealernodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile runs one scheduling cycle.
func (r *PlacementReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
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
	r.assumed.Settle(batches.Items, time.Now())
	fleet := fleetView(sealerNodes.Items, nodes.Items, batches.Items, r.assumed, r.Qualify.Claims())
	var pending []*sealv1.SealBatch
	for i := range batches.Items {
		b := &batches.Items[i]
		if b.DeletionTimestamp != nil || b.Status.Node != "" || b.Status.Phase == sealv1.PhaseFailed || r.assumed.Has(b.UID) {
			continue
		}
		pending = append(pending, b)
	}
	metricPending.Set(float64(len(pending)))
	// A sector another batch already seals (or updates) waits for it, whatever the nodes.
	dup := placement.DuplicateSectors(batches.Items, pending)
	// A batch handed to a lotus-miner this operator cannot reach waits, with the reason.
	for _, b := range pending {
		if b.Spec.Handoff == nil {
			continue
		}
		why := provider.ErrNoHandoff.Error()
		if r.Handoff != nil {
			var err error
			if why, err = r.Handoff(ctx, b); err != nil {
				return reconcile.Result{}, err
			}
		}
		if why != "" {
			dup[b] = why
		}
	}
	if len(dup) > 0 {
		pending = slices.DeleteFunc(pending, func(b *sealv1.SealBatch) bool { return dup[b] != "" })
	}
	if r.Caches == nil {
		for _, n := range fleet {
			n.IgnoreCaches = true
		}
	}
	decisions, failed := placement.Schedule(fleet, pending)
	metricPendingNoFit.Set(float64(len(failed)))
	exportSlotMetrics(fleet)
	exportQualificationMetrics(fleet)
	qualifying := false
	if r.Qualify != nil {
		if err := r.Qualify.Sync(ctx, fleet); err != nil {
			log.FromContext(ctx).Error(err, "qualification")
		}
		qualifying = len(r.Qualify.Claims()) > 0
	}
	if r.Caches != nil {
		wanted := map[string]map[string]bool{}
		for _, n := range fleet {
			if len(n.WantedCaches) > 0 {
				wanted[n.Sealer.Name] = n.WantedCaches
			}
		}
		if err := r.Caches.Sync(ctx, sealerNodes.Items, wanted); err != nil {
			log.FromContext(ctx).Error(err, "parent caches")
		}
	}

	// Every decision is assumed before its write goes out, so the next cycle counts it even
	// if the cache has not caught up; a write that does not land is forgotten.
	// The writes are independent: one failing does not cancel the others.
	var g errgroup.Group
	g.SetLimit(commitWriters)
	for _, d := range decisions {
		r.assumed.Assume(d.Claim())
		g.Go(func() error {
			switch err := r.commit(ctx, &d); {
			case err == nil:
				return nil
			case errors.Is(err, errAbandoned):
				r.assumed.Forget(d.Batch.UID)
				return nil
			default:
				// The request may have been stored even though it failed here.
				r.assumed.Uncertain(d.Batch.UID, time.Now().Add(uncertainCommit))
				return err
			}
		})
	}
	err := g.Wait()
	explanations := make(map[types.NamespacedName]string, len(failed)+len(dup))
	for b, u := range failed {
		explanations[client.ObjectKeyFromObject(b)] = u.Error()
	}
	for b, why := range dup {
		explanations[client.ObjectKeyFromObject(b)] = why
	}
	r.explain.set(explanations)
	metricScheduleCycle.Observe(time.Since(start).Seconds())
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(failed)+len(dup) > 0 || qualifying { // qualifications are timed out by this cycle
		return reconcile.Result{RequeueAfter: requeuePending}, nil
	}
	return reconcile.Result{}, nil
}

// errAbandoned: the batch changed under a decision (deleted, placed, failed, gone); certainly
// nothing was written.
var errAbandoned = errors.New("decision abandoned")

// commit writes a decision into the batch status: the one write that books the slot. A batch
// deleted, failed or placed since the cycle read it is left alone.
func (r *PlacementReconciler) commit(ctx context.Context, d *placement.Decision) error {
	node, slot, lay := d.Node, d.Slot, d.Layout
	abandoned := false
	err := updateStatus(ctx, r.Client, d.Batch, func(b *sealv1.SealBatch) {
		if b.DeletionTimestamp != nil || b.Status.Node != "" || b.Status.Phase == sealv1.PhaseFailed {
			abandoned = true
			return
		}
		now := metav1.Now()
		b.Status.Node = node
		if slot != ledger.NoSlot {
			b.Status.Slot = &slot
			b.Status.SlotRange = &d.Range
		}
		b.Status.Hugepages1Gi = d.Hugepages
		b.Status.GPUs = d.GPUs
		b.Status.OutputBytes = d.OutputBytes
		b.Status.Layout = lay.Record()
		b.Status.CoreLayout = lay.Summary()
		b.Status.CPUs = cpuset.Format(lay.CoreCPUs())
		b.Status.RegisteredProof = sealv1.RegisteredProof(b.Spec.SectorSize, b.Spec.ProofTypeOrDefault())
		b.Status.Phase = sealv1.PhasePlaced
		b.Status.PlacedTime = &now
		b.Status.Prediction = predict.Status(d.Prediction, now.Time)
		b.Status.Message = placedMessage(node, slot)
		setCondition(b, sealv1.CondPlaced, metav1.ConditionTrue, sealv1.ReasonPlaced, b.Status.Message)
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, string(sealv1.ReasonPlaced), "Place", "%s", placedMessage(node, slot))
	})
	switch {
	case apierrors.IsNotFound(err):
		return errAbandoned
	case err != nil:
		return err
	case abandoned:
		return errAbandoned
	}
	metricPlacementLatency.Observe(time.Since(d.Batch.CreationTimestamp.Time).Seconds())
	log.FromContext(ctx).Info("placed", "batch", ledger.BatchKey(d.Batch), "node", node, "slot", slot)
	return nil
}

// placedMessage says where a batch was placed (an update holds no slot).
func placedMessage(node string, slot int32) string {
	if slot == ledger.NoSlot {
		return fmt.Sprintf("placed on %s (an update: no layer slot)", node)
	}
	return fmt.Sprintf("placed on %s, slot %d", node, slot)
}

// markUnschedulable keeps the batch Pending with the reason; an event fires when it changes.
// A reason that differs only in its numbers (free hugepages, node counts) is not rewritten:
// on a busy fleet those change every cycle and would turn into a stream of status writes.
func markUnschedulable(ctx context.Context, c client.Client, rec Recorder, b *sealv1.SealBatch, why string) error {
	if cond := meta.FindStatusCondition(b.Status.Conditions, sealv1.CondPlaced); cond != nil && cond.Reason == string(sealv1.ReasonUnschedulable) &&
		b.Status.Phase == sealv1.PhasePending && cond.ObservedGeneration == b.Generation &&
		digits.ReplaceAllString(cond.Message, "#") == digits.ReplaceAllString(why, "#") {
		return nil
	}
	return updateStatus(ctx, c, b, func(b *sealv1.SealBatch) {
		if b.DeletionTimestamp != nil || b.Status.Node != "" || b.Status.Phase != sealv1.PhasePending && b.Status.Phase != "" {
			return // placed or failed since the cycle explained it
		}
		b.Status.Phase = sealv1.PhasePending
		b.Status.Message = why
		setCondition(b, sealv1.CondPlaced, metav1.ConditionFalse, sealv1.ReasonUnschedulable, why)
	}, func(b *sealv1.SealBatch) {
		rec.Eventf(b, nil, corev1.EventTypeWarning, string(sealv1.ReasonUnschedulable), "Place", "%s", why)
	})
}

var digits = regexp.MustCompile(`[0-9]+`)

// fleetView builds placement's view of every SealerNode (deep copies, so scheduling can
// mutate them) with the usage the batches and the assumed decisions derive, and the PC2
// engines of the sealer image that would run there.
func fleetView(sns []sealv1.SealerNode, nodes []corev1.Node, batches []sealv1.SealBatch, assumed *ledger.Assumed, qualifying []ledger.Claim) []*placement.Node {
	nodeByName := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		nodeByName[nodes[i].Name] = &nodes[i]
	}
	geometry := make(map[string]ledger.Geometry, len(sns))
	for i := range sns {
		geometry[sns[i].Name] = ledger.GeometryOf(&sns[i])
	}
	book := ledger.BookOf(batches, assumed, func(n string) ledger.Geometry { return geometry[n] })
	book.AddDirty(sns)
	addQualifying(book, sns, qualifying)
	fleet := make([]*placement.Node, 0, len(sns))
	for i := range sns {
		pn := &placement.Node{Sealer: sns[i].DeepCopy(), Geometry: geometry[sns[i].Name], Usage: book.Of(sns[i].Name)}
		if n := nodeByName[sns[i].Name]; n != nil {
			pn.Labels, pn.Taints, pn.Unschedulable = n.Labels, n.Spec.Taints, n.Spec.Unschedulable
			pn.GPUs = placement.AllocatableGPUs(n)
		} else {
			pn.NodeMissing = true
		}
		fleet = append(fleet, pn)
	}
	return fleet
}

// addQualifying books the running qualifications: the write test's slot until the node's
// dirty record (written before the pod started) shows in the cache, and the probe's hugepage
// while the pod lives.
func addQualifying(book ledger.Book, sns []sealv1.SealerNode, claims []ledger.Claim) {
	recorded := map[types.UID]bool{}
	for i := range sns {
		for _, d := range sns[i].Status.DirtySlots {
			recorded[types.UID(d.BatchUID)] = true
		}
	}
	for _, c := range claims {
		if c.Dirty && recorded[c.UID] {
			c.Dirty, c.Slot, c.Range = false, ledger.NoSlot, sealv1.SlotRange{}
		}
		if c.Dirty || c.Hugepages > 0 {
			book.Of(c.Node).Add(c)
		}
	}
}

// SetupWithManager watches batches, SealerNodes and Nodes, all funnelled into the one queue
// item; Node updates count only when labels, taints, cordon or allocatable GPUs change (not
// heartbeats).
func (r *PlacementReconciler) SetupWithManager(mgr ctrl.Manager) error {
	toQueue := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{queueKey}
	})
	r.assumed = ledger.NewAssumed()
	r.explain = &explainer{c: r.Client, rec: r.Recorder, wake: make(chan struct{}, 1)}
	if err := mgr.Add(r.explain); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("placement").
		Watches(&sealv1.SealBatch{}, toQueue, builder.WithPredicates(batchSchedulingChanged)).
		Watches(&sealv1.SealerNode{}, toQueue, builder.WithPredicates(sealerNodeChanged)).
		Watches(&corev1.Node{}, toQueue, builder.WithPredicates(nodeSchedulingChanged)).
		Watches(&corev1.Pod{}, toQueue, builder.WithPredicates(qualificationPodEnded)).
		Complete(r)
}
