package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealfleet/sealfleet/internal/testutil"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/testenv"
	"github.com/sealfleet/sealfleet/internal/topology"
)

// copyFixture makes a writable copy of a fixture machine (nodeprep may write to it), with
// its NVMe namespaces as blank devices.
func copyFixture(t *testing.T, name string) string {
	root := testutil.CopyTree(t, filepath.Join("..", "topology", "testdata", name))
	topo, err := topology.Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	testutil.BlankDevices(t, root, topo.NamespaceNames()...)
	// The parent-cache directory as the chart mounts it (the agent must see it).
	if err := os.MkdirAll(filepath.Join(root, sealv1.DefaultParentCachePath), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestAgentPublishesStatus runs the agent against a real API server: it creates the
// SealerNode owned by the Node, publishes inventory, capabilities and conditions by
// server-side apply, writes only on change, and derives its free slots from the batches placed
// on it (their status is the only record of a held slot).
func TestAgentPublishesStatus(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := env.Client

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "sealer-1"}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	// The admin opts in with intent: two layer devices (one clean, one mounted) and hugepages.
	sn := &sealv1.SealerNode{ObjectMeta: metav1.ObjectMeta{Name: "sealer-1"}, Spec: sealv1.SealerNodeSpec{
		LayerDevices:            []sealv1.LayerDevice{{PCIAddress: "0000:03:00.0"}, {PCIAddress: "0000:01:00.0"}},
		Hugepages1GiPerNUMANode: 36,
		ReservedCPUs:            "0,32",
	}}
	if err := c.Create(ctx, sn); err != nil {
		t.Fatal(err)
	}

	clock := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	a := &Agent{Client: c, NodeName: "sealer-1", Root: copyFixture(t, "tr-pro-5975wx"), Metrics: NewMetrics("sealer-1"), Now: func() time.Time { return clock }}
	wrote, err := a.SyncOnce(ctx)
	if err != nil || !wrote {
		t.Fatalf("first sync: wrote=%v err=%v", wrote, err)
	}
	var got sealv1.SealerNode
	if err := c.Get(ctx, client.ObjectKey{Name: "sealer-1"}, &got); err != nil {
		t.Fatal(err)
	}
	st := got.Status
	if st.CPU == nil || st.CPU.PhysicalCores != 32 || len(st.CPU.L3Groups) != 4 || !st.CPU.SHANI {
		t.Fatalf("cpu: %+v", st.CPU)
	}
	if len(st.NUMANodes) != 1 || len(st.NVMe) != 6 || len(st.GPUs) != 1 || st.Hugepages1GiFree != 36 {
		t.Errorf("inventory: numa %d nvme %d gpus %d hugepages %d", len(st.NUMANodes), len(st.NVMe), len(st.GPUs), st.Hugepages1GiFree)
	}
	if st.Capabilities == nil || st.Capabilities.HashersPerCore != 2 || len(st.Capabilities.BatchSizes) != 7 || len(st.Capabilities.Unsupported) != 1 {
		t.Errorf("capabilities: %+v", st.Capabilities)
	}
	if st.FreeCores != 31 {
		t.Errorf("free cores %d, want 31 (one core reserved)", st.FreeCores)
	}
	if st.Slots == nil || st.Slots.Count != 1 || st.FreeSlots != 1 {
		t.Errorf("slots: %+v free %d, want 1 of 1 (one ready device, one pipeline)", st.Slots, st.FreeSlots)
	}
	if len(st.LayerDevices) != 2 || !st.LayerDevices[0].Ready || st.LayerDevices[1].Ready {
		t.Errorf("layer devices: %+v", st.LayerDevices)
	}
	for typ, want := range map[string]metav1.ConditionStatus{sealv1.CondReady: "False", sealv1.CondDevicesNotReady: "True", sealv1.CondHugepagesShort: "False", sealv1.CondDegraded: "False"} {
		cond := meta.FindStatusCondition(st.Conditions, typ)
		if cond == nil || cond.Status != want {
			t.Errorf("condition %s: %+v", typ, cond)
		}
	}
	if r := meta.FindStatusCondition(st.Conditions, sealv1.CondReady); r != nil && r.Reason != sealv1.NodeReasonDevicesNotReady {
		t.Errorf("Ready reason %s", r.Reason)
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].Kind != "Node" || got.OwnerReferences[0].UID == "" {
		t.Errorf("owner references: %+v", got.OwnerReferences)
	}
	if got.Spec.ReservedCPUs != "0,32" || len(got.Spec.LayerDevices) != 2 {
		t.Errorf("spec changed: %+v", got.Spec)
	}
	managers := map[string]bool{}
	for _, mf := range got.ManagedFields {
		managers[mf.Manager+"/"+mf.Subresource] = true
	}
	if !managers[FieldManager+"/status"] {
		t.Errorf("no status fields managed by %s: %v", FieldManager, managers)
	}

	// Nothing changed: no write.
	rv := got.ResourceVersion
	clock = clock.Add(time.Minute)
	if wrote, err := a.SyncOnce(ctx); err != nil || wrote {
		t.Fatalf("unchanged sync: wrote=%v err=%v", wrote, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "sealer-1"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != rv {
		t.Errorf("object rewritten without change")
	}
	// A batch placed here (the operator's one write, to the batch) takes the slot.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agent-ns"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	b := &sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Namespace: "agent-ns", Name: "b1"}, Spec: sealv1.SealBatchSpec{
		SectorSize: "2KiB", MinerID: "f01000", Sectors: []sealv1.SectorSpec{{Number: 1, Ticket: strings.Repeat("ab", 32)}}}}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	slot := int32(0)
	b.Status.Node, b.Status.Slot, b.Status.Phase = "sealer-1", &slot, sealv1.PhasePlaced
	if err := c.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	got.Spec.LayerDevices = got.Spec.LayerDevices[:1] // admin drops the refused device
	if err := c.Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Minute)
	if wrote, err := a.SyncOnce(ctx); err != nil || !wrote {
		t.Fatalf("sync after spec change: wrote=%v err=%v", wrote, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "sealer-1"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Slots == nil || got.Status.Slots.Count != 1 || got.Status.FreeSlots != 0 {
		t.Errorf("slots after a batch was placed: %+v free %d, want 0 of 1", got.Status.Slots, got.Status.FreeSlots)
	}
	if r := meta.FindStatusCondition(got.Status.Conditions, sealv1.CondReady); r == nil || r.Status != metav1.ConditionTrue || r.ObservedGeneration != got.Generation {
		t.Errorf("Ready after fix: %+v", r)
	}
	if got.Status.ObservedGeneration != got.Generation {
		t.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
	}

	// The batch releases its slot: the operator records it dirty (its one status field, by a
	// patch as the release controller writes it). The agent's next apply keeps the record and
	// counts the slot as not free until the operator removes it.
	dirty := got.DeepCopy()
	dirty.Status.DirtySlots = []sealv1.DirtySlot{{Slot: 0, OffsetBytes: 0, LengthBytes: 1 << 30, Batch: "agent-ns/b1", BatchUID: string(b.UID), Since: metav1.Now()}}
	if err := c.Status().Patch(ctx, dirty, client.MergeFrom(&got)); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Hour) // past the heartbeat: the agent writes
	if wrote, err := a.SyncOnce(ctx); err != nil || !wrote {
		t.Fatalf("sync after the release: wrote=%v err=%v", wrote, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "sealer-1"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.DirtySlots) != 1 || got.Status.DirtySlots[0].Batch != "agent-ns/b1" || got.Status.FreeSlots != 0 {
		t.Errorf("after the agent's apply: dirty slots %+v, free slots %d (want the record kept, 0 free)", got.Status.DirtySlots, got.Status.FreeSlots)
	}

	// The admin takes every layer device away: the node has no slot any more (it stays Ready:
	// updates need no slot). The agent's write must still be accepted: a status the API server
	// refuses would leave the old one, offering the removed device's slot, in place.
	got.Spec.LayerDevices = nil
	if err := c.Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Minute)
	if wrote, err := a.SyncOnce(ctx); err != nil || !wrote {
		t.Fatalf("sync after every layer device was removed: wrote=%v err=%v", wrote, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "sealer-1"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.LayerDevices) != 0 || (got.Status.Slots != nil && got.Status.Slots.Count != 0) || got.Status.FreeSlots != 0 {
		t.Errorf("without layer devices: devices %+v, slots %+v, free %d", got.Status.LayerDevices, got.Status.Slots, got.Status.FreeSlots)
	}
	if r := meta.FindStatusCondition(got.Status.Conditions, sealv1.CondDevicesNotReady); r == nil || r.Reason != sealv1.NodeReasonNoDevices {
		t.Errorf("DevicesNotReady without layer devices: %+v", r)
	}
}
