package plugin

import (
	"encoding/json"
	"reflect"
	"testing"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// rowKeys drops the timestamp so rows compare by what the table shows.
func rowKeys(rows []SlotRow) []SlotRow {
	out := make([]SlotRow, len(rows))
	for i, r := range rows {
		r.PlacedTime = nil
		out[i] = r
	}
	return out
}

func TestSlotRows(t *testing.T) {
	nodes, batches := testFleet()
	got := rowKeys(SlotRows(nodes, batches, "", now))
	want := []SlotRow{
		{Node: "gone", Slot: 0, State: "held", Batch: "ns/ghost", Phase: "PC2", HeldFor: "60m"},
		{Node: "n1", Slot: 0, State: "held", Batch: "ns/pc1", Phase: "PC1", HeldFor: "5m"},
		{Node: "n1", Slot: 1, State: "free"}, // released
		{Node: "n1", Slot: -1, State: "held", Batch: "ns/snap", Phase: "Updating", HeldFor: "3m"},
		{Node: "n2", Slot: 0, State: "free"},
		{Node: "n2", Slot: 1, State: "free"},
		{Node: "n3", Slot: 0, State: "held", Batch: "ns/kept", Phase: "Completed", HeldFor: "3h"},
		{Node: "n3", Slot: 1, State: "free"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows\n got %+v\nwant %+v", got, want)
	}

	got = rowKeys(onlyHeld(SlotRows(nodes, batches, "n1", now)))
	want = []SlotRow{
		{Node: "n1", Slot: 0, State: "held", Batch: "ns/pc1", Phase: "PC1", HeldFor: "5m"},
		{Node: "n1", Slot: -1, State: "held", Batch: "ns/snap", Phase: "Updating", HeldFor: "3m"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("held rows of n1\n got %+v\nwant %+v", got, want)
	}
}

// A slot range recorded at placement keeps the slot held after the node's geometry changes.
func TestSlotRowsUseRecordedRange(t *testing.T) {
	n := sealerNode("n1")
	b := batch("old", placedAt("n1", 0, sealv1.PhasePC2, 0))
	// Placed when slots were 1 GiB: bytes [1 GiB, 2 GiB) overlap today's 2 GiB slot 0.
	b.Status.Slot = new(int32)
	*b.Status.Slot = 1
	b.Status.SlotRange = &sealv1.SlotRange{OffsetBytes: gib, LengthBytes: gib}
	rows := SlotRows([]sealv1.SealerNode{n}, []sealv1.SealBatch{b}, "", now)
	if len(rows) != 2 || rows[0].State != "held" || rows[0].Slot != 0 || rows[1].State != "free" {
		t.Errorf("rows %+v: want slot 0 held by the recorded range, slot 1 free", rows)
	}
}

func TestSlotsCommand(t *testing.T) {
	nodes, batches := testFleet()
	c := fakeClient(append(objects(nodes), objects(batches)...)...)

	out, errOut, code := run(t, c, "", "slots", "--held", "--no-headers")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := [][]string{
		{"gone", "0", "held", "ns/ghost", "PC2", "60m"},
		{"n1", "0", "held", "ns/pc1", "PC1", "5m"},
		{"n1", "-", "held", "ns/snap", "Updating", "3m"},
		{"n3", "0", "held", "ns/kept", "Completed", "3h"},
	}
	if got := splitRows(out); !reflect.DeepEqual(got, want) {
		t.Errorf("slots --held --no-headers:\n%s\nwant rows %q", out, want)
	}

	out, _, code = run(t, c, "", "slots", "n2")
	want = [][]string{
		{"NODE", "SLOT", "STATE", "BATCH", "PHASE", "HELD-FOR"},
		{"n2", "0", "free", "-", "-", "-"},
		{"n2", "1", "free", "-", "-", "-"},
	}
	if got := splitRows(out); code != 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("slots n2 (exit %d):\n%s", code, out)
	}

	out, _, code = run(t, c, "", "slots", "n1", "-o", "json")
	var rows []SlotRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 {
		t.Fatalf("slots -o json (exit %d): %v\n%s", code, err, out)
	}
	if len(rows) != 3 || rows[2].Slot != -1 || rows[2].Batch != "ns/snap" || rows[0].PlacedTime == nil {
		t.Errorf("slots n1 -o json: %+v", rows)
	}

	_, errOut, code = run(t, c, "", "slots", "nope")
	if code != ExitError || !contains(errOut, "SealerNode nope not found: kubectl get sealernodes lists them") {
		t.Errorf("unknown node: exit %d, %s", code, errOut)
	}
}

// A slot released but not scrubbed yet shows dirty, naming the batch that left it, and counts
// among --held.
func TestSlotRowsShowDirtySlots(t *testing.T) {
	n := sealerNode("n1", func(n *sealv1.SealerNode) {
		n.Status.DirtySlots = []sealv1.DirtySlot{{Slot: 1, OffsetBytes: 2 * gib, LengthBytes: 2 * gib, Batch: "ns/gone", BatchUID: "u"}}
	})
	got := rowKeys(onlyHeld(SlotRows([]sealv1.SealerNode{n}, nil, "", now)))
	want := []SlotRow{{Node: "n1", Slot: 1, State: "dirty", Batch: "ns/gone", Phase: "waiting for its scrub"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows\n got %+v\nwant %+v", got, want)
	}
}
