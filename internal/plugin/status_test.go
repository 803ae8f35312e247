package plugin

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// testFleet: n1 (Ready, two slots), n2 (not Ready), n3 (Ready, cordoned), and batches that
// hold, held, never held or hold no slot.
func testFleet() ([]sealv1.SealerNode, []sealv1.SealBatch) {
	nodes := []sealv1.SealerNode{
		sealerNode("n1", func(n *sealv1.SealerNode) {
			n.Status.NUMANodes = []sealv1.NUMANode{
				{ID: 0, Hugepages: []sealv1.Hugepages{{PageSize: "1Gi", Total: 64, Free: 20}, {PageSize: "2Mi", Total: 1000, Free: 1000}}},
				{ID: 1, Hugepages: []sealv1.Hugepages{{PageSize: "1Gi", Total: 64, Free: 64}}},
			}
			n.Status.ParentCaches = []sealv1.ParentCacheStatus{{Proof: "StackedDrg32GiBV1_1", Verified: true}}
		}),
		sealerNode("n2", notReady("DevicesNotReady", "1 of 1 layer devices not ready")),
		sealerNode("n3", cordoned, func(n *sealv1.SealerNode) {
			n.Status.ParentCaches = []sealv1.ParentCacheStatus{
				{Proof: "StackedDrg32GiBV1_1", Building: true, Percent: 40},
				{Proof: "StackedDrg2KiBV1_1", Verified: true},
			}
		}),
	}
	batches := []sealv1.SealBatch{
		batch("pc1", placedAt("n1", 0, sealv1.PhasePC1, 5*time.Minute)),
		// Released: its slot is free again, though its status still names it.
		batch("released", placedAt("n1", 1, sealv1.PhaseCompleted, 2*time.Hour), completed(10*time.Minute, 2), released),
		batch("kept", placedAt("n3", 0, sealv1.PhaseCompleted, 3*time.Hour), completed(2*time.Hour, 2)),
		batch("new"), // no phase yet: Pending
		batch("waiting", pendingWith("no node has a free slot")),
		batch("snap", update("n1")),
		batch("ghost", placedAt("gone", 0, sealv1.PhasePC2, time.Hour)),
	}
	return nodes, batches
}

func TestSummarize(t *testing.T) {
	nodes, batches := testFleet()
	s := Summarize(nodes, batches, now)

	if s.Nodes.Total != 3 || s.Nodes.Ready != 2 || s.Nodes.Cordoned != 1 {
		t.Errorf("nodes %+v, want 3 total, 2 Ready, 1 cordoned", s.Nodes)
	}
	wantUnavailable := []UnavailableNode{
		{Name: "n2", Ready: "False", Reason: "DevicesNotReady", Message: "1 of 1 layer devices not ready"},
		{Name: "n3", Ready: "True", Cordoned: true, Reason: "Ready"},
	}
	if !reflect.DeepEqual(s.Nodes.Unavailable, wantUnavailable) {
		t.Errorf("unavailable nodes %+v, want %+v", s.Nodes.Unavailable, wantUnavailable)
	}
	// Slots come from the batches: n1 slot 0 (pc1) and n3 slot 0 (kept); released gives n1
	// slot 1 back; the update holds none; ghost's node has no SealerNode.
	if want := (SlotCounts{Total: 6, Held: 2, Free: 4, HeldOnUnknownNodes: 1}); s.Slots != want {
		t.Errorf("slots %+v, want %+v", s.Slots, want)
	}
	if want := (HugepageCounts{Total: 128, Free: 84}); s.Hugepages1Gi != want {
		t.Errorf("1Gi hugepages %+v, want %+v (2Mi pages not counted)", s.Hugepages1Gi, want)
	}
	wantCaches := []ParentCacheCounts{{Proof: "StackedDrg2KiBV1_1", Verified: 1}, {Proof: "StackedDrg32GiBV1_1", Verified: 1, Building: 1}}
	if !reflect.DeepEqual(s.ParentCaches, wantCaches) {
		t.Errorf("parent caches %+v, want %+v", s.ParentCaches, wantCaches)
	}
	wantPhases := map[string]int{"Pending": 2, "Placed": 0, "PC1": 1, "PC2": 1, "WaitingForSeeds": 0, "C1": 0, "Updating": 1, "Completed": 2, "Failed": 0}
	if s.Batches.Total != 7 || !reflect.DeepEqual(s.Batches.ByPhase, wantPhases) {
		t.Errorf("batches %d %v, want 7 %v", s.Batches.Total, s.Batches.ByPhase, wantPhases)
	}
	// Only "released" completed within the hour ("kept" two hours ago).
	if s.Batches.SectorsSealedLastHour != 2 {
		t.Errorf("sectors sealed in the last hour: %d, want 2", s.Batches.SectorsSealedLastHour)
	}
}

// A dirty slot (released, not scrubbed) is neither held nor free; a batch still holding the
// slot its own earlier claim left dirty counts once, as held.
func TestSummarizeCountsDirtySlotsApart(t *testing.T) {
	nodes, batches := testFleet()
	nodes[0].Status.DirtySlots = []sealv1.DirtySlot{
		{Slot: 0, OffsetBytes: 0, LengthBytes: 2 * gib, Batch: "default/pc1", BatchUID: string(batches[0].UID)},
		{Slot: 1, OffsetBytes: 2 * gib, LengthBytes: 2 * gib, Batch: "default/gone", BatchUID: "gone-uid"},
	}
	s := Summarize(nodes, batches, now)
	if want := (SlotCounts{Total: 6, Held: 2, Dirty: 1, Free: 3, HeldOnUnknownNodes: 1}); s.Slots != want {
		t.Errorf("slots %+v, want %+v", s.Slots, want)
	}
	var out strings.Builder
	if err := writeStatus(&out, s, false); err != nil {
		t.Fatal(err)
	}
	if want := "6 total, 2 held, 1 waiting for their scrub, 3 free"; !strings.Contains(out.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, out.String())
	}
}

func TestStatusJSONShape(t *testing.T) {
	nodes, batches := testFleet()
	c := fakeClient(append(objects(nodes), objects(batches)...)...)
	out, errOut, code := run(t, c, "", "status", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var generic map[string]any
	if err := json.Unmarshal([]byte(out), &generic); err != nil {
		t.Fatal(err)
	}
	if caches, ok := generic["parentCaches"].([]any); !ok || len(caches) != 2 {
		t.Errorf("parentCaches is %T %v, want a list of 2", generic["parentCaches"], generic["parentCaches"])
	}
	var s FleetStatus
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Slots.Held != 2 || s.Nodes.Total != 3 || s.Batches.ByPhase["Pending"] != 2 {
		t.Errorf("status -o json read back as %+v", s)
	}
	for _, key := range []string{`"nodes"`, `"unavailable"`, `"slots"`, `"held"`, `"hugepages1Gi"`, `"parentCaches"`, `"batches"`, `"byPhase"`, `"sectorsSealedLastHour"`} {
		if !strings.Contains(out, key) {
			t.Errorf("status -o json lacks %s:\n%s", key, out)
		}
	}
}

func TestStatusTable(t *testing.T) {
	nodes, batches := testFleet()
	c := fakeClient(append(objects(nodes), objects(batches)...)...)
	out, errOut, code := run(t, c, "", "status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"3 SealerNodes, 2 Ready, 1 cordoned",
		"6 total, 2 held, 4 free (and 1 held on nodes without a SealerNode)",
		"1Gi: 128 total, 84 free",
		"7: 2 Pending, 1 PC1, 1 PC2, 1 Updating, 2 Completed",
		"2 sectors in the last hour",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	rows := splitRows(out)
	var n2 []string
	for _, r := range rows {
		if len(r) > 0 && r[0] == "n2" {
			n2 = r
		}
	}
	if want := []string{"n2", "False", "false", "DevicesNotReady", "1", "of", "1", "layer", "devices", "not", "ready"}; !reflect.DeepEqual(n2, want) {
		t.Errorf("n2's row %q, want %q", n2, want)
	}
}

func TestStatusCapsUnavailableRows(t *testing.T) {
	var nodes []sealv1.SealerNode
	for i := 0; i < 25; i++ {
		nodes = append(nodes, sealerNode(fmt.Sprintf("down-%02d", i), notReady("NoSHANI", "no sha_ni")))
	}
	var b strings.Builder
	if err := writeStatus(&b, Summarize(nodes, nil, now), true); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if n := strings.Count(out, "NoSHANI"); n != unavailableRows {
		t.Errorf("%d unavailable rows, want %d:\n%s", n, unavailableRows, out)
	}
	if !strings.Contains(out, "... and 5 more not Ready or cordoned (-o json lists them all)") {
		t.Errorf("no note of the 5 rows left out:\n%s", out)
	}
	if strings.Contains(out, "CORDONED") {
		t.Errorf("--no-headers printed a header:\n%s", out)
	}
}
