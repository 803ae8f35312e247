// Package orders decides what becomes of remote-seal orders: which queued orders form a batch
// (by partner, miner, sector size and proof type, as large as allowed or once the oldest has
// waited long enough), the SealBatch such a group is, and which protocol state an order is in
// given its batch. Pure functions: the order controller reads objects, calls these and writes.
package orders

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// LabelPartner marks the batches formed from a partner's orders.
const LabelPartner = "sealfleet.io/remote-seal-partner"

// Name is the one name an order for this sector has.
func Name(minerID string, sector int64) string { return fmt.Sprintf("%s-%d", minerID, sector) }

// Key is what the orders of one batch share.
type Key struct {
	Partner, MinerID string
	Size             sealv1.SectorSize
	Proof            sealv1.ProofType
}

func keyOf(o *sealv1.SealOrder) Key {
	return Key{Partner: o.Spec.Partner, MinerID: o.Spec.MinerID, Size: o.Spec.SectorSize, Proof: o.Spec.ProofType}
}

// Policy bounds batch forming.
type Policy struct {
	// MaxBatch is the most sectors one batch takes (rounded down to a size the sealer runs).
	MaxBatch int
	// MaxWait is how long the oldest queued order of a group waits for the group to fill
	// before a smaller batch is formed.
	MaxWait time.Duration
	// Capacity is what the fleet can take of a group's kind (nil: no bound beyond MaxBatch).
	Capacity func(Key) Capacity
}

// Capacity is how many sectors one batch of a kind can have on the fleet: Now on a node free
// now, Ever on a node once its running batches end (0: no node).
type Capacity struct{ Now, Ever int }

// batchLimit is the most sectors a batch of k gets, and whether a full one forms at once: up
// to what a free node takes now; while none is free, up to what a busy node takes once it
// frees, and only after the wait (tickets drawn early would age while the batch queues); a
// kind no node can seal forms as MaxBatch allows, and placement says why it waits.
func (p Policy) batchLimit(k Key) (limit int, atOnce bool) {
	limit = p.MaxBatch
	if p.Capacity == nil {
		return limit, true
	}
	switch c := p.Capacity(k); {
	case c.Now > 0:
		return min(limit, c.Now), true
	case c.Ever > 0:
		return min(limit, c.Ever), false
	}
	return limit, true
}

// Form groups queued orders (no batch yet, not failed) into batches: full batches (as many
// sectors as MaxBatch and a free node allow: Policy.Capacity) at once, the rest once its
// oldest order has waited MaxWait, in the largest sizes the sealer runs (5 orders → 4 + 1).
// Orders keep their arrival order; the result is deterministic.
func Form(queued []*sealv1.SealOrder, now time.Time, p Policy) [][]*sealv1.SealOrder {
	if largestSupported(p.MaxBatch) == 0 {
		return nil
	}
	groups := map[Key][]*sealv1.SealOrder{}
	var keys []Key
	for _, o := range queued {
		k := keyOf(o)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], o)
	}
	byArrival := func(a, b *sealv1.SealOrder) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	}
	for _, k := range keys {
		slices.SortStableFunc(groups[k], byArrival)
	}
	// The group whose oldest order came first is served first.
	slices.SortStableFunc(keys, func(a, b Key) int { return byArrival(groups[a][0], groups[b][0]) })
	var out [][]*sealv1.SealOrder
	for _, k := range keys {
		g := groups[k]
		limit, atOnce := p.batchLimit(k)
		maxBatch := largestSupported(limit)
		for atOnce && len(g) >= maxBatch {
			out, g = append(out, g[:maxBatch]), g[maxBatch:]
		}
		if len(g) == 0 || now.Sub(g[0].CreationTimestamp.Time) < p.MaxWait {
			continue
		}
		for len(g) > 0 {
			n := largestSupported(min(len(g), maxBatch))
			out, g = append(out, g[:n]), g[n:]
		}
	}
	return out
}

// Probe is a batch of n sectors of k's kind as Batch forms it (numbers and tickets aside):
// what placement is asked whether a node can take.
func Probe(namespace string, output sealv1.OutputSpec, k Key, n int) *sealv1.SealBatch {
	b := batchOf(namespace, output, k)
	for i := range n {
		b.Spec.Sectors = append(b.Spec.Sectors, sealv1.SectorSpec{Number: int64(i)})
	}
	return b
}

// batchOf is the batch of k's kind that Batch and Probe fill with sectors.
func batchOf(namespace string, output sealv1.OutputSpec, k Key) *sealv1.SealBatch {
	b := &sealv1.SealBatch{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Labels: map[string]string{LabelPartner: k.Partner}},
		Spec: sealv1.SealBatchSpec{
			SectorSize: k.Size, ProofType: k.Proof, MinerID: k.MinerID,
			Output:        output.DeepCopy(),
			ReleasePolicy: sealv1.ReleaseOnCompletion,
		},
	}
	b.Spec.Output.Layout = sealv1.OutputLayoutLotus
	if k.Proof == sealv1.ProofTypeV1_1 {
		b.Spec.Commit1 = sealv1.Commit1FromSlot
	}
	return b
}

// largestSupported is the largest batch size the sealer runs that is at most n (0 if none).
func largestSupported(n int) int {
	best := 0
	for _, s := range sealv1.SupportedBatchSizes {
		if s <= n {
			best = s
		}
	}
	return best
}

// BatchName is the batch a group forms: from its first sector and size, so that a controller
// that restarts after claiming the orders creates the same batch.
func BatchName(group []*sealv1.SealOrder) string {
	return fmt.Sprintf("rs-%s-%d-x%d", group[0].Spec.MinerID, group[0].Spec.SectorNumber, len(group))
}

// Batch is the SealBatch that seals a group of orders, each with its ticket: CC sectors under
// the partner's miner, written to output in the lotus/Curio layout (the cache directories the
// protocol serves), C1 from the slot for interactive proofs (no layer copies: the seeds come
// with commit1). The slot goes back once the batch completes: after C1 (whose seeds the
// partner sends with commit1, or seedTimeout) or after the synthetic proofs are written, so a
// partner that never finalizes holds no layers beyond that.
func Batch(namespace string, output sealv1.OutputSpec, group []*sealv1.SealOrder) (*sealv1.SealBatch, error) {
	if len(group) == 0 || !sealv1.BatchSizeSupported(len(group)) {
		return nil, fmt.Errorf("a batch of %d orders is not a size the sealer runs", len(group))
	}
	k := keyOf(group[0])
	b := batchOf(namespace, output, k)
	b.Name = BatchName(group)
	for _, o := range group {
		if keyOf(o) != k {
			return nil, fmt.Errorf("order %s is for %v, the batch for %v", o.Name, keyOf(o), k)
		}
		if o.Status.Ticket == nil {
			return nil, fmt.Errorf("order %s has no ticket yet", o.Name)
		}
		b.Spec.Sectors = append(b.Spec.Sectors, sealv1.SectorSpec{Number: o.Spec.SectorNumber, Ticket: o.Status.Ticket.Randomness})
	}
	return b, nil
}

// View is what an order's state says to the partner.
type View struct {
	State    sealv1.OrderState
	CommDCID string
	CommRCID string
	Reason   string
}

// StateOf is the protocol state of order o given its batch (nil when o has none, or its
// batch is gone): pending until placed, sdr while the batch labels, trees while it builds
// them (and writes synthetic proofs), complete once the sector's CIDs exist, failed with the
// batch's reason, or the sector's own when the batch left it out.
func StateOf(o *sealv1.SealOrder, b *sealv1.SealBatch) View {
	if o.Status.State == sealv1.OrderFailed {
		return View{State: sealv1.OrderFailed, Reason: o.Status.FailReason}
	}
	if o.Name != Name(o.Spec.MinerID, o.Spec.SectorNumber) {
		return View{State: sealv1.OrderFailed, Reason: fmt.Sprintf("order %s must be named %s (one order per sector)", o.Name, Name(o.Spec.MinerID, o.Spec.SectorNumber))}
	}
	if b == nil {
		if o.Status.CommRCID != "" {
			// Its batch is gone after completing (released and deleted): the outputs stay.
			return View{State: sealv1.OrderComplete, CommDCID: o.Status.CommDCID, CommRCID: o.Status.CommRCID}
		}
		if o.Status.Batch != "" {
			return View{State: sealv1.OrderFailed, Reason: fmt.Sprintf("batch %s was deleted before the sector was sealed", o.Status.Batch)}
		}
		return View{State: sealv1.OrderPending}
	}
	for _, s := range b.Status.Sectors {
		if s.Number == o.Spec.SectorNumber && s.State == "Failed" {
			// Left out of its batch (a check of its own failed); the others were sealed.
			return View{State: sealv1.OrderFailed, Reason: fmt.Sprintf("batch %s left sector %d out: %s", b.Name, s.Number, s.Reason)}
		}
		if s.Number == o.Spec.SectorNumber && s.CommRCID != "" && s.CommDCID != "" && sectorSealed(b) {
			return View{State: sealv1.OrderComplete, CommDCID: s.CommDCID, CommRCID: s.CommRCID}
		}
	}
	switch b.Status.Phase {
	case sealv1.PhaseFailed:
		reason := b.Status.Message
		if reason == "" {
			reason = "the batch failed"
		}
		return View{State: sealv1.OrderFailed, Reason: fmt.Sprintf("batch %s: %s", b.Name, reason)}
	case sealv1.PhasePlaced, sealv1.PhasePC1:
		return View{State: sealv1.OrderSDR}
	case sealv1.PhasePC2, sealv1.PhaseWaitingForSeeds, sealv1.PhaseC1, sealv1.PhaseCompleted:
		return View{State: sealv1.OrderTrees}
	}
	return View{State: sealv1.OrderPending}
}

// sectorSealed: an interactive batch's sectors are complete once PC2 is done (it then waits
// for seeds); a SyntheticPoRep batch's once its proofs are written too (Completed), since C1
// reads them.
func sectorSealed(b *sealv1.SealBatch) bool {
	switch b.Status.Phase {
	case sealv1.PhaseCompleted:
		return true
	case sealv1.PhaseWaitingForSeeds, sealv1.PhaseC1:
		return b.Spec.ProofTypeOrDefault() != sealv1.ProofTypeSyntheticPoRep
	}
	return false
}

// LabelHandoff marks the orders of a batch handed to a lotus-miner (spec.handoff); its value
// is the batch's name. Such orders are never queued: their batch exists before them.
const LabelHandoff = "sealfleet.io/handoff-batch"

// ForHandoff is one order per sector of a batch handed to a lotus-miner: the miner's Secret
// is the partner, the batch is the order's from the start and its ticket the sector's (lotus
// checks it against its chain; the batch carries it and its epoch). Status is filled for the
// caller to write after creating each order.
func ForHandoff(b *sealv1.SealBatch, ticket func(i int) ([32]byte, error), now time.Time) ([]*sealv1.SealOrder, error) {
	if b.Spec.Handoff == nil {
		return nil, fmt.Errorf("batch %s/%s has no spec.handoff", b.Namespace, b.Name)
	}
	partner := b.Spec.Handoff.LotusMiner
	var out []*sealv1.SealOrder
	for i, s := range b.Spec.Sectors {
		if s.TicketEpoch == nil {
			return nil, fmt.Errorf("spec.sectors[%d].ticketEpoch: needed to hand sector %d to lotus", i, s.Number)
		}
		t, err := ticket(i)
		if err != nil {
			return nil, err
		}
		out = append(out, &sealv1.SealOrder{
			ObjectMeta: metav1.ObjectMeta{Name: Name(b.Spec.MinerID, s.Number), Namespace: b.Namespace,
				Labels: map[string]string{LabelPartner: partner, LabelHandoff: b.Name}},
			Spec: sealv1.SealOrderSpec{Partner: partner, MinerID: b.Spec.MinerID, SectorNumber: s.Number, SectorSize: b.Spec.SectorSize, ProofType: b.Spec.ProofTypeOrDefault()},
			Status: sealv1.SealOrderStatus{Batch: b.Name, State: sealv1.OrderPending,
				Ticket: &sealv1.OrderTicket{Randomness: hex.EncodeToString(t[:]), Epoch: *s.TicketEpoch, FetchTime: metav1.NewTime(now)}},
		})
	}
	return out, nil
}
