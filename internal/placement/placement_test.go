package placement

import (
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/gpubudget"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/testutil"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type nodeOpt func(*Node)

func node(name string, slots int32, hugepages int64, opts ...nodeOpt) *Node {
	sn := &sealv1.SealerNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sealv1.SealerNodeSpec{Pipelines: 1}}
	sn.Status = sealv1.SealerNodeStatus{
		CPU:           testutil.CPU(8, 8, true), // a 64-core Zen3: 8 CCX × 8 cores, SMT on
		Capabilities:  &sealv1.Capabilities{BatchSizes: []int32{1, 2, 4, 8, 16, 32, 64, 128}},
		NUMANodes:     []sealv1.NUMANode{{ID: 0, Hugepages: []sealv1.Hugepages{{PageSize: "1Gi", Total: hugepages, Free: hugepages}}}},
		Conditions:    []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}},
		LayerDevices:  []sealv1.LayerDeviceStatus{{Path: "/dev/nvme1n1", Ready: true}},
		OutputVolumes: []sealv1.OutputVolume{{Path: sealv1.DefaultOutputHostPath, CapacityBytes: 1 << 50, AvailableBytes: 1 << 50}},
		ParentCaches:  testutil.VerifiedCaches(),
	}
	n := &Node{Sealer: sn, Labels: map[string]string{"kubernetes.io/hostname": name},
		Geometry: ledger.Geometry{SlotBytes: 11 << 40, PerDevice: 11 << 40, Count: slots, Devices: 1}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func pipelines(p int32) nodeOpt { return func(n *Node) { n.Sealer.Spec.Pipelines = p } }
func withLabels(kv ...string) nodeOpt {
	return func(n *Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}
func taint(key string) nodeOpt {
	return func(n *Node) {
		n.Taints = append(n.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	}
}
func outputFree(capacity, avail int64) nodeOpt {
	return func(n *Node) {
		n.Sealer.Status.OutputVolumes = []sealv1.OutputVolume{{Path: sealv1.DefaultOutputHostPath, CapacityBytes: capacity, AvailableBytes: avail}}
	}
}
func noSHA(n *Node)    { n.Sealer.Status.CPU.SHANI = false }
func cordoned(n *Node) { n.Sealer.Spec.Cordon = true }

// gpu: the node has a GPU, and its device plugin advertises it.
func gpu(n *Node) { n.Sealer.Status.GPUs, n.GPUs = []sealv1.GPU{{PCIAddress: "0000:81:00.0"}}, 1 }

// gpuBuild: the node's sealer image reported the GPU engine (sealer capabilities).
func gpuBuild(n *Node) {
	n.Sealer.Status.Capabilities.PC2Engines = []sealv1.PC2Engine{sealv1.PC2EngineCPU, sealv1.PC2EngineGPU}
}
func notReady(n *Node) { n.Sealer.Status.Conditions[0].Status = metav1.ConditionFalse }
func batchSizes(s ...int32) nodeOpt {
	return func(n *Node) { n.Sealer.Status.Capabilities.BatchSizes = s }
}

// hold records that batch b runs on n in slot, holding hugepages (as its status would say).
func hold(n *Node, b *sealv1.SealBatch, slot, hugepages int32) {
	n.usage().Add(ledger.Claim{UID: b.UID, Batch: ledger.BatchKey(b), Node: n.Sealer.Name, Slot: slot,
		Range: n.Geometry.Range(slot), Running: true, PC1: true, Hugepages: hugepages})
}

func batch(name string, size sealv1.SectorSize, sectors int, age time.Duration, mutate ...func(*sealv1.SealBatch)) *sealv1.SealBatch {
	return testutil.Batch("ns", name, size, sectors, append([]func(*sealv1.SealBatch){func(b *sealv1.SealBatch) {
		b.CreationTimestamp = metav1.NewTime(epoch.Add(age))
		b.Spec.PC2Engine = sealv1.PC2EngineCPU
	}}, mutate...)...)
}

func TestScheduleFiltersExplainEachNodeClass(t *testing.T) {
	nodes := []*Node{
		node("a", 1, 100, noSHA),
		node("b", 1, 100, cordoned),
		node("c", 1, 100, notReady),
		node("d", 1, 12),
		node("e", 1, 12),
		node("f", 1, 100, batchSizes(8, 16)),
		node("g", 1, 100, taint("dedicated")),
	}
	// Hugepages: d and e have 12 of 36 because batches already hold 24 there.
	for _, n := range nodes[3:5] {
		n.Geometry.Count = 2
		n.Sealer.Spec.Pipelines = 2
		hold(n, batch("holder", sealv1.SectorSize32GiB, 4, 0), 0, 0)
	}
	b := batch("big", sealv1.SectorSize32GiB, 32, time.Minute)
	dec, failed := Schedule(nodes, []*sealv1.SealBatch{b})
	if len(dec) != 0 {
		t.Fatalf("placed on %v", dec)
	}
	msg := failed[b].Error()
	for _, want := range []string{"0/7 nodes fit", "2 nodes: hugepages-1Gi 12 total < 36 needed", "1 node: no SHA-NI", "1 node: cordoned",
		"1 node: not Ready", "1 node: batch size 32 unsupported", "1 node: untolerated taint dedicated"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
}

func TestScheduleBestFitFillsANodeFirst(t *testing.T) {
	// b has one free slot left of two, a has three free: best fit fills b first.
	a := node("a", 3, 200, pipelines(2))
	bn := node("b", 2, 200, pipelines(2))
	hold(bn, batch("x", sealv1.SectorSize32GiB, 8, 0), 0, 36)
	nb := batch("new", sealv1.SectorSize32GiB, 8, time.Minute)
	dec, failed := Schedule([]*Node{a, bn}, []*sealv1.SealBatch{nb})
	if len(failed) > 0 || len(dec) != 1 || dec[0].Node != "b" || dec[0].Slot != 1 || dec[0].Hugepages != 36 {
		t.Fatalf("want b/1, got %+v %v", dec, failed)
	}
}

func TestScheduleRespectsSelectorPinTolerationsAndGPU(t *testing.T) {
	nodes := []*Node{node("a", 1, 100, withLabels("pool", "x")), node("b", 1, 100, withLabels("pool", "y"), taint("t"), gpu, gpuBuild), node("c", 1, 100, gpu, gpuBuild)}
	sel := batch("sel", sealv1.SectorSize8MiB, 4, 0, func(b *sealv1.SealBatch) {
		b.Spec.Placement = &sealv1.Placement{NodeSelector: map[string]string{"pool": "y"}, Tolerations: []corev1.Toleration{{Key: "t", Operator: corev1.TolerationOpExists}}}
	})
	pin := batch("pin", sealv1.SectorSize8MiB, 4, time.Second, func(b *sealv1.SealBatch) { b.Spec.Placement = &sealv1.Placement{NodeName: "a"} })
	g := batch("gpu", sealv1.SectorSize8MiB, 4, 2*time.Second, func(b *sealv1.SealBatch) { b.Spec.PC2Engine = sealv1.PC2EngineGPU })
	dec, failed := Schedule(nodes, []*sealv1.SealBatch{g, pin, sel})
	got := map[string]string{}
	for _, d := range dec {
		got[d.Batch.Name] = d.Node
	}
	if got["sel"] != "b" || got["pin"] != "a" || got["gpu"] != "c" || len(failed) != 0 {
		t.Fatalf("placements %v, failed %v", got, failed)
	}
}

// pc2Engine gpu runs only where the node's sealer image reported the GPU engine and the node
// has a GPU: a GPU node whose image cannot open it must not take it (it would book a GPU and
// fail with exit 8). The reason quotes what the image said, or that it said nothing.
func TestGPUEngineNeedsAGPUBuildAndAGPU(t *testing.T) {
	g := batch("gpu", sealv1.SectorSize8MiB, 4, 0, func(b *sealv1.SealBatch) { b.Spec.PC2Engine = sealv1.PC2EngineGPU })
	cpuOnly := func(n *Node) {
		n.Sealer.Status.Capabilities.PC2Engines = []sealv1.PC2Engine{sealv1.PC2EngineCPU}
		n.Sealer.Status.Capabilities.GPUEngine = "unavailable: no usable OpenCL device: cannot load libOpenCL.so.1"
	}
	dec, failed := Schedule([]*Node{node("a", 1, 100, gpu, cpuOnly), node("b", 1, 100, gpu), node("c", 1, 100, gpuBuild)}, []*sealv1.SealBatch{g})
	if len(dec) != 0 || failed[g] == nil {
		t.Fatalf("placed without a GPU build and GPU: %+v", dec)
	}
	got := failed[g].Error()
	for _, want := range []string{
		"0/3 nodes fit",
		"1 node: the node's sealer image runs no gpu PC2 here (only cpu); GPU engine unavailable: no usable OpenCL device: cannot load libOpenCL.so.1: set spec.pc2Engine to one it runs",
		"1 node: the node's sealer image runs no gpu PC2 here (only cpu); its node agent has not reported the image's capabilities",
		"1 node: no nvidia.com/gpu allocatable for pc2Engine gpu (no GPU, or its device plugin is not running)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("reason %q\nlacks %q", got, want)
		}
	}
	// The default engine runs on every build.
	cpu := batch("cpu", sealv1.SectorSize8MiB, 4, 0)
	if dec, _ := Schedule([]*Node{node("a", 1, 100, gpu)}, []*sealv1.SealBatch{cpu}); len(dec) != 1 || dec[0].Claim().GPUs != 0 {
		t.Errorf("cpu batch: %+v", dec)
	}
	dec, _ = Schedule([]*Node{node("a", 1, 100, gpu, gpuBuild)}, []*sealv1.SealBatch{g})
	if len(dec) != 1 || dec[0].Claim().GPUs != 1 {
		t.Errorf("gpu batch on a GPU build with a GPU: %+v", dec)
	}
	// What the kubelet can grant counts, not the agent's PCI inventory: a GPU whose device
	// plugin is down is no GPU (the pod would be refused), an advertised device the agent does
	// not list as a PCI GPU (the local cluster's OpenCL stand-in) is one.
	noPlugin := func(n *Node) { n.GPUs = 0 }
	standIn := func(n *Node) { n.Sealer.Status.GPUs = nil }
	if dec, failed := Schedule([]*Node{node("a", 1, 100, gpu, gpuBuild, noPlugin)}, []*sealv1.SealBatch{g}); len(dec) != 0 ||
		!strings.Contains(failed[g].Error(), "no nvidia.com/gpu allocatable") {
		t.Errorf("GPU without its device plugin: %+v %v", dec, failed[g])
	}
	if dec, _ := Schedule([]*Node{node("a", 1, 100, gpu, gpuBuild, standIn)}, []*sealv1.SealBatch{g}); len(dec) != 1 {
		t.Errorf("advertised device without a PCI GPU: %+v", dec)
	}
	// One GPU, two gpu batches on a node with two slots: the second waits for the GPU.
	g2 := batch("gpu2", sealv1.SectorSize8MiB, 4, time.Second, func(b *sealv1.SealBatch) { b.Spec.PC2Engine = sealv1.PC2EngineGPU })
	twoPipelines := func(n *Node) { n.Sealer.Spec.Pipelines = 2 }
	dec, failed = Schedule([]*Node{node("a", 2, 100, gpu, gpuBuild, twoPipelines)}, []*sealv1.SealBatch{g, g2})
	if len(dec) != 1 || failed[g2] == nil || !strings.Contains(failed[g2].Error(), "GPUs busy (1/1 nvidia.com/gpu held, the batch needs 1)") {
		t.Errorf("second gpu batch on one GPU: %+v %v", dec, failed[g2])
	}

	// spec.gpus: a batch asking for more GPUs than a node has fits nowhere, with the count; on a
	// node of four, a batch of two and one of one run side by side, a third of two waits.
	gpus := func(k int32) func(*sealv1.SealBatch) {
		return func(b *sealv1.SealBatch) {
			v := intstr.FromInt32(k)
			b.Spec.PC2Engine, b.Spec.GPUs = sealv1.PC2EngineGPU, &v
		}
	}
	four := func(n *Node) { n.GPUs = 4 }
	big := batch("big", sealv1.SectorSize8MiB, 4, 0, gpus(8))
	if dec, failed := Schedule([]*Node{node("a", 2, 100, gpu, gpuBuild, four)}, []*sealv1.SealBatch{big}); len(dec) != 0 ||
		!strings.Contains(failed[big].Error(), "spec.gpus 8: the node has 4 nvidia.com/gpu allocatable") {
		t.Errorf("eight GPUs on a node of four: %+v %v", dec, failed[big])
	}
	two, one, again := batch("two", sealv1.SectorSize8MiB, 4, 0, gpus(2)), batch("one", sealv1.SectorSize8MiB, 4, time.Second, gpus(1)),
		batch("again", sealv1.SectorSize8MiB, 4, 2*time.Second, gpus(2))
	threePipelines := func(n *Node) { n.Sealer.Spec.Pipelines = 3 }
	dec, failed = Schedule([]*Node{node("a", 3, 100, gpu, gpuBuild, four, threePipelines)}, []*sealv1.SealBatch{two, one, again})
	if len(dec) != 2 || failed[again] == nil || !strings.Contains(failed[again].Error(), "GPUs busy (3/4 nvidia.com/gpu held, the batch needs 2)") {
		t.Errorf("2 + 1 + 2 GPUs on a node of four: %+v %v", dec, failed[again])
	}
	for _, d := range dec {
		if want := d.Batch.Spec.GPUs.IntVal; d.Claim().GPUs != want || d.GPUs != want {
			t.Errorf("%s books %d GPUs, want %d", d.Batch.Name, d.Claim().GPUs, want)
		}
	}

	// spec.gpus All: every GPU of the node, as the largest power of two the sealer splits a
	// range among; it waits while any of them is held, and a node without GPUs is no node for it.
	all := func(b *sealv1.SealBatch) {
		v := intstr.FromString(sealv1.GPUsAll)
		b.Spec.PC2Engine, b.Spec.GPUs = sealv1.PC2EngineGPU, &v
	}
	three := func(n *Node) { n.GPUs = 3 }
	for name, c := range map[string]struct {
		n    *Node
		want int32
	}{"four": {node("a", 1, 100, gpu, gpuBuild, four), 4}, "three": {node("a", 1, 100, gpu, gpuBuild, three), 2}, "one": {node("a", 1, 100, gpu, gpuBuild), 1}} {
		b := batch("all", sealv1.SectorSize8MiB, 4, 0, all)
		dec, failed := Schedule([]*Node{c.n}, []*sealv1.SealBatch{b})
		if len(dec) != 1 || dec[0].GPUs != c.want || dec[0].Claim().GPUs != c.want {
			t.Errorf("All on %s GPUs: %+v %v, want %d booked", name, dec, failed[b], c.want)
		}
	}
	first, everything := batch("first", sealv1.SectorSize8MiB, 4, 0, gpus(1)), batch("everything", sealv1.SectorSize8MiB, 4, time.Second, all)
	dec, failed = Schedule([]*Node{node("a", 2, 100, gpu, gpuBuild, four, twoPipelines)}, []*sealv1.SealBatch{first, everything})
	if len(dec) != 1 || failed[everything] == nil || !strings.Contains(failed[everything].Error(), "GPUs busy (1/4 nvidia.com/gpu held, the batch needs 4)") {
		t.Errorf("All beside a batch holding one GPU: %+v %v", dec, failed[everything])
	}
	noGPU := batch("nogpu", sealv1.SectorSize8MiB, 4, 0, all)
	if dec, failed := Schedule([]*Node{node("a", 1, 100, gpu, gpuBuild, noPlugin)}, []*sealv1.SealBatch{noGPU}); len(dec) != 0 ||
		!strings.Contains(failed[noGPU].Error(), "no nvidia.com/gpu allocatable for pc2Engine gpu") {
		t.Errorf("All on a node without GPUs: %+v %v", dec, failed[noGPU])
	}
}

// A GPU that cannot hold one page of the batch's rows (the least range the sealer hashes) is
// refused with the sizes, where the image reported the GPU's memory; a GPU that holds a page
// takes the batch (the sealer sizes its ranges to the rest), and one whose memory is not
// reported is not second-guessed.
func TestGPUMemoryMustHoldAPageOfTheBatchsRows(t *testing.T) {
	g := batch("gpu", sealv1.SectorSize8MiB, 128, 0, func(b *sealv1.SealBatch) { b.Spec.PC2Engine = sealv1.PC2EngineGPU })
	need := gpubudget.ForBatch(sealv1.SectorSize8MiB, 128, 1, gpubudget.Device{MemoryBytes: 1, MaxAllocBytes: 1}).DeviceBytes
	memory := func(bytes int64) func(*Node) {
		return func(n *Node) {
			n.Sealer.Status.Capabilities.GPUMemoryBytes, n.Sealer.Status.Capabilities.GPUMaxAllocBytes = bytes, bytes
		}
	}
	dec, failed := Schedule([]*Node{node("a", 1, 100, gpu, gpuBuild, memory(int64(need)-1))}, []*sealv1.SealBatch{g})
	want := fmt.Sprintf("spec.sectors: PC2 of 128 8MiB sectors on the GPU needs %s of GPU memory per GPU even at its smallest range, and the node's GPU has %s",
		Human(int64(need)), Human(int64(need)-1))
	if len(dec) != 0 || failed[g] == nil || !strings.Contains(failed[g].Error(), want) {
		t.Errorf("GPU one byte short: %+v %v\nwant %s", dec, failed[g], want)
	}
	for name, n := range map[string]*Node{
		"a page fits":  node("a", 1, 100, gpu, gpuBuild, memory(int64(need))),
		"not reported": node("a", 1, 100, gpu, gpuBuild, memory(0)),
	} {
		if dec, failed := Schedule([]*Node{n}, []*sealv1.SealBatch{g}); len(dec) != 1 {
			t.Errorf("%s: %v", name, failed[g])
		}
	}
	// A CPU batch does not look at the GPU.
	cpu := batch("cpu", sealv1.SectorSize8MiB, 128, 0)
	if dec, failed := Schedule([]*Node{node("a", 1, 100, gpu, gpuBuild, memory(1))}, []*sealv1.SealBatch{cpu}); len(dec) != 1 {
		t.Errorf("cpu batch: %v", failed[cpu])
	}
}

// TestOutputVolumeIsBooked: a batch books its outputs on the node's volume for its host path;
// a full volume is a reason to wait, a volume too small for the batch or a host path the node
// does not report is not; claim outputs are not the node's to book.
func TestOutputVolumeIsBooked(t *testing.T) {
	per := OutputBytesPerSector(sealv1.SectorSize8MiB)
	mk := func(name string, mutate ...func(*sealv1.SealBatch)) *sealv1.SealBatch {
		return batch(name, sealv1.SectorSize8MiB, 4, 0, mutate...)
	}
	// Room for one 4-sector batch, not two.
	n := node("a", 2, 100, pipelines(2), outputFree(1<<40, 6*per))
	first, second := mk("first"), batch("second", sealv1.SectorSize8MiB, 4, time.Second)
	dec, failed := Schedule([]*Node{n}, []*sealv1.SealBatch{first, second})
	if len(dec) != 1 || dec[0].Batch != first || dec[0].OutputBytes != 4*per || dec[0].Claim().OutputPath != sealv1.DefaultOutputHostPath {
		t.Fatalf("decisions %+v", dec)
	}
	want := fmt.Sprintf("0/1 nodes fit: 1 node: output volume %s: %s free after running batches, %s needed",
		sealv1.DefaultOutputHostPath, Human(2*per), Human(4*per))
	if failed[second] == nil || failed[second].Error() != want {
		t.Errorf("second batch: got %v\nwant %s", failed[second], want)
	}
	for name, c := range map[string]struct {
		n      *Node
		b      *sealv1.SealBatch
		reason string
	}{
		"too small": {node("a", 1, 100, outputFree(per, per)), mk("b"), "output volume /var/lib/sealfleet/output too small"},
		"unknown path": {node("a", 1, 100), mk("b", func(b *sealv1.SealBatch) {
			b.Spec.Output = &sealv1.OutputSpec{HostPath: &sealv1.HostPathOutput{Path: "/srv/sealed/"}}
		}), "output path /srv/sealed is not in its spec.outputPaths"},
	} {
		if dec, failed := Schedule([]*Node{c.n}, []*sealv1.SealBatch{c.b}); len(dec) != 0 || !strings.Contains(failed[c.b].Error(), c.reason) {
			t.Errorf("%s: %+v %v", name, dec, failed[c.b])
		}
	}
	claim := mk("pvc", func(b *sealv1.SealBatch) {
		b.Spec.Output = &sealv1.OutputSpec{PersistentVolumeClaim: &sealv1.PVCOutput{ClaimName: "out"}}
	})
	if dec, _ := Schedule([]*Node{node("a", 1, 100, outputFree(per, 0))}, []*sealv1.SealBatch{claim}); len(dec) != 1 || dec[0].OutputBytes != 0 {
		t.Errorf("a claim output is not booked on the node: %+v", dec)
	}
}

// TestParentCacheIsWaitedFor: a batch waits for its graph's verified parent cache on the node
// (a reason that says building and how far, or why the cache is unusable) and marks it wanted,
// so the caller builds it; nodes that fail for other reasons want nothing.
func TestParentCacheIsWaitedFor(t *testing.T) {
	caches := func(c ...sealv1.ParentCacheStatus) nodeOpt {
		return func(n *Node) { n.Sealer.Status.ParentCaches = c }
	}
	const proof = "StackedDrg8MiBV1_1"
	b := batch("b", sealv1.SectorSize8MiB, 4, 0)
	for name, c := range map[string]struct {
		opt    nodeOpt
		reason string
	}{
		"missing":  {caches(), "parent cache for StackedDrg8MiBV1_1 not built yet: building"},
		"building": {caches(sealv1.ParentCacheStatus{Proof: proof, Building: true, Percent: 41}), "parent cache for StackedDrg8MiBV1_1 building: 41%"},
		"corrupt":  {caches(sealv1.ParentCacheStatus{Proof: proof, Reason: "cache file has 3 bytes"}), "parent cache for StackedDrg8MiBV1_1 unusable (cache file has 3 bytes): rebuilding"},
		"other graph": {caches(sealv1.ParentCacheStatus{Proof: "StackedDrg8MiBV1", Verified: true}),
			"parent cache for StackedDrg8MiBV1_1 not built yet"},
	} {
		n, noSHANode := node("a", 1, 100, c.opt), node("z", 1, 100, c.opt, noSHA)
		dec, failed := Schedule([]*Node{n, noSHANode}, []*sealv1.SealBatch{b})
		if len(dec) != 0 || failed[b] == nil || !strings.Contains(failed[b].Error(), c.reason) {
			t.Errorf("%s: %+v %v", name, dec, failed[b])
		}
		if !n.WantedCaches[proof] || len(noSHANode.WantedCaches) != 0 {
			t.Errorf("%s: wanted %v on a, %v on the node without SHA-NI", name, n.WantedCaches, noSHANode.WantedCaches)
		}
	}
	n := node("a", 1, 100, caches(sealv1.ParentCacheStatus{Proof: proof, Verified: true}))
	if dec, _ := Schedule([]*Node{n}, []*sealv1.SealBatch{b}); len(dec) != 1 || len(n.WantedCaches) != 0 {
		t.Errorf("verified cache: %+v, wanted %v", dec, n.WantedCaches)
	}
	// The agent cannot see the cache directory: no build is wanted (none would be seen), and
	// the reason points at the node's condition.
	hidden := node("a", 1, 100, caches(), func(n *Node) {
		n.Sealer.Status.Conditions = append(n.Sealer.Status.Conditions, metav1.Condition{Type: "Degraded",
			Status: metav1.ConditionTrue, Reason: sealv1.NodeReasonParentCacheDirNotVisible})
	})
	dec, failed := Schedule([]*Node{hidden}, []*sealv1.SealBatch{b})
	if len(dec) != 0 || failed[b] == nil || !strings.Contains(failed[b].Error(), "parent-cache directory not visible") || len(hidden.WantedCaches) != 0 {
		t.Errorf("hidden cache directory: %+v %v, wanted %v", dec, failed[b], hidden.WantedCaches)
	}
}

func TestScheduleNeverDoubleBooks(t *testing.T) {
	nodes := []*Node{node("a", 2, 1000, pipelines(2)), node("b", 1, 1000)}
	var pending []*sealv1.SealBatch
	for i := 0; i < 10; i++ {
		pending = append(pending, batch(fmt.Sprintf("b%d", i), sealv1.SectorSize8MiB, 2, time.Duration(i)*time.Second))
	}
	dec, failed := Schedule(nodes, pending)
	if len(dec) != 3 || len(failed) != 7 {
		t.Fatalf("want 3 placed, 7 waiting; got %d, %d", len(dec), len(failed))
	}
	seen := map[string]bool{}
	for _, d := range dec {
		k := fmt.Sprintf("%s/%d", d.Node, d.Slot)
		if seen[k] {
			t.Fatalf("slot %s booked twice", k)
		}
		seen[k] = true
	}
	// Oldest first.
	for _, d := range dec {
		if d.Batch.Name > "b2" {
			t.Errorf("a younger batch (%s) was placed before older ones", d.Batch.Name)
		}
	}
}

func TestSchedulePriorityThenAge(t *testing.T) {
	nodes := []*Node{node("a", 1, 100)}
	old := batch("old", sealv1.SectorSize8MiB, 2, 0)
	urgent := batch("urgent", sealv1.SectorSize8MiB, 2, time.Hour, func(b *sealv1.SealBatch) { b.Spec.Priority = 5 })
	dec, _ := Schedule(nodes, []*sealv1.SealBatch{old, urgent})
	if len(dec) != 1 || dec[0].Batch.Name != "urgent" {
		t.Fatalf("want urgent first, got %+v", dec)
	}
}

// TestBigBatchNotStarved: a big batch waiting for hugepages on the only node that can run it
// keeps small batches from taking that node, so it is not starved by a stream of them.
func TestBigBatchNotStarved(t *testing.T) {
	n := node("a", 4, 40, pipelines(4))
	hold(n, batch("running", sealv1.SectorSize32GiB, 8, 0), 0, 36)
	big := batch("big", sealv1.SectorSize32GiB, 32, time.Second)
	small := batch("small", sealv1.SectorSize8MiB, 2, 2*time.Second)
	dec, failed := Schedule([]*Node{n}, []*sealv1.SealBatch{small, big})
	if len(dec) != 0 {
		t.Fatalf("small batch jumped the queue: %+v", dec)
	}
	if !strings.Contains(failed[small].Error(), "held for an older or higher-priority batch") {
		t.Errorf("small batch reason: %s", failed[small].Error())
	}
	// A node the big batch can never use stays open to small ones.
	other := node("tiny", 1, 4)
	dec, _ = Schedule([]*Node{node("a2", 4, 40, pipelines(4), func(x *Node) { x.Usage = &ledger.Usage{Claims: append([]ledger.Claim(nil), n.Usage.Claims...)} }), other},
		[]*sealv1.SealBatch{small, big})
	if len(dec) != 1 || dec[0].Node != "tiny" {
		t.Fatalf("small batch should use the node big cannot run on: %+v", dec)
	}
}

// TestSecondPipelineNeedsFreeCores: with a batch running, a second one is placed only if the
// cores left fit its layout, and it never gets a CPU the first one uses.
func TestSecondPipelineNeedsFreeCores(t *testing.T) {
	n := node("a", 2, 200, pipelines(2))
	first := batch("first", sealv1.SectorSize8MiB, 128, 0)
	second := batch("second", sealv1.SectorSize8MiB, 128, time.Second)
	dec, failed := Schedule([]*Node{n}, []*sealv1.SealBatch{first, second})
	if len(dec) != 1 || dec[0].Batch != first {
		t.Fatalf("want only the first placed: %+v", dec)
	}
	if !strings.Contains(failed[second].Error(), "not enough free cores beside the running batch") {
		t.Errorf("reason: %s", failed[second].Error())
	}
	small := batch("small", sealv1.SectorSize8MiB, 8, 2*time.Second)
	n2 := node("b", 2, 200, pipelines(2))
	dec, _ = Schedule([]*Node{n2}, []*sealv1.SealBatch{batch("f2", sealv1.SectorSize8MiB, 128, 0), small})
	if len(dec) != 2 {
		t.Fatalf("a small second batch should fit beside: %+v", dec)
	}
	used := map[int]bool{}
	for _, c := range dec[0].Layout.CoreCPUs() {
		used[c] = true
	}
	for _, c := range dec[1].Layout.CPUs() {
		if used[c] {
			t.Fatalf("CPU %d given to both pipelines", c)
		}
	}
}

func TestUnschedulableWithNoNodes(t *testing.T) {
	b := batch("b", sealv1.SectorSize8MiB, 1, 0)
	_, failed := Schedule(nil, []*sealv1.SealBatch{b})
	if !strings.Contains(failed[b].Error(), "no SealerNodes") {
		t.Errorf("got %s", failed[b].Error())
	}
}

func TestNeeds(t *testing.T) {
	if got := SlotBytesFor(sealv1.SectorSize32GiB, 32); got != 11*32<<30*32 {
		t.Errorf("32GiB × 32 slot = %d", got)
	}
	if got := SlotBytesFor(sealv1.SectorSize8MiB, 4); got != 2*8<<20*4 {
		t.Errorf("8MiB × 4 slot = %d", got)
	}
	if HugepagesFor(sealv1.SectorSize64GiB, 1) != 36 || HugepagesFor(sealv1.SectorSize2KiB, 128) != 1 {
		t.Error("hugepage sizing")
	}
	// 32 GiB: replica 32 GiB, tree-d 64 GiB - 32 B, tree-c 8 × (8^10-1)/7 × 32 B, tree-r-last
	// 8 × (8^7-1)/7 × 32 B (rows below 2^18 leaves' level 3 discarded), 11 layers, 4 KiB aux.
	const g = int64(1) << 30
	want := 32*g + (64*g - 32) + 8*(1<<30-1)/7*32 + 8*(1<<21-1)/7*32 + 11*32*g + 4096
	if got := OutputBytesPerSector(sealv1.SectorSize32GiB); got != want {
		t.Errorf("32GiB output per sector %d, want %d", got, want)
	}
}

// TestOutputBytesGolden writes the per-sector output bytes of every size for the sealer's
// tests, which compare them with the files PC2 writes (sealer-image/crates/sealer/tests/pc2.rs).
func TestOutputBytesGolden(t *testing.T) {
	sizes := map[string]int64{}
	for _, s := range []sealv1.SectorSize{sealv1.SectorSize2KiB, sealv1.SectorSize8MiB, sealv1.SectorSize512MiB, sealv1.SectorSize32GiB, sealv1.SectorSize64GiB} {
		sizes[fmt.Sprint(s.Bytes())] = OutputBytesPerSector(s)
	}
	got, err := json.MarshalIndent(sizes, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "output-bytes.golden.json"), append(got, '\n'), *update, "./internal/placement")
}

var update = flag.Bool("update", false, "rewrite golden files")

// BenchmarkSchedule1000x5000 measures one scheduling cycle of 5,000 pending batches over
// 1,000 nodes; the reported ns/decision is the cost per batch considered.
func BenchmarkSchedule1000x5000(b *testing.B) {
	sizes := []sealv1.SectorSize{sealv1.SectorSize32GiB, sealv1.SectorSize64GiB, sealv1.SectorSize8MiB}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var nodes []*Node
		for j := 0; j < 1000; j++ {
			n := node(fmt.Sprintf("n%04d", j), 2, 80, pipelines(2), withLabels("pool", fmt.Sprintf("p%d", j%4)))
			if j%10 == 0 {
				gpu(n)
				gpuBuild(n)
			}
			nodes = append(nodes, n)
		}
		var pending []*sealv1.SealBatch
		for j := 0; j < 5000; j++ {
			pending = append(pending, batch(fmt.Sprintf("b%05d", j), sizes[j%3], 1<<(j%7), time.Duration(j)*time.Millisecond,
				func(bb *sealv1.SealBatch) {
					if j%5 == 0 {
						bb.Spec.Placement = &sealv1.Placement{NodeSelector: map[string]string{"pool": fmt.Sprintf("p%d", j%4)}}
					}
				}))
		}
		b.StartTimer()
		Schedule(nodes, pending)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/5000, "ns/decision")
}

// TestUpdateNeedsCoresAndOutputNotASlot: a SnapDeals update runs beside a PC1 batch on a node
// whose only slot and pipeline are held and which has no hugepages or parent cache left for
// it, books its output bytes and its cores, and never a slot.
func TestUpdateNeedsCoresAndOutputNotASlot(t *testing.T) {
	per := UpdateOutputBytesPerSector(sealv1.SectorSize8MiB)
	if full := OutputBytesPerSector(sealv1.SectorSize8MiB); per >= full || per <= int64(sealv1.SectorSize8MiB.Bytes()) {
		t.Fatalf("update bytes %d against a seal's %d", per, full)
	}
	n := node("a", 1, 1, outputFree(1<<40, 5*per), func(n *Node) { n.Sealer.Status.ParentCaches = nil })
	running := batch("running", sealv1.SectorSize8MiB, 8, 0)
	hold(n, running, 0, 1)
	update := func(name string, age time.Duration) *sealv1.SealBatch {
		return batch(name, sealv1.SectorSize8MiB, 4, age, func(b *sealv1.SealBatch) {
			b.Spec.Update = &sealv1.SnapUpdate{SectorKeys: sealv1.SectorKeySource{HostPath: &sealv1.HostPathData{Path: "/var/lib/sealfleet/k"}}}
		})
	}
	first, second := update("first", time.Second), update("second", 2*time.Second)
	dec, failed := Schedule([]*Node{n}, []*sealv1.SealBatch{first, second})
	if len(dec) != 1 || dec[0].Batch != first {
		t.Fatalf("decisions %+v, failed %v", dec, failed)
	}
	d := dec[0]
	if d.Slot != ledger.NoSlot || d.Range != (sealv1.SlotRange{}) || d.Hugepages != 0 || d.OutputBytes != 4*per || len(d.Layout.CoreCPUs()) == 0 {
		t.Errorf("update decision %+v", d)
	}
	if c := d.Claim(); c.PC1 || c.Slot != ledger.NoSlot {
		t.Errorf("update claim %+v", c)
	}
	if n.usage().Slots() != 1 || n.usage().FreeSlot(n.Geometry) != -1 || len(ledger.Book{"a": n.usage()}.Conflicts()) != 0 {
		t.Errorf("slots after the update: %d held, conflicts %v", n.usage().Slots(), ledger.Book{"a": n.usage()}.Conflicts())
	}
	if failed[second] == nil || !strings.Contains(failed[second].Error(), "output volume") {
		t.Errorf("second update: %v", failed[second])
	}
	// A seal still finds no slot next to them.
	if _, failed := Schedule([]*Node{n}, []*sealv1.SealBatch{batch("seal", sealv1.SectorSize8MiB, 1, 3*time.Second)}); len(failed) != 1 {
		t.Errorf("a seal was placed with no slot free")
	}
}

// TestFromSlotBooksNoLayerCopies: with commit1 FromSlot the layers stay in the slot, so the
// output booking drops the layer copies and adds C1's outputs.
func TestFromSlotBooksNoLayerCopies(t *testing.T) {
	for _, size := range []sealv1.SectorSize{sealv1.SectorSize8MiB, sealv1.SectorSize32GiB} {
		b := batch("c1", size, 4, 0, func(b *sealv1.SealBatch) { b.Spec.Commit1 = sealv1.Commit1FromSlot })
		layers := int64(size.Layers()) * int64(size.Bytes())
		if got, want := NeedOf(b).OutputBytes, 4*(OutputBytesPerSector(size)-layers+C1OutputBytes(size)); got != want || got >= NeedOf(batch("lf", size, 4, 0)).OutputBytes {
			t.Errorf("%s: FromSlot books %d, want %d", size, got, want)
		}
	}
}

// TestResidentLayerBooksHugepages: spec.residentLayerPercent books that share of one layer of
// every sector as 1 GiB hugepages on top of the sealer's buffers, and a node without them
// free waits.
func TestResidentLayerBooksHugepages(t *testing.T) {
	b := batch("r", sealv1.SectorSize32GiB, 32, 0, func(b *sealv1.SealBatch) { b.Spec.ResidentLayerPercent = 50 })
	if got := NeedOf(b).Hugepages; got != 36+512 {
		t.Errorf("50%% of 32 × 32 GiB resident: %d pages, want 36 + 512", got)
	}
	small := batch("s", sealv1.SectorSize8MiB, 4, 0, func(b *sealv1.SealBatch) { b.Spec.ResidentLayerPercent = 1 })
	if got := NeedOf(small).Hugepages; got != 2 {
		t.Errorf("a sliver of a small layer still takes a whole page: %d", got)
	}
	_, failed := Schedule([]*Node{node("a", 1, 100)}, []*sealv1.SealBatch{b})
	if failed[b] == nil || !strings.Contains(failed[b].Error(), "hugepages-1Gi 100 total < 548 needed") {
		t.Errorf("reason: %v", failed[b])
	}
}

// A vfio node takes seals only once its sealer image reports a vfio (SPDK) backend: the
// sealer has none, and every batch placed there would fail. An update reads no layer device.
func TestVFIONodeNeedsAnImageThatReadsVFIO(t *testing.T) {
	vfio := func(n *Node) { n.Sealer.Spec.DeviceMode = sealv1.DeviceModeVFIO }
	kernelOnly := func(n *Node) {
		n.Sealer.Status.Capabilities.LayerDeviceModes = []sealv1.DeviceMode{sealv1.DeviceModeKernel}
	}
	spdk := func(n *Node) {
		n.Sealer.Status.Capabilities.LayerDeviceModes = []sealv1.DeviceMode{sealv1.DeviceModeKernel, sealv1.DeviceModeVFIO}
	}
	b := batch("b", sealv1.SectorSize8MiB, 4, 0)
	for _, c := range []struct {
		name   string
		opts   []nodeOpt
		placed bool
	}{
		{"vfio, image reported nothing", []nodeOpt{vfio}, false},
		{"vfio, kernel-only image", []nodeOpt{vfio, kernelOnly}, false},
		{"vfio, SPDK image", []nodeOpt{vfio, spdk}, true},
		{"kernel, kernel-only image", []nodeOpt{kernelOnly}, true},
		{"mode unset, image reported nothing", nil, true},
	} {
		dec, failed := Schedule([]*Node{node("a", 1, 100, c.opts...)}, []*sealv1.SealBatch{b})
		if (len(dec) == 1) != c.placed {
			t.Errorf("%s: placed %v, want %v (%v)", c.name, len(dec) == 1, c.placed, failed[b])
			continue
		}
		if !c.placed && !strings.Contains(failed[b].Error(), "spec.deviceMode vfio: the node's sealer image reads layer devices only in kernel mode (it has no SPDK backend)") {
			t.Errorf("%s: reason %v", c.name, failed[b])
		}
	}
}

// TestHostPathsMustLieUnderTheRoots: a batch reading a data source (or sector keys) outside a
// node's spec.hostPathRoots is not placed there, with a reason naming the field, the path and
// the roots; a node whose admin added that directory takes it.
func TestHostPathsMustLieUnderTheRoots(t *testing.T) {
	closed := node("closed", 1, 4)
	open := node("open", 1, 4, func(n *Node) { n.Sealer.Spec.HostPathRoots = []string{"/var/lib/sealfleet", "/srv/deals"} })
	b := batch("b", sealv1.SectorSize8MiB, 1, 0, func(b *sealv1.SealBatch) {
		b.Spec.DataSource = &sealv1.DataSource{HostPath: &sealv1.HostPathData{Path: "/srv/deals/"}}
	})
	_, failed := Schedule([]*Node{closed}, []*sealv1.SealBatch{b})
	if u := failed[b]; u == nil || !strings.Contains(u.Error(), "spec.dataSource.hostPath.path /srv/deals is outside its spec.hostPathRoots [/var/lib/sealfleet]") {
		t.Errorf("outside the roots: %v", u)
	}
	// A path that only shares a prefix with a root is outside it.
	b.Spec.DataSource.HostPath.Path = "/var/lib/sealfleet-evil"
	if _, failed := Schedule([]*Node{closed}, []*sealv1.SealBatch{b}); failed[b] == nil {
		t.Error("/var/lib/sealfleet-evil taken for a path under /var/lib/sealfleet")
	}
	b.Spec.DataSource.HostPath.Path = "/srv/deals/team-a"
	dec, failed := Schedule([]*Node{closed, open}, []*sealv1.SealBatch{b})
	if len(dec) != 1 || dec[0].Node != "open" {
		t.Errorf("decisions %+v, failed %v", dec, failed)
	}
}

// qualified: the node measured this hashing rate per thread and random-read rate.
func qualified(perThread, iops int64) nodeOpt {
	return func(n *Node) {
		n.Sealer.Status.Qualification = &sealv1.Qualification{
			MeasuredTime: &metav1.Time{Time: epoch}, LabelsPerSecondPerThread: perThread,
			LayerDevices: []sealv1.DeviceQualification{{Path: "/dev/nvme1n1", RandomReadIOPS: iops}},
		}
	}
}

func TestPredictionPrefersTheFasterDevicesAndRefusesStarvedNodes(t *testing.T) {
	big := batch("big", sealv1.SectorSize32GiB, 32, time.Hour)
	for _, tc := range []struct {
		name  string
		nodes []*Node
		want  string
		why   string
	}{{
		// Same CPUs; n2's devices feed twice the reads: it finishes first, though best fit
		// (n1 has fewer free slots) would pick n1.
		name:  "faster devices win over best fit",
		nodes: []*Node{node("n1", 1, 64, qualified(2_000_000, 2_000_000)), node("n2", 2, 64, qualified(2_000_000, 4_000_000))},
		want:  "n2",
	}, {
		// Within 10 % of each other: best fit decides as before.
		name:  "like nodes keep best fit",
		nodes: []*Node{node("n1", 1, 64, qualified(2_000_000, 4_000_000)), node("n2", 2, 64, qualified(2_000_000, 4_100_000))},
		want:  "n1",
	}, {
		// n1's devices feed 1 % of its hashers: below the default 25 %, refused with the figures.
		name:  "starved node refused",
		nodes: []*Node{node("n1", 1, 64, qualified(2_000_000, 85_000))},
		why:   "layer devices 85k reads/s, 32 sectors need",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			decisions, failed := Schedule(tc.nodes, []*sealv1.SealBatch{big.DeepCopy()})
			if tc.why != "" {
				if len(decisions) != 0 || len(failed) != 1 {
					t.Fatalf("decisions %v, failed %v", decisions, failed)
				}
				for _, u := range failed {
					if !strings.Contains(u.Error(), tc.why) {
						t.Fatalf("reason %q lacks %q", u.Error(), tc.why)
					}
				}
				return
			}
			if len(decisions) != 1 || decisions[0].Node != tc.want {
				t.Fatalf("decisions %+v, want %s", decisions, tc.want)
			}
			if p := decisions[0].Prediction; p.PC1 <= 0 || p.Basis == "" {
				t.Fatalf("decision without a prediction: %+v", p)
			}
		})
	}
	// minRatePercent 0 takes the starved node.
	starved := big.DeepCopy()
	zero := int32(0)
	starved.Spec.Placement = &sealv1.Placement{MinRatePercent: &zero}
	if d, _ := Schedule([]*Node{node("n1", 1, 64, qualified(2_000_000, 85_000))}, []*sealv1.SealBatch{starved}); len(d) != 1 || d[0].Prediction.Bottleneck != "layer device reads" {
		t.Fatalf("minRatePercent 0: %+v", d)
	}
}

// TestFitOf: the largest batch a node can take now (free capacity) and once its running batch
// ends (capacity held only by batches), each bounded by what never frees (slot size, cordon).
func TestFitOf(t *testing.T) {
	probe := func(n int) *sealv1.SealBatch { return batch("probe", sealv1.SectorSize32GiB, n, 0) }
	slotFor := func(sectors int64) nodeOpt {
		return func(n *Node) { n.Geometry.SlotBytes, n.Geometry.PerDevice = sectors*11*32<<30, sectors*11*32<<30 }
	}
	small := node("small", 1, 100, slotFor(2)) // free, room for 2 sectors
	busy := node("busy", 1, 100, slotFor(32))  // room for 32, its one pipeline busy
	hold(busy, batch("running", sealv1.SectorSize32GiB, 8, 0), 0, 36)
	fenced := node("fenced", 1, 100, slotFor(128), cordoned)
	for _, c := range []struct {
		name      string
		nodes     []*Node
		max       int
		now, ever int
	}{
		{"no nodes", nil, 128, 0, 0},
		{"a small free node and a big busy one", []*Node{small, busy, fenced}, 128, 2, 32},
		{"bounded by the most a batch may take", []*Node{small, busy}, 16, 2, 16},
		{"only the busy node", []*Node{busy}, 128, 0, 32},
		{"only a cordoned node", []*Node{fenced}, 128, 0, 0},
	} {
		now, ever := FitOf(c.nodes, probe, c.max)
		if now != c.now || ever != c.ever {
			t.Errorf("%s: FitOf = %d now, %d ever; want %d, %d", c.name, now, ever, c.now, c.ever)
		}
	}
	// A missing parent cache is not capacity: the batch asks for it once formed.
	nocache := node("nocache", 1, 100, slotFor(4), func(n *Node) { n.Sealer.Status.ParentCaches = nil })
	if now, _ := FitOf([]*Node{nocache}, probe, 128); now != 4 || nocache.IgnoreCaches {
		t.Errorf("node without parent caches: now %d (want 4), IgnoreCaches left %v", now, nocache.IgnoreCaches)
	}
}
