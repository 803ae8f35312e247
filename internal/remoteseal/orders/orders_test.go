package orders_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/remoteseal/orders"
)

var (
	t0  = time.Unix(1_800_000_000, 0)
	out = sealv1.OutputSpec{HostPath: &sealv1.HostPathOutput{Path: "/var/lib/sealfleet/output"}}
)

func order(partner, miner string, sector int64, proof sealv1.ProofType, age time.Duration) *sealv1.SealOrder {
	return &sealv1.SealOrder{
		ObjectMeta: metav1.ObjectMeta{Name: orders.Name(miner, sector), CreationTimestamp: metav1.NewTime(t0.Add(-age))},
		Spec:       sealv1.SealOrderSpec{Partner: partner, MinerID: miner, SectorNumber: sector, SectorSize: sealv1.SectorSize32GiB, ProofType: proof},
		Status:     sealv1.SealOrderStatus{Ticket: &sealv1.OrderTicket{Randomness: strings.Repeat("0a", 32), Epoch: 100}},
	}
}

func sectors(groups [][]*sealv1.SealOrder) string {
	var out []string
	for _, g := range groups {
		var s []string
		for _, o := range g {
			s = append(s, fmt.Sprint(o.Spec.SectorNumber))
		}
		out = append(out, strings.Join(s, ","))
	}
	return strings.Join(out, " | ")
}

// TestFormBatches: full batches at once, in arrival order; a partial group only once its
// oldest order waited MaxWait, split into sizes the sealer runs; never mixing partners,
// miners or proof types.
func TestFormBatches(t *testing.T) {
	p := orders.Policy{MaxBatch: 4, MaxWait: 10 * time.Minute}
	var q []*sealv1.SealOrder
	for i := int64(0); i < 9; i++ {
		q = append(q, order("alpha", "f01000", 10+i, sealv1.ProofTypeV1_1, time.Duration(9-i)*time.Minute))
	}
	if got := sectors(orders.Form(q, t0, p)); got != "10,11,12,13 | 14,15,16,17" {
		t.Errorf("young orders: %s", got)
	}
	// Six minutes later sector 14, the oldest left after the full batch, has waited 11.
	if got := sectors(orders.Form(q[:7], t0.Add(6*time.Minute), p)); got != "10,11,12,13 | 14,15 | 16" {
		t.Errorf("after MaxWait: %s", got)
	}
	mixed := []*sealv1.SealOrder{
		order("alpha", "f01000", 1, sealv1.ProofTypeV1_1, 50*time.Minute), order("beta", "f01000", 2, sealv1.ProofTypeV1_1, 55*time.Minute),
		order("alpha", "f02000", 3, sealv1.ProofTypeV1_1, 40*time.Minute), order("alpha", "f01000", 4, sealv1.ProofTypeSyntheticPoRep, time.Hour),
		order("alpha", "f01000", 5, sealv1.ProofTypeV1_1, time.Hour),
	}
	if got := sectors(orders.Form(mixed, t0, p)); got != "4 | 5,1 | 2 | 3" {
		t.Errorf("mixed keys: %s", got)
	}
	if got := orders.Form(q, t0, orders.Policy{MaxBatch: 3, MaxWait: time.Hour}); sectors(got) != "10,11 | 12,13 | 14,15 | 16,17" {
		t.Errorf("MaxBatch 3 rounds down to 2: %s", sectors(got))
	}
}

// TestFormBoundedByCapacity: a full batch is as large as a free node takes; while every node
// that could seal the kind is busy, orders wait out MaxWait and then form batches a node can
// take once free; a kind no node can seal forms as before (placement says why it waits).
func TestFormBoundedByCapacity(t *testing.T) {
	var q []*sealv1.SealOrder
	for i := int64(0); i < 7; i++ {
		q = append(q, order("alpha", "f01000", 10+i, sealv1.ProofTypeV1_1, time.Duration(7-i)*time.Minute))
	}
	capacity := orders.Capacity{}
	p := orders.Policy{MaxBatch: 8, MaxWait: 10 * time.Minute, Capacity: func(k orders.Key) orders.Capacity {
		if k.Size != sealv1.SectorSize32GiB || k.Proof != sealv1.ProofTypeV1_1 {
			t.Errorf("capacity asked for %+v", k)
		}
		return capacity
	}}
	for _, c := range []struct {
		name     string
		capacity orders.Capacity
		after    time.Duration
		want     string
	}{
		{"a free node takes 2", orders.Capacity{Now: 2, Ever: 8}, 0, "10,11 | 12,13 | 14,15"},
		{"a free node takes 3: batches of 2", orders.Capacity{Now: 3, Ever: 3}, 0, "10,11 | 12,13 | 14,15"},
		{"a free node takes more than MaxBatch", orders.Capacity{Now: 128, Ever: 128}, 0, ""},
		{"all busy: nothing before the wait", orders.Capacity{Now: 0, Ever: 4}, 0, ""},
		{"all busy, after the wait: batches a node takes once free", orders.Capacity{Now: 0, Ever: 4}, 4 * time.Minute, "10,11,12,13 | 14,15 | 16"},
		{"no node can seal it: as MaxBatch allows, after the wait", orders.Capacity{}, 4 * time.Minute, "10,11,12,13 | 14,15 | 16"},
	} {
		capacity = c.capacity
		if got := sectors(orders.Form(q, t0.Add(c.after), p)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	probe := orders.Probe("ns", out, orders.Key{Partner: "alpha", MinerID: "f01000", Size: sealv1.SectorSize8MiB, Proof: sealv1.ProofTypeV1_1}, 4)
	if len(probe.Spec.Sectors) != 4 || probe.Spec.Commit1 != sealv1.Commit1FromSlot || probe.Spec.Output.Layout != sealv1.OutputLayoutLotus {
		t.Errorf("probe %+v", probe.Spec)
	}
}

func TestBatchOfOrders(t *testing.T) {
	g := []*sealv1.SealOrder{order("alpha", "f01000", 7, sealv1.ProofTypeV1_1, 0), order("alpha", "f01000", 8, sealv1.ProofTypeV1_1, 0)}
	b, err := orders.Batch("sealfleet-batches", out, g)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "rs-f01000-7-x2" || b.Namespace != "sealfleet-batches" || b.Labels[orders.LabelPartner] != "alpha" || b.Spec.MinerID != "f01000" ||
		b.Spec.Commit1 != sealv1.Commit1FromSlot || b.Spec.ReleasePolicy != sealv1.ReleaseOnCompletion || b.Spec.Output.Layout != sealv1.OutputLayoutLotus || b.Spec.Output.HostPath.Path != "/var/lib/sealfleet/output" ||
		len(b.Spec.Sectors) != 2 || b.Spec.Sectors[1].Number != 8 || b.Spec.Sectors[1].Ticket != strings.Repeat("0a", 32) {
		t.Errorf("batch %+v", b)
	}
	syn, _ := orders.Batch("ns", out, []*sealv1.SealOrder{order("alpha", "f01000", 9, sealv1.ProofTypeSyntheticPoRep, 0)})
	if syn.Spec.Commit1 != "" || syn.Spec.ProofType != sealv1.ProofTypeSyntheticPoRep {
		t.Errorf("synthetic batch: commit1 %q proof %s", syn.Spec.Commit1, syn.Spec.ProofType)
	}
	noTicket := order("alpha", "f01000", 10, sealv1.ProofTypeV1_1, 0)
	noTicket.Status.Ticket = nil
	for name, bad := range map[string][]*sealv1.SealOrder{
		"three":     {g[0], g[1], order("alpha", "f01000", 9, sealv1.ProofTypeV1_1, 0)},
		"no ticket": {noTicket},
		"mixed":     {g[0], order("beta", "f01000", 11, sealv1.ProofTypeV1_1, 0)},
	} {
		if _, err := orders.Batch("ns", out, bad); err == nil {
			t.Errorf("%s: formed", name)
		}
	}
}

// TestStateOf: the protocol state follows the batch; complete needs the sector's CIDs (and a
// synthetic batch's proofs); a failed or vanished batch fails the order with a reason.
func TestStateOf(t *testing.T) {
	o := order("alpha", "f01000", 7, sealv1.ProofTypeV1_1, 0)
	if v := orders.StateOf(o, nil); v.State != sealv1.OrderPending {
		t.Errorf("queued: %+v", v)
	}
	b := &sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Name: "rs-f01000-7-x1"}}
	sealed := []sealv1.SectorStatus{{Number: 7, CommDCID: "baga", CommRCID: "bagb"}}
	for _, tc := range []struct {
		phase   sealv1.SealBatchPhase
		proof   sealv1.ProofType
		sectors []sealv1.SectorStatus
		want    sealv1.OrderState
	}{
		{sealv1.PhasePending, sealv1.ProofTypeV1_1, nil, sealv1.OrderPending},
		{sealv1.PhasePlaced, sealv1.ProofTypeV1_1, nil, sealv1.OrderSDR},
		{sealv1.PhasePC1, sealv1.ProofTypeV1_1, nil, sealv1.OrderSDR},
		{sealv1.PhasePC2, sealv1.ProofTypeV1_1, nil, sealv1.OrderTrees},
		{sealv1.PhaseWaitingForSeeds, sealv1.ProofTypeV1_1, sealed, sealv1.OrderComplete},
		{sealv1.PhaseC1, sealv1.ProofTypeV1_1, sealed, sealv1.OrderComplete},
		{sealv1.PhaseCompleted, sealv1.ProofTypeV1_1, nil, sealv1.OrderTrees},
		{sealv1.PhaseWaitingForSeeds, sealv1.ProofTypeSyntheticPoRep, sealed, sealv1.OrderTrees},
		{sealv1.PhaseCompleted, sealv1.ProofTypeSyntheticPoRep, sealed, sealv1.OrderComplete},
		{sealv1.PhaseFailed, sealv1.ProofTypeV1_1, nil, sealv1.OrderFailed},
	} {
		b.Spec.ProofType, b.Status.Phase, b.Status.Sectors, b.Status.Message = tc.proof, tc.phase, tc.sectors, "sealer crashed"
		v := orders.StateOf(o, b)
		if v.State != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.proof, tc.phase, v.State, tc.want)
		}
		if v.State == sealv1.OrderComplete && (v.CommDCID != "baga" || v.CommRCID != "bagb") {
			t.Errorf("complete without its CIDs: %+v", v)
		}
		if v.State == sealv1.OrderFailed && !strings.Contains(v.Reason, "rs-f01000-7-x1: sealer crashed") {
			t.Errorf("failure reason %q", v.Reason)
		}
	}
	// A sector the batch left out fails with its own reason while the batch completes.
	b.Spec.ProofType, b.Status.Phase = sealv1.ProofTypeV1_1, sealv1.PhaseCompleted
	b.Status.Sectors = []sealv1.SectorStatus{{Number: 7, State: "Failed", Reason: "sector 7: its data /d/7 is not a field element"}}
	if v := orders.StateOf(o, b); v.State != sealv1.OrderFailed || !strings.Contains(v.Reason, "left sector 7 out: sector 7: its data /d/7") {
		t.Errorf("a sector left out of its batch: %+v", v)
	}
	o.Status.Batch = "rs-f01000-7-x1"
	if v := orders.StateOf(o, nil); v.State != sealv1.OrderFailed || !strings.Contains(v.Reason, "deleted") {
		t.Errorf("batch deleted before sealing: %+v", v)
	}
	o.Status.CommDCID, o.Status.CommRCID = "baga", "bagb"
	if v := orders.StateOf(o, nil); v.State != sealv1.OrderComplete {
		t.Errorf("batch deleted after sealing: %+v", v)
	}
	o.Name = "f01000-8"
	if v := orders.StateOf(o, nil); v.State != sealv1.OrderFailed || !strings.Contains(v.Reason, "must be named f01000-7") {
		t.Errorf("misnamed order: %+v", v)
	}
}

// A batch handed to lotus has one order per sector, its miner Secret as partner, the batch and
// the sector's ticket and epoch in its status; a sector without its epoch is refused.
func TestForHandoff(t *testing.T) {
	epoch := int64(77)
	b := &sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Name: "lb", Namespace: "o"}, Spec: sealv1.SealBatchSpec{
		SectorSize: sealv1.SectorSize8MiB, MinerID: "f01000", Handoff: &sealv1.Handoff{LotusMiner: "m1"},
		Sectors: []sealv1.SectorSpec{{Number: 5, TicketEpoch: &epoch}, {Number: 6, TicketEpoch: &epoch}}}}
	ticket := func(i int) ([32]byte, error) { return [32]byte{byte(i + 1)}, nil }
	now := time.Unix(1_800_000_000, 0)
	got, err := orders.ForHandoff(b, ticket, now)
	if err != nil || len(got) != 2 {
		t.Fatalf("%v %d", err, len(got))
	}
	o := got[1]
	if o.Name != "f01000-6" || o.Spec.Partner != "m1" || o.Labels[orders.LabelHandoff] != "lb" || o.Labels[orders.LabelPartner] != "m1" ||
		o.Status.Batch != "lb" || o.Status.Ticket.Epoch != 77 || o.Status.Ticket.Randomness[:4] != "0200" || o.Spec.ProofType != sealv1.ProofTypeV1_1 {
		t.Errorf("order %+v", o)
	}
	b.Spec.Sectors[1].TicketEpoch = nil
	if _, err := orders.ForHandoff(b, ticket, now); err == nil || !strings.Contains(err.Error(), "spec.sectors[1].ticketEpoch") {
		t.Errorf("no epoch: %v", err)
	}
}
