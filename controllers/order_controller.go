package controllers

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/placement"
	v0 "github.com/sealfleet/sealfleet/internal/remoteseal/delegatedv0"
	"github.com/sealfleet/sealfleet/internal/remoteseal/lotusreceive"
	"github.com/sealfleet/sealfleet/internal/remoteseal/orders"
	"github.com/sealfleet/sealfleet/internal/remoteseal/provider"
	"github.com/sealfleet/sealfleet/internal/render"
)

// OrderReconciler runs remote-seal orders (SealOrders): it forms batches of queued orders with
// tickets drawn from each partner's chain, mirrors each order's batch into the order's status,
// hands the partner's seeds to the batch's C1, and tells the partner when a sector is
// complete (retrying with back-off: the partner also polls). What to form and which state an
// order is in are decided by internal/remoteseal/orders.
type OrderReconciler struct {
	client.Client
	// APIReader reads past the cache: a batch the cache does not have yet (created a moment
	// ago, its event still on the way) must not read as deleted, which fails its orders.
	APIReader client.Reader
	Recorder  Recorder
	// PartnerNamespace holds the partner Secrets.
	PartnerNamespace string
	// OrderNamespace holds the orders and the batches formed from them.
	OrderNamespace string
	Policy         orders.Policy
	// Output is where the formed batches write (the layout is always Lotus).
	Output sealv1.OutputSpec
	// HTTP calls the partners (ticket, complete).
	HTTP *http.Client
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Cleanup is the template of output-cleanup pods (namespace, host network, pull
	// secrets), run with CleanupImage; OutputPath is the host output root they mount.
	Cleanup      render.OutputCleanupInput
	CleanupImage string
	CleanupPull  corev1.PullPolicy
	// CleanupAfter cleans up a complete order its partner never cleaned up, this long after
	// it completed (0: never).
	CleanupAfter time.Duration
	// Lotus hands the orders of batches with spec.handoff to their lotus-miner (nil: no
	// handoff; placement then holds such batches).
	Lotus *LotusHandoff
}

// LotusHandoff is what handing a sector to lotus needs: where lotus fetches its files (node
// URLs valid for URLTTL: lotus fetches once received, and again after a restart) and calls
// back (the provider's public URL, signed endpoints).
type LotusHandoff struct {
	PublicURL string
	Endpoints *provider.LotusEndpoints
	Data      *provider.NodeLocator
	// CallbackTTL is how long the commit1 and done URLs stay valid (past the longest seed
	// wait and commit).
	CallbackTTL time.Duration
}

// +kubebuilder:rbac:groups=sealfleet.io,resources=sealorders,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=sealfleet.io,resources=sealorders/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sealfleet.io,resources=sealbatches,verbs=create;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create

func (r *OrderReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// notifyBackoff is the wait before the next complete notice: 30 s doubling, at most 30 min.
func notifyBackoff(attempts int32) time.Duration {
	d := 30 * time.Second
	for i := int32(1); i < attempts && d < 30*time.Minute; i++ {
		d *= 2
	}
	return min(d, 30*time.Minute)
}

// Reconcile moves one order on.
func (r *OrderReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var o sealv1.SealOrder
	if err := r.Get(ctx, req.NamespacedName, &o); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if o.Status.Batch == "" && provider.Labelled(&o) {
		return reconcile.Result{RequeueAfter: time.Second}, nil // the handoff controller records its batch
	}
	if o.Status.Batch == "" && o.Status.State != sealv1.OrderFailed {
		return r.queue(ctx, &o)
	}
	var b *sealv1.SealBatch
	if o.Status.Batch != "" {
		var sb sealv1.SealBatch
		key := client.ObjectKey{Namespace: o.Namespace, Name: o.Status.Batch}
		err := r.Get(ctx, key, &sb)
		if apierrors.IsNotFound(err) && r.APIReader != nil {
			err = r.APIReader.Get(ctx, key, &sb)
		}
		switch {
		case err == nil:
			b = &sb
		case !apierrors.IsNotFound(err):
			return reconcile.Result{}, err
		}
	}
	if err := r.mirror(ctx, &o, b); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.handSeed(ctx, &o, b); err != nil {
		return reconcile.Result{}, err
	}
	res, err := r.notify(ctx, &o, b)
	if err != nil {
		return res, err
	}
	more, err := r.cleanup(ctx, &o, b)
	if res.RequeueAfter == 0 || more.RequeueAfter != 0 && more.RequeueAfter < res.RequeueAfter {
		res = more
	}
	return res, err
}

// queue adopts the order into a batch that already holds its sector (one created before a
// restart could record it), or forms batches of the queued orders; an order left queued is
// looked at again when its group's wait ends.
func (r *OrderReconciler) queue(ctx context.Context, o *sealv1.SealOrder) (reconcile.Result, error) {
	if v := orders.StateOf(o, nil); v.State == sealv1.OrderFailed {
		return reconcile.Result{}, r.setState(ctx, o, v)
	}
	var all sealv1.SealOrderList
	if err := r.List(ctx, &all, client.InNamespace(o.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	var batches sealv1.SealBatchList
	if err := r.List(ctx, &batches, client.InNamespace(o.Namespace), client.HasLabels{orders.LabelPartner}); err != nil {
		return reconcile.Result{}, err
	}
	var queued []*sealv1.SealOrder
	for i := range all.Items {
		q := &all.Items[i]
		if q.Status.Batch != "" || provider.Labelled(q) || q.Status.State == sealv1.OrderFailed || orders.StateOf(q, nil).State == sealv1.OrderFailed {
			continue
		}
		if b := holding(batches.Items, q); b != nil {
			if err := r.claim(ctx, []*sealv1.SealOrder{q}, b.Name); err != nil {
				return reconcile.Result{}, err
			}
			continue
		}
		queued = append(queued, q)
	}
	if len(queued) == 0 {
		return reconcile.Result{}, nil
	}
	wait := max(time.Second, r.Policy.MaxWait-r.now().Sub(o.CreationTimestamp.Time))
	policy := r.Policy
	var err error
	if policy.Capacity, err = r.capacity(ctx); err != nil {
		return reconcile.Result{}, err
	}
	grouped := 0
	for _, group := range orders.Form(queued, r.now(), policy) {
		grouped += len(group)
		formed, err := r.form(ctx, group)
		if err != nil {
			return reconcile.Result{}, err
		}
		if !formed {
			wait = ticketRetry // a partner that gave no ticket is asked again, not hammered
		}
	}
	if grouped < len(queued) {
		// Orders left waiting: look again when a node may have freed up.
		wait = min(wait, capacityRecheck)
	}
	return reconcile.Result{RequeueAfter: wait}, nil
}

// capacityRecheck is how often queued orders look again for a node that frees up.
const capacityRecheck = 20 * time.Second

// capacity is what the fleet can take of each kind of order now, as placement sees it: every
// SealerNode with what placed batches hold, and the batches still waiting for placement booked
// first (they go before any batch formed now). Asked once per kind.
func (r *OrderReconciler) capacity(ctx context.Context) (func(orders.Key) orders.Capacity, error) {
	var sns sealv1.SealerNodeList
	if err := r.List(ctx, &sns); err != nil {
		return nil, err
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return nil, err
	}
	var batches sealv1.SealBatchList
	if err := r.List(ctx, &batches); err != nil {
		return nil, err
	}
	fleet := fleetView(sns.Items, nodes.Items, batches.Items, ledger.NewAssumed(), nil)
	var pending []*sealv1.SealBatch
	for i := range batches.Items {
		if b := &batches.Items[i]; b.DeletionTimestamp == nil && b.Status.Node == "" && b.Status.Phase != sealv1.PhaseFailed {
			pending = append(pending, b)
		}
	}
	for _, n := range fleet {
		n.IgnoreCaches = true // a batch that waits for a parent cache has it built
	}
	placement.Schedule(fleet, pending)
	known := map[orders.Key]orders.Capacity{}
	return func(k orders.Key) orders.Capacity {
		if c, ok := known[k]; ok {
			return c
		}
		now, ever := placement.FitOf(fleet, func(n int) *sealv1.SealBatch { return orders.Probe(r.OrderNamespace, r.Output, k, n) }, r.Policy.MaxBatch)
		known[k] = orders.Capacity{Now: now, Ever: ever}
		return known[k]
	}, nil
}

// ticketRetry is how soon a group whose partner gave no ticket asks again.
const ticketRetry = 30 * time.Second

// holding is the live batch of o's partner that seals o's sector, if any.
func holding(batches []sealv1.SealBatch, o *sealv1.SealOrder) *sealv1.SealBatch {
	for i := range batches {
		b := &batches[i]
		if b.DeletionTimestamp != nil || b.Labels[orders.LabelPartner] != o.Spec.Partner || b.Spec.MinerID != o.Spec.MinerID {
			continue
		}
		if slices.ContainsFunc(b.Spec.Sectors, func(s sealv1.SectorSpec) bool { return s.Number == o.Spec.SectorNumber }) {
			return b
		}
	}
	return nil
}

// form draws the group's tickets from the partner, creates the batch, then records it on each
// order (a restart in between adopts the batch: see queue). formed is false while the partner
// gives no ticket: the group waits.
func (r *OrderReconciler) form(ctx context.Context, group []*sealv1.SealOrder) (formed bool, err error) {
	for _, o := range group {
		if o.Status.Ticket != nil {
			continue
		}
		if err := r.fetchTicket(ctx, o); err != nil {
			r.Recorder.Eventf(o, nil, corev1.EventTypeWarning, "TicketFailed", "Form", "partner %s: %v (asking again in %s)", o.Spec.Partner, err, ticketRetry)
			return false, nil
		}
	}
	b, err := orders.Batch(r.OrderNamespace, r.Output, group)
	if err != nil {
		return false, err
	}
	if err := r.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("creating batch %s for partner %s: %w", b.Name, group[0].Spec.Partner, err)
	}
	var numbers []string
	for _, o := range group {
		numbers = append(numbers, fmt.Sprint(o.Spec.SectorNumber))
	}
	r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "FormedFromOrders", "Form", "partner %s ordered sectors %s of %s", group[0].Spec.Partner, strings.Join(numbers, ","), b.Spec.MinerID)
	return true, r.claim(ctx, group, b.Name)
}

func (r *OrderReconciler) fetchTicket(ctx context.Context, o *sealv1.SealOrder) error {
	p, err := r.partner(ctx, o.Spec.Partner)
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	t, err := v0.FetchTicket(tctx, r.HTTP, p.URL, o.Spec.MinerID)
	if err != nil {
		return err
	}
	return updateOrderStatus(ctx, r.Client, o, func(o *sealv1.SealOrder) {
		o.Status.Ticket = &sealv1.OrderTicket{Randomness: hex.EncodeToString(t.Ticket), Epoch: t.Epoch, FetchTime: metav1.NewTime(r.now())}
	})
}

func (r *OrderReconciler) partner(ctx context.Context, name string) (provider.Partner, error) {
	var s corev1.Secret
	if err := r.Get(ctx, client.ObjectKey{Namespace: r.PartnerNamespace, Name: name}, &s); err != nil {
		return provider.Partner{}, fmt.Errorf("partner Secret %s/%s: %w", r.PartnerNamespace, name, err)
	}
	return provider.ParsePartner(&s)
}

// claim records the batch on each order.
func (r *OrderReconciler) claim(ctx context.Context, group []*sealv1.SealOrder, batch string) error {
	for _, o := range group {
		if err := updateOrderStatus(ctx, r.Client, o, func(o *sealv1.SealOrder) {
			o.Status.Batch = batch
			o.Status.State = sealv1.OrderPending
		}); err != nil {
			return err
		}
	}
	return nil
}

// mirror writes the order's protocol state from its batch, and when its C1 output appeared.
func (r *OrderReconciler) mirror(ctx context.Context, o *sealv1.SealOrder, b *sealv1.SealBatch) error {
	if b != nil && o.Status.SeedTime != nil && o.Status.C1Time == nil && slices.ContainsFunc(b.Status.Sectors, func(s sealv1.SectorStatus) bool {
		return s.Number == o.Spec.SectorNumber && s.State == "C1Written"
	}) {
		now := metav1.NewTime(r.now())
		if err := updateOrderStatus(ctx, r.Client, o, func(o *sealv1.SealOrder) { o.Status.C1Time = &now }); err != nil {
			return err
		}
		metricOrderC1Seconds.Observe(now.Sub(o.Status.SeedTime.Time).Seconds())
	}
	v := orders.StateOf(o, b)
	if v.State == sealv1.OrderComplete && b != nil && b.Status.Node != "" {
		// The replica is on one node: a node removed from the cluster takes it along, and the
		// partner must learn that the sector failed rather than retry downloads forever.
		var node corev1.Node
		if err := r.Get(ctx, client.ObjectKey{Name: b.Status.Node}, &node); apierrors.IsNotFound(err) {
			v = orders.View{State: sealv1.OrderFailed, Reason: fmt.Sprintf("node %s, which held the sector's replica and cache, was removed from the cluster; seal the sector again", b.Status.Node)}
		} else if err != nil {
			return err
		}
	}
	if v.State == o.Status.State && v.CommRCID == o.Status.CommRCID && v.Reason == o.Status.FailReason {
		return nil
	}
	if b != nil {
		switch v.State {
		case sealv1.OrderComplete:
			r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "OrderComplete", "Seal", "partner %s: sector %d of %s sealed (%s)", o.Spec.Partner, o.Spec.SectorNumber, o.Spec.MinerID, v.CommRCID)
		case sealv1.OrderFailed:
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "OrderFailed", "Seal", "partner %s: sector %d of %s: %s", o.Spec.Partner, o.Spec.SectorNumber, o.Spec.MinerID, v.Reason)
		}
	}
	return r.setState(ctx, o, v)
}

func (r *OrderReconciler) setState(ctx context.Context, o *sealv1.SealOrder, v orders.View) error {
	return updateOrderStatus(ctx, r.Client, o, func(o *sealv1.SealOrder) {
		if v.State == sealv1.OrderComplete && o.Status.CompleteTime == nil {
			t := metav1.NewTime(r.now())
			o.Status.CompleteTime = &t
			metricOrderCompleteSeconds.Observe(t.Sub(o.CreationTimestamp.Time).Seconds())
		}
		o.Status.State, o.Status.FailReason = v.State, v.Reason
		if v.CommRCID != "" {
			o.Status.CommDCID, o.Status.CommRCID = v.CommDCID, v.CommRCID
		}
	})
}

// handSeed copies the seed the partner sent with commit1 into the batch's spec.seeds (C1
// from the slot runs for it at once, beside the sectors still waiting for theirs).
func (r *OrderReconciler) handSeed(ctx context.Context, o *sealv1.SealOrder, b *sealv1.SealBatch) error {
	synthetic := b != nil && b.Spec.ProofTypeOrDefault() == sealv1.ProofTypeSyntheticPoRep
	if o.Spec.Seed == nil || b == nil || !b.Spec.FromSlot() && !synthetic || b.DeletionTimestamp != nil ||
		slices.ContainsFunc(b.Spec.Seeds, func(s sealv1.SectorSeed) bool { return s.Number == o.Spec.SectorNumber }) {
		return nil
	}
	if o.Spec.Cleanup || slices.Contains(b.Spec.AbandonedSectors, o.Spec.SectorNumber) {
		return nil // its owner gave the sector up: no C1 for it
	}
	switch b.Status.Phase {
	case sealv1.PhaseFailed:
		return nil
	case sealv1.PhaseCompleted:
		if !synthetic {
			return nil // too late: the slot went back
		}
	}
	patch := client.MergeFromWithOptions(b.DeepCopy(), client.MergeFromWithOptimisticLock{})
	// Curio's client sends no seed epoch; C1 does not read it.
	b.Spec.Seeds = append(b.Spec.Seeds, sealv1.SectorSeed{Number: o.Spec.SectorNumber, Randomness: o.Spec.Seed.Randomness})
	if err := r.Patch(ctx, b, patch); err != nil {
		return err
	}
	now := metav1.NewTime(r.now())
	if err := updateOrderStatus(ctx, r.Client, o, func(o *sealv1.SealOrder) { o.Status.SeedTime = &now }); err != nil {
		return err
	}
	r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "SeedReceived", "Seal", "partner %s sent the seed of sector %d (commit1): %d/%d seeds", o.Spec.Partner, o.Spec.SectorNumber, len(b.Spec.Seeds), len(b.Spec.Sectors))
	return nil
}

// notify tells the partner the sector is complete, until it accepts; each refusal waits a
// longer back-off (the partner's status polling finds the sector meanwhile).
func (r *OrderReconciler) notify(ctx context.Context, o *sealv1.SealOrder, b *sealv1.SealBatch) (reconcile.Result, error) {
	if o.Status.State != sealv1.OrderComplete || o.Status.NotifiedTime != nil || o.Status.Ticket == nil {
		return reconcile.Result{}, nil
	}
	if o.Status.LastNotifyTime != nil {
		if wait := o.Status.LastNotifyTime.Add(notifyBackoff(o.Status.NotifyAttempts)).Sub(r.now()); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	// Claim the attempt first, on the order as read: a stale copy (the cache behind a notice
	// just sent) conflicts here instead of notifying twice.
	claim := client.MergeFromWithOptions(o.DeepCopy(), client.MergeFromWithOptimisticLock{})
	attempt := metav1.NewTime(r.now())
	o.Status.LastNotifyTime = &attempt
	if err := r.Status().Patch(ctx, o, claim); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		return reconcile.Result{}, err
	}
	var err error
	if provider.Labelled(o) {
		err = r.handOver(ctx, o, b)
	} else {
		var p provider.Partner
		if p, err = r.partner(ctx, o.Spec.Partner); err == nil {
			var n v0.CompleteNotification
			if n, err = completeNotice(o, p); err == nil {
				nctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				err = v0.NotifyComplete(nctx, r.HTTP, p.URL, n)
				cancel()
			}
		}
	}
	now := metav1.NewTime(r.now())
	if err != nil {
		switch {
		case b != nil && provider.Labelled(o):
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "LotusReceiveFailed", "Handoff", "lotus-miner %s: SectorReceive of sector %d: %v (retrying with back-off)", o.Spec.Partner, o.Spec.SectorNumber, err)
		case b != nil:
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "PartnerNotifyFailed", "Notify", "partner %s: complete notice for sector %d: %v (retrying; the partner's status polling also finds it)", o.Spec.Partner, o.Spec.SectorNumber, err)
		}
		if uerr := updateOrderStatus(ctx, r.Client, o, func(o *sealv1.SealOrder) {
			o.Status.NotifyAttempts++
			o.Status.LastNotifyTime = &now
		}); uerr != nil {
			return reconcile.Result{}, uerr
		}
		return reconcile.Result{RequeueAfter: notifyBackoff(o.Status.NotifyAttempts)}, nil
	}
	return reconcile.Result{}, updateOrderStatus(ctx, r.Client, o, func(o *sealv1.SealOrder) {
		o.Status.NotifiedTime = &now
		o.Status.LastNotifyTime = &now
	})
}

// cleanup deletes the sector's replica and cache on its node once the partner said cleanup
// (or CleanupAfter passed since it completed), then the order: its status is then gone, as
// the protocol has it. The batch goes with its last order. Nothing is deleted while the
// batch's C1 may still read the cache.
func (r *OrderReconciler) cleanup(ctx context.Context, o *sealv1.SealOrder, b *sealv1.SealBatch) (reconcile.Result, error) {
	timedOut := false
	if !o.Spec.Cleanup {
		if r.CleanupAfter <= 0 || o.Status.CompleteTime == nil {
			return reconcile.Result{}, nil
		}
		if wait := o.Status.CompleteTime.Add(r.CleanupAfter).Sub(r.now()); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		timedOut = true
	}
	if b == nil || b.Status.Node == "" {
		// No batch, or one never placed: nothing of the sector's is on a node.
		return reconcile.Result{}, r.forget(ctx, o, b)
	}
	if !sectorOutputsFree(b, o.Spec.SectorNumber) {
		if !timedOut && b.Spec.FromSlot() && o.Spec.Seed == nil && !slices.Contains(b.Spec.AbandonedSectors, o.Spec.SectorNumber) &&
			!slices.ContainsFunc(b.Spec.Seeds, func(s sealv1.SectorSeed) bool { return s.Number == o.Spec.SectorNumber }) {
			// Only the partner's cleanup before its commit1 abandons a sector; a seeded
			// sector's cleanup, or the cleanup timeout, waits for its C1.
			return reconcile.Result{RequeueAfter: 5 * time.Second}, r.abandon(ctx, o, b)
		}
		return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
	}
	if synthC1Wanted(b) && len(c1Pending(b)) > 0 {
		return reconcile.Result{RequeueAfter: 30 * time.Second}, nil // C1 still reads seeded sectors' synthetic proofs
	}
	in := r.Cleanup
	in.Order, in.OrderUID, in.Node = o.Name, string(o.UID), b.Status.Node
	sealed, cache := provider.SectorPaths(b, o.Spec.SectorNumber)
	in.Paths = []string{sealed, cache}
	want := render.OutputCleanupPod(in, r.CleanupImage, r.CleanupPull)
	var pod corev1.Pod
	err := r.Get(ctx, client.ObjectKeyFromObject(want), &pod)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, err
		}
		why := "the partner called cleanup"
		if timedOut {
			why = fmt.Sprintf("the partner did not call cleanup within %s of completion", r.CleanupAfter)
		}
		r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "OutputCleanup", "Cleanup", "partner %s: deleting sector %d's replica and cache on %s (%s)", o.Spec.Partner, o.Spec.SectorNumber, b.Status.Node, why)
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	case err != nil:
		return reconcile.Result{}, err
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		if err := client.IgnoreNotFound(r.Delete(ctx, &pod)); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, r.forget(ctx, o, b)
	case corev1.PodFailed:
		reason, msg, _ := podFailure(&pod)
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "OutputCleanupFailed", "Cleanup", "partner %s: deleting sector %d's outputs on %s failed (%s: %s); retrying in a minute", o.Spec.Partner, o.Spec.SectorNumber, b.Status.Node, reason, msg)
		return reconcile.Result{RequeueAfter: time.Minute}, client.IgnoreNotFound(r.Delete(ctx, &pod))
	}
	return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
}

// sectorOutputsFree: nothing of the batch reads or writes the sector's outputs any more. A
// FromSlot batch still waiting for other sectors' seeds is done with a sector once its C1 is
// settled (written, failed or abandoned): C1 writes only into the seeded sectors' caches.
func sectorOutputsFree(b *sealv1.SealBatch, sector int64) bool {
	if b.Status.Phase.Final() {
		return true
	}
	if !b.Spec.FromSlot() {
		return false
	}
	i := slices.IndexFunc(b.Status.Sectors, func(s sealv1.SectorStatus) bool { return s.Number == sector })
	return i >= 0 && c1Settled(b.Status.Sectors[i].State)
}

// abandon tells a FromSlot batch that the sector's owner gave it up (its cleanup came before
// its C1): the batch stops waiting for its seed, so its outputs can go and the slot goes back
// once the other sectors are done.
func (r *OrderReconciler) abandon(ctx context.Context, o *sealv1.SealOrder, b *sealv1.SealBatch) error {
	patch := client.MergeFromWithOptions(b.DeepCopy(), client.MergeFromWithOptimisticLock{})
	b.Spec.AbandonedSectors = append(b.Spec.AbandonedSectors, o.Spec.SectorNumber)
	if err := r.Patch(ctx, b, patch); err != nil {
		return err
	}
	r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "SectorAbandoned", "Cleanup", "partner %s gave up sector %d (cleanup before its C1): the batch no longer waits for its seed", o.Spec.Partner, o.Spec.SectorNumber)
	return nil
}

// forget deletes a cleaned-up order, and its batch once no order is left in it.
func (r *OrderReconciler) forget(ctx context.Context, o *sealv1.SealOrder, b *sealv1.SealBatch) error {
	if err := client.IgnoreNotFound(r.Delete(ctx, o)); err != nil {
		return err
	}
	if b == nil || b.DeletionTimestamp != nil || b.Labels[orders.LabelPartner] == "" {
		return nil // a batch someone made (handed to lotus) is theirs to delete
	}
	var all sealv1.SealOrderList
	if err := r.List(ctx, &all, client.InNamespace(o.Namespace), client.MatchingLabels{orders.LabelPartner: o.Spec.Partner}); err != nil {
		return err
	}
	for _, other := range all.Items {
		if other.Name != o.Name && other.Status.Batch == b.Name {
			return nil
		}
	}
	return client.IgnoreNotFound(r.Delete(ctx, b))
}

// completeNotice is the complete notice of o, with the partner's own token.
func completeNotice(o *sealv1.SealOrder, p provider.Partner) (v0.CompleteNotification, error) {
	sp, err := strconv.ParseInt(o.Spec.MinerID[2:], 10, 64)
	if err != nil {
		return v0.CompleteNotification{}, fmt.Errorf("miner %s: %w", o.Spec.MinerID, err)
	}
	ticket, err := hex.DecodeString(o.Status.Ticket.Randomness)
	if err != nil {
		return v0.CompleteNotification{}, fmt.Errorf("ticket of order %s: %w", o.Name, err)
	}
	return v0.CompleteNotification{PartnerToken: p.Token(), SpID: sp, SectorNumber: o.Spec.SectorNumber,
		TreeDCid: o.Status.CommDCID, TreeRCid: o.Status.CommRCID, TicketEpoch: o.Status.Ticket.Epoch, TicketValue: ticket}, nil
}

// updateOrderStatus applies change to the order's status, reading it again on a conflict.
func updateOrderStatus(ctx context.Context, c client.Client, o *sealv1.SealOrder, change func(*sealv1.SealOrder)) error {
	for range 5 {
		change(o)
		err := c.Status().Update(ctx, o)
		if !apierrors.IsConflict(err) {
			return err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
	}
	return fmt.Errorf("order %s/%s: status kept changing under the update", o.Namespace, o.Name)
}

// SetupWithManager watches orders and the batches formed from them.
func (r *OrderReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sealorder").
		For(&sealv1.SealOrder{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == r.OrderNamespace }))).
		Watches(&sealv1.SealBatch{}, handler.EnqueueRequestsFromMapFunc(ordersOfBatch),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				b, ok := o.(*sealv1.SealBatch)
				return o.GetLabels()[orders.LabelPartner] != "" || ok && b.Spec.Handoff != nil
			}))).
		Complete(r)
}

// ordersOfBatch maps a batch formed from orders to its sectors' orders.
func ordersOfBatch(_ context.Context, o client.Object) []reconcile.Request {
	b, ok := o.(*sealv1.SealBatch)
	if !ok {
		return nil
	}
	out := make([]reconcile.Request, len(b.Spec.Sectors))
	for i, s := range b.Spec.Sectors {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: orders.Name(b.Spec.MinerID, s.Number)}}
	}
	return out
}

// handOver calls the lotus-miner's SectorReceive for the order's sector: state
// PreCommitting, the ticket, CommD and CommR, node URLs for its unsealed file, replica and
// cache, and the signed commit1 and done endpoints. A sector lotus already holds with this
// CommR counts as handed over.
func (r *OrderReconciler) handOver(ctx context.Context, o *sealv1.SealOrder, b *sealv1.SealBatch) error {
	if r.Lotus == nil {
		return provider.ErrNoHandoff
	}
	if b == nil {
		return fmt.Errorf("batch %s is gone", o.Status.Batch)
	}
	var secret corev1.Secret
	if err := r.Get(ctx, client.ObjectKey{Namespace: r.PartnerNamespace, Name: o.Spec.Partner}, &secret); err != nil {
		return fmt.Errorf("lotus-miner Secret %s/%s: %w", r.PartnerNamespace, o.Spec.Partner, err)
	}
	m, err := provider.ParseLotusMiner(&secret)
	if err != nil {
		return err
	}
	s, err := handoffSector(o, b)
	if err != nil {
		return err
	}
	var e lotusreceive.Endpoints
	if e.Unsealed, err = r.Lotus.Data.UnsealedCC(ctx, b, o.Spec.SectorNumber); err != nil {
		return err
	}
	if e.Sealed, err = r.Lotus.Data.Sealed(ctx, b, o.Spec.SectorNumber); err != nil {
		return err
	}
	if e.Cache, err = r.Lotus.Data.Cache(ctx, b, o.Spec.SectorNumber); err != nil {
		return err
	}
	if e.Commit1, e.Done, err = r.Lotus.Endpoints.URLs(r.Lotus.PublicURL, o.Name, r.now().Add(r.Lotus.CallbackTTL)); err != nil {
		return err
	}
	meta, err := lotusreceive.Meta(s, e)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c := &lotusreceive.Client{URL: m.APIURL, Token: m.Token(), HTTP: r.HTTP}
	if err := c.Receive(cctx, meta); err != nil {
		return err
	}
	r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "LotusReceived", "Handoff", "lotus-miner %s took sector %d (%s) in state %s: it fetches the replica, cache and unsealed file from node %s", m.Name, o.Spec.SectorNumber, o.Status.CommRCID, lotusreceive.StatePreCommitting, b.Status.Node)
	return nil
}

// handoffSector is the sealed sector as lotus is told of it: from the order (ticket) and the
// batch's status (commitments).
func handoffSector(o *sealv1.SealOrder, b *sealv1.SealBatch) (lotusreceive.Sector, error) {
	s := lotusreceive.Sector{MinerID: o.Spec.MinerID, Number: o.Spec.SectorNumber, Size: o.Spec.SectorSize, Proof: o.Spec.ProofType, TicketEpoch: o.Status.Ticket.Epoch}
	t, err := render.Bytes32("order ticket", o.Status.Ticket.Randomness)
	if err != nil {
		return s, err
	}
	s.Ticket = t
	i := slices.IndexFunc(b.Status.Sectors, func(x sealv1.SectorStatus) bool { return x.Number == o.Spec.SectorNumber })
	if i < 0 {
		return s, fmt.Errorf("batch %s has no status for sector %d", b.Name, o.Spec.SectorNumber)
	}
	if s.CommD, err = render.Bytes32("commD", b.Status.Sectors[i].CommD); err != nil {
		return s, err
	}
	if s.CommR, err = render.Bytes32("commR", b.Status.Sectors[i].CommR); err != nil {
		return s, err
	}
	return s, nil
}
