package ledger

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/testutil"
)

func sn(caps ...int64) *sealv1.SealerNode {
	n := &sealv1.SealerNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	for _, c := range caps {
		n.Status.LayerDevices = append(n.Status.LayerDevices, sealv1.LayerDeviceStatus{CapacityBytes: c, Ready: true})
	}
	return n
}

func TestGeometry(t *testing.T) {
	const tib = int64(1) << 40
	n := sn(4*tib, 4*tib, 3*tib) // uneven devices: the smallest bounds the slots
	n.Spec.Pipelines = 2
	g := GeometryOf(n)
	// one slot per pipeline: 11 TiB / 2 split over 3 devices, 1 MiB aligned.
	perDev := (11 * tib / 2 / 3) &^ (1<<20 - 1)
	if g.SlotBytes != perDev*3 || g.PerDevice != perDev || g.Count != int32(3*tib/perDev) || g.Devices != 3 {
		t.Errorf("geometry %+v (perDev %d)", g, perDev)
	}
	q := resource.MustParse("3Ti")
	n.Spec.SlotBytes = &q
	g = GeometryOf(n)
	if g.SlotBytes != 3*tib || g.Count != 3 {
		t.Errorf("explicit slot size: %+v", g)
	}
	if r := g.Range(2); r.OffsetBytes != 2*tib || r.LengthBytes != tib {
		t.Errorf("range of slot 2 = %+v", r)
	}
	for i := range n.Status.LayerDevices {
		n.Status.LayerDevices[i].Ready = false
	}
	if g = GeometryOf(n); g.Count != 0 {
		t.Errorf("no ready devices must mean no slots: %+v", g)
	}
}

// placed returns a batch whose status records a placement on node, slot `slot`, running on
// CPUs 0-3 with 36 hugepages.
func placed(name, node string, slot int32, phase sealv1.SealBatchPhase) sealv1.SealBatch {
	return *testutil.Batch("ns", name, sealv1.SectorSize32GiB, 1, testutil.Placed(node, slot, phase), func(b *sealv1.SealBatch) {
		b.Status.Hugepages1Gi, b.Status.CPUs, b.Status.OutputBytes = 36, "0-3", 100
	})
}

func TestClaimsDerivedFromBatchStatus(t *testing.T) {
	n := sn(1 << 40)
	n.Spec.Pipelines = 4
	geometry := func(string) Geometry { return GeometryOf(n) }
	released := placed("released", "n", 3, sealv1.PhaseCompleted)
	released.Status.Conditions = []metav1.Condition{{Type: sealv1.CondReleased, Status: metav1.ConditionTrue}}
	batches := []sealv1.SealBatch{
		placed("pc1", "n", 0, sealv1.PhasePC1),
		placed("done", "n", 1, sealv1.PhaseCompleted), // holds its slot (layers kept), not its CPUs
		*testutil.Batch("ns", "pending", sealv1.SectorSize32GiB, 1),
		released,
		placed("other", "m", 0, sealv1.PhasePC2),
	}
	bk := BookOf(batches, nil, geometry)
	u := bk.Of("n")
	if u.Slots() != 2 || u.PC1() != 1 || u.Hugepages() != 36 || len(u.BusyCPUs()) != 4 {
		t.Errorf("usage of n: slots %d pc1 %d hugepages %d cpus %v", u.Slots(), u.PC1(), u.Hugepages(), u.BusyCPUs())
	}
	// Output space is booked while the sealer may still write (the finished batch's files are
	// on the volume, where the agent's report counts them).
	if got := u.OutputBytes(sealv1.DefaultOutputHostPath); got != 100 {
		t.Errorf("output bytes booked on n: %d, want 100 (pc1 only)", got)
	}
	if got := u.FreeSlot(GeometryOf(n)); got != 2 {
		t.Errorf("free slot %d, want 2 (0 and 1 held, 3 released)", got)
	}
	if m := bk.Of("m"); m.Slots() != 1 || m.PC1() != 0 || m.Hugepages() != 36 {
		t.Errorf("usage of m: %+v", m.Claims)
	}
	if c := bk.Conflicts(); len(c) != 0 {
		t.Errorf("conflicts: %v", c)
	}
	dup := placed("dup", "n", 0, sealv1.PhasePlaced)
	if c := BookOf(append(batches, dup), nil, geometry).Conflicts(); len(c) != 1 {
		t.Errorf("a double booking must be reported once: %v", c)
	}
}

// TestHeldRangeSurvivesGeometryChange: a slot keeps the byte range recorded at placement, so
// a new slot size never hands out bytes a running batch still writes.
func TestHeldRangeSurvivesGeometryChange(t *testing.T) {
	n := sn(8 << 30)
	n.Spec.Pipelines = 2 // two 4 GiB slots
	b := placed("b", "n", 1, sealv1.PhasePC1)
	r := GeometryOf(n).Range(1)
	b.Status.SlotRange = &r
	n.Spec.Pipelines = 4 // now four 2 GiB slots: slots 2 and 3 overlap b's range
	u := BookOf([]sealv1.SealBatch{b}, nil, nil).Of("n")
	g := GeometryOf(n)
	if got := u.FreeSlot(g); got != 0 {
		t.Errorf("free slot %d, want 0", got)
	}
	u.Add(Claim{UID: "x", Range: g.Range(0)})
	u.Add(Claim{UID: "y", Range: g.Range(1)})
	if got := u.FreeSlot(g); got != -1 {
		t.Errorf("free slot %d, want none: 2 and 3 overlap the held 4 GiB range", got)
	}
}

// TestAssumedUntilObserved: a decision counts from before its write until the batch's status
// shows it, and is dropped with a deleted batch.
func TestAssumedUntilObserved(t *testing.T) {
	a := NewAssumed()
	b := *testutil.Batch("ns", "b", sealv1.SectorSize32GiB, 1)
	a.Assume(Claim{UID: b.UID, Node: "n", Slot: 0, Range: sealv1.SlotRange{LengthBytes: 1}})
	a.Settle([]sealv1.SealBatch{b}, time.Now()) // the cache still shows it pending
	if !a.Has(b.UID) || BookOf([]sealv1.SealBatch{b}, a, nil).Of("n").Slots() != 1 {
		t.Fatal("a written decision must count before the cache shows it")
	}
	seen := placed("b", "n", 0, sealv1.PhasePlaced)
	a.Settle([]sealv1.SealBatch{seen}, time.Now())
	if a.Has(b.UID) || BookOf([]sealv1.SealBatch{seen}, a, nil).Of("n").Slots() != 1 {
		t.Error("once the batch shows it, the batch is the record (counted once)")
	}
	a.Assume(Claim{UID: "gone", Node: "n"})
	a.Settle(nil, time.Now())
	if a.Len() != 0 {
		t.Error("a deleted batch's decision must be dropped")
	}
	// A write whose outcome is unknown keeps counting until the cache tells, or its time passes.
	now := time.Now()
	a.Assume(Claim{UID: b.UID, Node: "n"})
	a.Uncertain(b.UID, now.Add(time.Minute))
	a.Settle([]sealv1.SealBatch{b}, now.Add(30*time.Second))
	if !a.Has(b.UID) {
		t.Error("an uncertain decision was dropped before its time")
	}
	a.Settle([]sealv1.SealBatch{b}, now.Add(2*time.Minute))
	if a.Has(b.UID) {
		t.Error("an uncertain decision whose batch still shows no placement must expire")
	}
}

// TestUpdateClaimsNoSlot: a placed update (spec.update, no status.slot) holds its CPUs and
// output bytes while it runs, never a slot, and nothing once released.
func TestUpdateClaimsNoSlot(t *testing.T) {
	b := testutil.Batch("ns", "u", sealv1.SectorSize8MiB, 2, func(b *sealv1.SealBatch) {
		b.Spec.Update = &sealv1.SnapUpdate{}
		b.Status.Node, b.Status.Phase, b.Status.CPUs, b.Status.OutputBytes = "n", sealv1.PhaseUpdating, "2-3", 1<<20
	})
	c, ok := ClaimOf(b, nil)
	if !ok || c.Slot != NoSlot || c.PC1 || !c.Running || len(c.CPUs) != 2 || c.OutputBytes != 1<<20 {
		t.Fatalf("claim %+v %v", c, ok)
	}
	seal := testutil.Batch("ns", "s", sealv1.SectorSize8MiB, 2, testutil.Placed("n", 0, sealv1.PhasePC1))
	bk := BookOf([]sealv1.SealBatch{*b, *seal}, nil, func(string) Geometry { return GeometryOf(sn(1 << 40)) })
	if u := bk.Of("n"); u.Slots() != 1 || len(u.BusyCPUs()) != 2 || len(bk.Conflicts()) != 0 {
		t.Errorf("book: %d slots, cpus %v, conflicts %v", u.Slots(), u.BusyCPUs(), bk.Conflicts())
	}
	b.Status.Node = ""
	if _, ok := ClaimOf(b, nil); ok {
		t.Error("an unplaced update holds something")
	}
}

// TestDirtySlotsAreBooked: a released slot recorded dirty on the SealerNode is held until the
// record goes; while its batch still shows the claim (the moment between the record and
// Released) the two count once and are no double booking; a dirty range under a live claim of
// another batch is one.
func TestDirtySlotsAreBooked(t *testing.T) {
	n := sn(1 << 40)
	n.Spec.Pipelines = 2
	g := GeometryOf(n)
	geometry := func(string) Geometry { return g }
	releasing := placed("releasing", "n", 0, sealv1.PhaseCompleted)
	r0 := g.Range(0)
	n.Status.DirtySlots = []sealv1.DirtySlot{{Slot: 0, OffsetBytes: r0.OffsetBytes, LengthBytes: r0.LengthBytes,
		Batch: "ns/releasing", BatchUID: string(releasing.UID)}}
	bk := BookOf([]sealv1.SealBatch{releasing}, nil, geometry)
	bk.AddDirty([]sealv1.SealerNode{*n})
	u := bk.Of("n")
	if u.Slots() != 1 || u.Dirty() != 1 || u.FreeSlot(g) != 1 {
		t.Errorf("releasing: slots %d dirty %d free slot %d, want 1, 1, 1", u.Slots(), u.Dirty(), u.FreeSlot(g))
	}
	if c := bk.Conflicts(); len(c) != 0 {
		t.Errorf("a releasing batch and its own dirty record conflict: %v", c)
	}
	// The batch is gone: the record alone holds slot 0.
	bk = BookOf(nil, nil, geometry)
	bk.AddDirty([]sealv1.SealerNode{*n})
	if u := bk.Of("n"); u.Slots() != 1 || u.FreeSlot(g) != 1 || !u.Claims[0].Dirty || u.Claims[0].Batch != "ns/releasing" {
		t.Errorf("dirty only: %+v", u.Claims)
	}
	// Another batch on the dirty range is a double booking.
	other := placed("other", "n", 0, sealv1.PhasePC1)
	bk = BookOf([]sealv1.SealBatch{other}, nil, geometry)
	bk.AddDirty([]sealv1.SealerNode{*n})
	if c := bk.Conflicts(); len(c) != 1 {
		t.Errorf("a batch on a dirty slot must be reported: %v", c)
	}
}
