// Package ledger answers who holds which layer slot, hugepages, CPUs, PC1 pipeline and GPU on
// each node.
//
// The only record is each SealBatch's own status: placement commits a decision with one write
// (node, slot, slot range, hugepages, layout, cpus) to the batch it places, and a batch holds
// its slot until its status says Released or the batch is gone. Usage of a node is derived
// from the batches (as Kueue derives a queue's usage from its admitted workloads), never
// stored in the SealerNode, whose status belongs to the node agent. This choice removes
// the two-write protocol of the first design (a reservation in the SealerNode, then the node in
// the batch) together with everything that repaired its gap: there is nothing to adopt after
// a crash, nothing to find by UID on other nodes, and no orphan to collect, because a deleted
// batch takes its claim with it.
//
// One thing outlives a batch: a slot it released that is not scrubbed yet. The release
// records that range in the SealerNode's status.dirtySlots (owned by the operator) before the
// batch lets go of it, and the range is booked like a held slot until the scrub succeeds
// (DirtyClaims).
//
// What a derived record needs is a view that includes the operator's own writes before its
// informer cache shows them: Assumed holds decisions written but not yet observed (the
// kube-scheduler's "assume" step), so two cycles never hand out the same slot.
package ledger

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/cpuset"
)

// BatchKey is how logs and metrics name a batch: <namespace>/<name>.
func BatchKey(b *sealv1.SealBatch) string { return b.Namespace + "/" + b.Name }

// alignment of a slot's share of each device.
const alignment = 1 << 20

// Geometry is how a node's layer space divides into slots: slot i is the range
// [i×PerDevice, (i+1)×PerDevice) of every ready layer device.
type Geometry struct {
	// SlotBytes is one slot over all devices; PerDevice its share of each.
	SlotBytes, PerDevice int64
	// Count is the number of slots; Devices the number of ready layer devices.
	Count   int32
	Devices int
}

// GeometryOf computes a node's slot geometry from its ready layer devices and spec. Without
// spec.slotBytes the space is split evenly into one slot per pipeline. Each device gets an
// equal, 1 MiB-aligned share of every slot; the smallest device bounds the count.
func GeometryOf(sn *sealv1.SealerNode) Geometry {
	var g Geometry
	var total, minDev int64 = 0, -1
	for _, d := range sn.Status.LayerDevices {
		if !d.Ready {
			continue
		}
		total += d.CapacityBytes
		g.Devices++
		if minDev < 0 || d.CapacityBytes < minDev {
			minDev = d.CapacityBytes
		}
	}
	if g.Devices == 0 || total == 0 {
		return Geometry{Devices: g.Devices}
	}
	pipelines := int64(sn.Spec.Pipelines)
	if pipelines < 1 {
		pipelines = 1
	}
	slot := total / pipelines
	if sn.Spec.SlotBytes != nil && sn.Spec.SlotBytes.Value() > 0 {
		slot = sn.Spec.SlotBytes.Value()
	}
	g.PerDevice = slot / int64(g.Devices) &^ (alignment - 1)
	if g.PerDevice == 0 {
		return Geometry{Devices: g.Devices}
	}
	g.SlotBytes = g.PerDevice * int64(g.Devices)
	g.Count = int32(minDev / g.PerDevice)
	return g
}

// Status is the geometry as the SealerNode status shows it.
func (g Geometry) Status() *sealv1.SlotGeometry {
	return &sealv1.SlotGeometry{SlotBytes: g.SlotBytes, Count: g.Count}
}

// Range is slot i's range on every device.
func (g Geometry) Range(slot int32) sealv1.SlotRange {
	return sealv1.SlotRange{OffsetBytes: int64(slot) * g.PerDevice, LengthBytes: g.PerDevice}
}

// NoSlot is the Slot of a claim that holds no layer slot (a SnapDeals update labels no layers).
const NoSlot int32 = -1

// Claim is what one placed batch holds on its node.
type Claim struct {
	UID   types.UID
	Batch string
	Node  string
	// Slot is the held layer slot (NoSlot: none, and Range is empty).
	Slot  int32
	Range sealv1.SlotRange
	// Running is true while the sealer may run (Placed, PC1, PC2): only then does the batch
	// hold CPUs, hugepages and GPUs. PC1 is true while it labels (Placed, PC1).
	Running, PC1 bool
	Hugepages    int32
	CPUs         []int
	GPUs         int32
	// OutputPath is the host directory the outputs go to ("" for a claim volume) and
	// OutputBytes what the batch booked there; held until the sealer is done (its files are
	// then on the volume, where the agent's free-space report counts them).
	OutputPath  string
	OutputBytes int64
	// Dirty marks a range released but not scrubbed yet (UID and Batch are the batch that
	// left it): it holds the slot and nothing else.
	Dirty bool
}

// ClaimOf reads the claim a batch's status records; ok is false when it holds nothing (not
// placed, or released). A slot range missing from an older status is derived from geometry.
func ClaimOf(b *sealv1.SealBatch, geometry func(node string) Geometry) (Claim, bool) {
	st := &b.Status
	update := b.Spec.IsUpdate()
	if st.Node == "" || (st.Slot == nil && !update) || meta.IsStatusConditionTrue(st.Conditions, sealv1.CondReleased) {
		return Claim{}, false
	}
	c := Claim{UID: b.UID, Batch: BatchKey(b), Node: st.Node, Slot: NoSlot}
	if st.Slot != nil {
		c.Slot = *st.Slot
		if st.SlotRange != nil {
			c.Range = *st.SlotRange
		} else if geometry != nil {
			c.Range = geometry(st.Node).Range(*st.Slot)
		}
	}
	switch st.Phase {
	case sealv1.PhasePlaced, sealv1.PhasePC1:
		c.Running, c.PC1 = true, !update
	case sealv1.PhasePC2, sealv1.PhaseUpdating:
		c.Running = true
	}
	if c.Running {
		c.Hugepages = st.Hugepages1Gi
		c.GPUs = b.GPUsHeld()
		if cpus, err := cpuset.Parse(st.CPUs); err == nil {
			c.CPUs = cpus
		}
		c.OutputPath, c.OutputBytes = b.Spec.OutputHostPath(), st.OutputBytes
	}
	return c, true
}

// DirtyClaims are the claims of a node's dirty slots.
func DirtyClaims(sn *sealv1.SealerNode) []Claim {
	out := make([]Claim, 0, len(sn.Status.DirtySlots))
	for _, d := range sn.Status.DirtySlots {
		out = append(out, Claim{
			UID: types.UID(d.BatchUID), Batch: d.Batch, Node: sn.Name, Slot: d.Slot, Dirty: true,
			Range: sealv1.SlotRange{OffsetBytes: d.OffsetBytes, LengthBytes: d.LengthBytes},
		})
	}
	return out
}

// Usage is what the batches placed on one node hold there.
type Usage struct {
	Claims []Claim
}

// Add records a claim.
func (u *Usage) Add(c Claim) { u.Claims = append(u.Claims, c) }

// OutputBytes is the output space running batches booked under host path p.
func (u *Usage) OutputBytes(p string) int64 {
	var n int64
	for _, c := range u.Claims {
		if c.OutputPath == p {
			n += c.OutputBytes
		}
	}
	return n
}

// AddDirty books every node's dirty slots.
func (bk Book) AddDirty(sns []sealv1.SealerNode) {
	for i := range sns {
		for _, c := range DirtyClaims(&sns[i]) {
			bk.Of(c.Node).Add(c)
		}
	}
}

// Slots is the number of held slots (a releasing batch's range counts once, though it is
// both its claim and a dirty record for a moment).
func (u *Usage) Slots() int {
	live := map[types.UID]bool{}
	for _, c := range u.Claims {
		if !c.Dirty {
			live[c.UID] = true
		}
	}
	return u.count(func(c *Claim) bool { return c.Slot != NoSlot && !(c.Dirty && live[c.UID]) })
}

// Dirty counts the dirty slots (released, waiting for their scrub).
func (u *Usage) Dirty() int { return u.count(func(c *Claim) bool { return c.Dirty }) }

// Hugepages is the 1 GiB hugepages held by running batches.
func (u *Usage) Hugepages() int64 {
	var n int64
	for _, c := range u.Claims {
		n += int64(c.Hugepages)
	}
	return n
}

// PC1 counts the batches labelling (each needs a PC1 pipeline).
func (u *Usage) PC1() int { return u.count(func(c *Claim) bool { return c.PC1 }) }

// GPUs counts the GPUs the running batches use.
func (u *Usage) GPUs() int {
	n := 0
	for _, c := range u.Claims {
		n += int(c.GPUs)
	}
	return n
}

func (u *Usage) count(pred func(*Claim) bool) int {
	n := 0
	for i := range u.Claims {
		if pred(&u.Claims[i]) {
			n++
		}
	}
	return n
}

// BusyCPUs lists the CPUs running batches hold.
func (u *Usage) BusyCPUs() []int {
	var out []int
	for _, c := range u.Claims {
		out = append(out, c.CPUs...)
	}
	return out
}

// FreeSlot returns the lowest slot of g whose range overlaps no held range, or -1.
func (u *Usage) FreeSlot(g Geometry) int32 {
	for i := int32(0); i < g.Count; i++ {
		r := g.Range(i)
		free := true
		for _, c := range u.Claims {
			if c.Slot != NoSlot && c.Range.OffsetBytes < r.OffsetBytes+r.LengthBytes && r.OffsetBytes < c.Range.OffsetBytes+c.Range.LengthBytes {
				free = false
				break
			}
		}
		if free {
			return i
		}
	}
	return -1
}

// Book is the usage of every node, derived from the batches and the assumed decisions.
type Book map[string]*Usage

// Of returns a node's usage (empty, never nil).
func (bk Book) Of(node string) *Usage {
	if u := bk[node]; u != nil {
		return u
	}
	u := &Usage{}
	bk[node] = u
	return u
}

// BookOf derives every node's usage from the batches' status plus the assumed decisions the
// batches do not show yet.
func BookOf(batches []sealv1.SealBatch, assumed *Assumed, geometry func(node string) Geometry) Book {
	bk := Book{}
	for i := range batches {
		if c, ok := ClaimOf(&batches[i], geometry); ok {
			bk.Of(c.Node).Add(c)
		}
	}
	if assumed != nil {
		for _, c := range assumed.List() {
			bk.Of(c.Node).Add(c)
		}
	}
	return bk
}

// Conflicts lists every pair of claims that overlap on a node: a double booking, which the
// one-record design must make impossible (tests and the operator's self-check use it).
func (bk Book) Conflicts() []string {
	var out []string
	for node, u := range bk {
		for i := range u.Claims {
			for j := i + 1; j < len(u.Claims); j++ {
				if u.Claims[i].Slot == NoSlot || u.Claims[j].Slot == NoSlot {
					continue
				}
				if u.Claims[i].UID == u.Claims[j].UID && u.Claims[i].Dirty != u.Claims[j].Dirty {
					continue // a batch releasing: its range is recorded dirty before it lets go
				}
				a, b := u.Claims[i].Range, u.Claims[j].Range
				if a.OffsetBytes < b.OffsetBytes+b.LengthBytes && b.OffsetBytes < a.OffsetBytes+a.LengthBytes {
					out = append(out, fmt.Sprintf("%s: slot %d of %s overlaps slot %d of %s", node,
						u.Claims[i].Slot, u.Claims[i].Batch, u.Claims[j].Slot, u.Claims[j].Batch))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// Assumed holds the claims of decisions placement has written (or is writing) that its
// informer cache does not show yet. Safe for concurrent use.
type Assumed struct {
	mu     sync.Mutex
	claims map[types.UID]assumed
}

type assumed struct {
	claim Claim
	// expires is set when the write's outcome is unknown (an error after the request went
	// out): the claim counts until the cache shows the batch placed or this time passes.
	expires time.Time
}

// NewAssumed returns an empty set.
func NewAssumed() *Assumed { return &Assumed{claims: map[types.UID]assumed{}} }

// Assume records a decision before its write goes out.
func (a *Assumed) Assume(c Claim) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.claims[c.UID] = assumed{claim: c}
}

// Forget drops a decision whose write certainly did not land.
func (a *Assumed) Forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.claims, uid)
}

// Uncertain keeps a decision whose write may or may not have landed until `until`: dropping
// it at once could hand its slot to another batch while the write is in fact stored.
func (a *Assumed) Uncertain(uid types.UID, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.claims[uid]; ok {
		e.expires = until
		a.claims[uid] = e
	}
}

// Has reports whether a decision for this batch is assumed.
func (a *Assumed) Has(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.claims[uid]
	return ok
}

// List returns the assumed claims.
func (a *Assumed) List() []Claim {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Claim, 0, len(a.claims))
	for _, e := range a.claims {
		out = append(out, e.claim)
	}
	return out
}

// Settle drops the decisions the batches now show (their status names a node), those of
// batches that are gone (from then on the batches themselves are the record), and uncertain
// ones past their time whose batch still shows no placement (the write did not land).
func (a *Assumed) Settle(batches []sealv1.SealBatch, now time.Time) {
	seen := make(map[types.UID]*sealv1.SealBatch, len(batches))
	for i := range batches {
		seen[batches[i].UID] = &batches[i]
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for uid, e := range a.claims {
		b := seen[uid]
		if b == nil || b.Status.Node != "" || (!e.expires.IsZero() && now.After(e.expires)) {
			delete(a.claims, uid)
		}
	}
}

// Len is the number of assumed decisions.
func (a *Assumed) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.claims)
}
