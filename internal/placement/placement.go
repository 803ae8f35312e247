// Package placement decides where SealBatches run. It is pure: given the fleet (SealerNodes,
// their Nodes, what each node already runs) and the pending batches, it returns decisions and,
// for batches that fit nowhere, a reason per class of node. The reconciler commits decisions.
package placement

import (
	"fmt"
	"math"
	"math/bits"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/cpuset"
	"github.com/sealfleet/sealfleet/internal/gpubudget"
	"github.com/sealfleet/sealfleet/internal/layout"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/predict"
)

// Node is one candidate: its SealerNode inventory plus what the Kubernetes Node and the
// batches placed there say about it.
type Node struct {
	Sealer *sealv1.SealerNode
	// Labels and Taints of the Kubernetes Node (nil Node: the node is gone).
	Labels        map[string]string
	Taints        []corev1.Taint
	Unschedulable bool
	NodeMissing   bool
	// GPUs is the Node's allocatable sealv1.GPUResource: what the kubelet grants sealer pods (through
	// the GPU vendor's device plugin), whatever the agent's inventory lists.
	GPUs int64
	// Geometry is how its layer space divides into slots; Usage what batches hold there
	// (Schedule adds its own decisions to it).
	Geometry ledger.Geometry
	Usage    *ledger.Usage
	// WantedCaches are the parent caches (registered proofs) Schedule found batches waiting
	// for here: the caller has them built.
	WantedCaches map[string]bool
	// IgnoreCaches: sealers build their own parent caches (no node cache directory in use).
	IgnoreCaches bool

	layouts map[int]layoutResult // per batch size, for the current usage
}

type layoutResult struct {
	l   *layout.Layout
	err error
}

func (n *Node) usage() *ledger.Usage {
	if n.Usage == nil {
		n.Usage = &ledger.Usage{}
	}
	return n.Usage
}

// Layout computes (and caches until the usage changes) the core layout a batch of n sectors
// would get on this node now, keeping out the node's reserved CPUs and the busy ones.
func (n *Node) Layout(batchSize int) (*layout.Layout, error) {
	if r, ok := n.layouts[batchSize]; ok {
		return r.l, r.err
	}
	sn := n.Sealer
	var r layoutResult
	if sn.Status.CPU == nil {
		r.err = fmt.Errorf("no CPU topology reported")
	} else if reserved, err := cpuset.Parse(sn.Spec.ReservedCPUs); err != nil {
		r.err = fmt.Errorf("spec.reservedCPUs: %w", err)
	} else {
		r.l, r.err = layout.Calculate(layout.FromStatus(sn.Status.CPU), batchSize, layout.Options{
			HashersPerCore: int(sn.Spec.HashersPerCore), ReservedCPUs: append(reserved, n.usage().BusyCPUs()...), SharedCores: sn.Spec.SharedCores,
		})
	}
	if n.layouts == nil {
		n.layouts = map[int]layoutResult{}
	}
	n.layouts[batchSize] = r
	return r.l, r.err
}

// Decision is where one batch goes.
type Decision struct {
	Batch     *sealv1.SealBatch
	Node      string
	Slot      int32
	Range     sealv1.SlotRange
	Hugepages int32
	// GPUs is how many GPUs it books there (spec.gpus, or the node's count for All).
	GPUs   int32
	Layout *layout.Layout
	// OutputBytes is the output space booked on the node's volume for the batch's host path.
	OutputBytes int64
	// Prediction is the batch's expected run there.
	Prediction predict.Prediction
}

// Claim is what the decision makes the batch hold.
func (d *Decision) Claim() ledger.Claim {
	return ledger.Claim{
		UID: d.Batch.UID, Batch: ledger.BatchKey(d.Batch), Node: d.Node, Slot: d.Slot, Range: d.Range,
		Running: true, PC1: !d.Batch.Spec.IsUpdate(), Hugepages: d.Hugepages, CPUs: d.Layout.CoreCPUs(),
		GPUs:       d.GPUs,
		OutputPath: d.Batch.Spec.OutputHostPath(), OutputBytes: d.OutputBytes,
	}
}

// Unschedulable explains why a batch fits nowhere: how many nodes failed each check.
type Unschedulable struct {
	Nodes   int
	Reasons map[string]int
}

// Error renders e.g. "0/5 nodes fit: 3 nodes: no free slot (1/1 held); 2 nodes: hugepages 12/36 free".
func (u *Unschedulable) Error() string {
	if u.Nodes == 0 {
		return "no SealerNodes: opt a node in (label it sealfleet.io/sealer=true) and wait for its node agent"
	}
	type kv struct {
		r string
		n int
	}
	var list []kv
	for r, n := range u.Reasons {
		list = append(list, kv{r, n})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].n != list[j].n {
			return list[i].n > list[j].n
		}
		return list[i].r < list[j].r
	})
	parts := make([]string, len(list))
	for i, e := range list {
		noun := "nodes"
		if e.n == 1 {
			noun = "node"
		}
		parts[i] = fmt.Sprintf("%d %s: %s", e.n, noun, e.r)
	}
	return fmt.Sprintf("0/%d nodes fit: %s", u.Nodes, strings.Join(parts, "; "))
}

// Need is what a batch asks of a node.
type Need struct {
	BatchSize int
	SlotBytes int64
	Hugepages int32
	PC2Engine sealv1.PC2Engine
	// GPUs is how many GPUs it books (spec.gpus with pc2Engine gpu, else 0); AllGPUs: every GPU
	// of the node it is placed on (spec.gpus All), counted per node by gpusOn.
	GPUs       int64
	AllGPUs    bool
	Selector   labels.Selector
	NodeName   string
	Tolerate   []corev1.Toleration
	SectorSize sealv1.SectorSize
	// OutputPath is the host directory the outputs go to ("" for a claim: not booked) and
	// OutputBytes their size.
	OutputPath  string
	OutputBytes int64
	// Proof is the registered proof: its graph's parent cache must be verified on the node.
	Proof string
	// Update: a SnapDeals update, which needs CPUs and output space but no layer slot, PC1
	// pipeline, hugepages or parent cache.
	Update bool
	// HostPaths are the batch's other host directories (data source, sector keys), by the
	// field that names them: each must lie under one of the node's hostPathRoots.
	HostPaths [][2]string
	// Predict is what predicting its run needs; MinRatePercent the least share of a node's
	// hashing bound its layer devices must feed (spec.placement.minRatePercent).
	Predict        predict.Batch
	MinRatePercent int32
}

// maxGPUs is the most GPUs a batch uses (spec.gpus' bound).
const maxGPUs = 16

// usesGPUs reports whether the batch's PC2 runs on GPUs.
func (need *Need) usesGPUs() bool { return need.GPUs > 0 || need.AllGPUs }

// gpusOn is how many GPUs the batch books on n: its count, or for All the largest power of two
// of the node's allocatable GPUs (at most maxGPUs), since a power of two of them share each
// range and a third of three would idle.
func (need *Need) gpusOn(n *Node) int64 {
	if !need.AllGPUs {
		return need.GPUs
	}
	if n.GPUs <= 0 {
		return 0
	}
	return 1 << (bits.Len64(uint64(min(n.GPUs, maxGPUs))) - 1)
}

// NeedOf derives what a batch needs.
func NeedOf(b *sealv1.SealBatch) Need {
	n := Need{
		BatchSize:  len(b.Spec.Sectors),
		SlotBytes:  SlotBytesFor(b.Spec.SectorSize, len(b.Spec.Sectors)),
		Hugepages:  HugepagesFor(b.Spec.SectorSize, len(b.Spec.Sectors)) + ResidentPages(b),
		PC2Engine:  b.Spec.PC2Engine,
		Selector:   labels.Everything(),
		SectorSize: b.Spec.SectorSize,
		OutputPath: b.Spec.OutputHostPath(),
		Proof:      sealv1.RegisteredProof(b.Spec.SectorSize, b.Spec.ProofTypeOrDefault()),
		Predict:    predict.BatchOf(b),
	}
	gpus, all := b.Spec.GPURequest()
	n.GPUs, n.AllGPUs = int64(gpus), all
	n.MinRatePercent = b.Spec.Placement.MinRate()
	if b.Spec.IsUpdate() {
		n.Update, n.SlotBytes, n.Hugepages, n.Proof = true, 0, 0, ""
		if k := b.Spec.Update.SectorKeys.HostPath; k != nil {
			n.HostPaths = append(n.HostPaths, [2]string{"spec.update.sectorKeys.hostPath.path", path.Clean(k.Path)})
		}
	}
	if d := b.Spec.DataSource; d != nil && d.HostPath != nil {
		n.HostPaths = append(n.HostPaths, [2]string{"spec.dataSource.hostPath.path", path.Clean(d.HostPath.Path)})
	}
	if n.OutputPath != "" {
		n.OutputBytes = OutputBytesFor(b.Spec.SectorSize, len(b.Spec.Sectors))
		switch {
		case n.Update:
			n.OutputBytes = UpdateOutputBytesPerSector(b.Spec.SectorSize) * int64(len(b.Spec.Sectors))
		case b.Spec.FromSlot():
			n.OutputBytes = FromSlotOutputBytesPerSector(b.Spec.SectorSize) * int64(len(b.Spec.Sectors))
		case n.Predict.Synthetic:
			// No layer files (the proofs read the labels from the slot); each sector keeps its
			// synthetic proofs (syn-porep-vanilla-proofs.dat).
			n.OutputBytes = (FromSlotOutputBytesPerSector(b.Spec.SectorSize) + predict.SynthProofsFileBytes(b.Spec.SectorSize)) *
				int64(len(b.Spec.Sectors))
		}
	}
	if p := b.Spec.Placement; p != nil {
		n.NodeName = p.NodeName
		if len(p.NodeSelector) > 0 {
			n.Selector = labels.SelectorFromSet(p.NodeSelector)
		}
		n.Tolerate = p.Tolerations
	}
	return n
}

// SlotBytesFor is the layer space a batch needs: layers × sector size × sectors.
func SlotBytesFor(size sealv1.SectorSize, sectors int) int64 {
	return int64(size.Layers()) * int64(size.Bytes()) * int64(sectors)
}

// OutputBytesFor is the output space a batch books: per sector, what the sealer leaves in the
// output directory (OutputBytesPerSector).
func OutputBytesFor(size sealv1.SectorSize, sectors int) int64 {
	return OutputBytesPerSector(size) * int64(sectors)
}

// OutputBytesPerSector is what the sealer writes for one sector: the replica (the sector
// size), tree-d (a binary tree over the sector's 32-byte nodes), tree-c (one arity-8 tree per
// base tree: 1, or 8 for 32 GiB, 16 for 64 GiB), tree-r-last (the same trees with the lowest
// rows discarded, as rust-fil-proofs keeps them), the layer files PC2 copies for C1, and 4 KiB
// for p_aux and t_aux. The sealer's tests compare it with the files it writes.
func OutputBytesPerSector(size sealv1.SectorSize) int64 {
	s := int64(size.Bytes())
	treeD, treeC, treeRLast := predict.TreeBytes(size)
	return s + treeD + treeC + treeRLast + int64(size.Layers())*s + 4096
}

// FromSlotOutputBytesPerSector is what a commit1 FromSlot batch writes for one sector: no
// layer copies, and C1OutputBytes for its C1.
func FromSlotOutputBytesPerSector(size sealv1.SectorSize) int64 {
	return OutputBytesPerSector(size) - int64(size.Layers())*int64(size.Bytes()) + C1OutputBytes(size)
}

// C1OutputBytes is an upper estimate of what C1 from the slot adds per sector: its
// commit-phase1-output (every partition's vanilla proofs as JSON) and, while it runs, the sparse
// layer files holding the labels it opens (a 4 KiB block per label: challenges × 15 nodes ×
// layers).
func C1OutputBytes(size sealv1.SectorSize) int64 {
	if size.Bytes() >= 32<<30 {
		return 512 << 20
	}
	return 4 << 20 // test sizes have a few challenges
}

// UpdateOutputBytesPerSector is what a SnapDeals update writes for one sector: the updated
// replica, its tree-d and tree-r-last, and 4 KiB for p_aux and t_aux.
func UpdateOutputBytesPerSector(size sealv1.SectorSize) int64 {
	treeD, _, treeRLast := predict.TreeBytes(size)
	return int64(size.Bytes()) + treeD + treeRLast + 4096
}

// cacheReason is why the node's parent cache for proof is not usable yet ("" when it is
// verified); the cache is then marked wanted, so it gets built. transient is false when the
// node agent cannot see the node's cache directory: no build would ever be reported.
func (n *Node) cacheReason(proof string) (reason string, transient bool) {
	if c := meta.FindStatusCondition(n.Sealer.Status.Conditions, sealv1.CondDegraded); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == sealv1.NodeReasonParentCacheDirNotVisible {
		return "parent-cache directory not visible to its node agent (see its Degraded condition)", false
	}
	var c *sealv1.ParentCacheStatus
	for i := range n.Sealer.Status.ParentCaches {
		if n.Sealer.Status.ParentCaches[i].Proof == proof {
			c = &n.Sealer.Status.ParentCaches[i]
		}
	}
	if c != nil && c.Verified {
		return "", false
	}
	if n.WantedCaches == nil {
		n.WantedCaches = map[string]bool{}
	}
	n.WantedCaches[proof] = true
	switch {
	case c != nil && c.Building:
		return fmt.Sprintf("parent cache for %s building: %d%%", proof, c.Percent), true
	case c != nil && c.Reason != "":
		return fmt.Sprintf("parent cache for %s unusable (%s): rebuilding", proof, c.Reason), true
	}
	return fmt.Sprintf("parent cache for %s not built yet: building", proof), true
}

// outputVolume is the node's report for host path p.
func outputVolume(sn *sealv1.SealerNode, p string) *sealv1.OutputVolume {
	for i := range sn.Status.OutputVolumes {
		if sn.Status.OutputVolumes[i].Path == p {
			return &sn.Status.OutputVolumes[i]
		}
	}
	return nil
}

// HugepagesFor is the number of 1 GiB hugepages a sealer pod asks for: the 36 SupraSeal-class
// sealers need for production sizes (parent buffers and page rings), one for test sizes.
func HugepagesFor(size sealv1.SectorSize, sectors int) int32 {
	if size.Bytes() >= 32<<30 {
		return 36
	}
	return 1
}

// ResidentPages is the 1 GiB hugepages the resident part of the previous layer takes
// (spec.residentLayerPercent), booked on top of the sealer's buffers.
func ResidentPages(b *sealv1.SealBatch) int32 {
	return int32((b.Spec.ResidentLayerBytes() + 1<<30 - 1) >> 30)
}

// AllocatableGPUs is how many sealv1.GPUResource the node's kubelet can grant.
func AllocatableGPUs(n *corev1.Node) int64 {
	q, ok := n.Status.Allocatable[sealv1.GPUResource]
	if !ok {
		return 0
	}
	return q.Value()
}

// HugepagesAvailable is the 1 GiB pages of the node not held by batches running there, and
// the total.
func HugepagesAvailable(n *Node) (avail, total int64) {
	for _, numa := range n.Sealer.Status.NUMANodes {
		for _, h := range numa.Hugepages {
			if h.PageSize == "1Gi" {
				total += h.Total
			}
		}
	}
	return total - n.usage().Hugepages(), total
}

// check returns "" when node n can take the batch now, else a reason; transient is true when
// the reason is capacity that frees up (the node could run it later).
func check(n *Node, need *Need) (reason string, transient bool) {
	sn := n.Sealer
	switch {
	case n.NodeMissing:
		return "Node object missing", false
	case need.NodeName != "" && sn.Name != need.NodeName:
		return "not the pinned node " + need.NodeName, false
	case sn.Spec.Cordon || n.Unschedulable:
		return "cordoned", false
	case !meta.IsStatusConditionTrue(sn.Status.Conditions, sealv1.CondReady):
		return "not Ready", false
	case !need.Selector.Matches(labels.Set(n.Labels)):
		return "not matched by spec.placement.nodeSelector", false
	}
	for i := range n.Taints {
		t := &n.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerated(need.Tolerate, t) {
			return "untolerated taint " + t.Key, false
		}
	}
	for _, hp := range need.HostPaths {
		if sn.Spec.RootOf(hp[1]) == "" {
			return fmt.Sprintf("%s %s is outside its spec.hostPathRoots [%s]", hp[0], hp[1], strings.Join(sn.Spec.Roots(), ", ")), false
		}
	}
	if sn.Status.CPU == nil || !sn.Status.CPU.SHANI {
		return "no SHA-NI", false
	}
	if !batchSizeSupported(sn, need.BatchSize) {
		return fmt.Sprintf("batch size %d unsupported by its CPU layout", need.BatchSize), false
	}
	u := n.usage()
	if reason, transient := checkLayers(n, need); reason != "" {
		return reason, transient
	}
	if k := need.gpusOn(n); k > 0 && int64(u.GPUs())+k > n.GPUs {
		return fmt.Sprintf("GPUs busy (%d/%d %s held, the batch needs %d)", u.GPUs(), n.GPUs, sealv1.GPUResource, k), true
	}
	if need.OutputPath != "" {
		v := outputVolume(sn, need.OutputPath)
		switch {
		case v == nil:
			return fmt.Sprintf("output path %s is not in its spec.outputPaths", need.OutputPath), false
		case v.Reason != "":
			return fmt.Sprintf("output path %s unusable: %s", need.OutputPath, v.Reason), false
		case v.CapacityBytes < need.OutputBytes:
			return fmt.Sprintf("output volume %s too small (%s < %s)", need.OutputPath, Human(v.CapacityBytes), Human(need.OutputBytes)), false
		}
		if free := v.AvailableBytes - u.OutputBytes(need.OutputPath); free < need.OutputBytes {
			return fmt.Sprintf("output volume %s: %s free after running batches, %s needed", need.OutputPath, Human(max(free, 0)), Human(need.OutputBytes)), true
		}
	}
	if _, err := n.Layout(need.BatchSize); err != nil {
		if len(u.BusyCPUs()) > 0 {
			return "not enough free cores beside the running batch", true
		}
		return "no core layout: " + err.Error(), false
	}
	if !need.Update {
		if why := predict.Reason(need.Predict, n.Predict(need), need.MinRatePercent); why != "" {
			return why, false
		}
	}
	return "", false
}

// Predict is the batch's expected run on this node with the layout it would get now.
func (n *Node) Predict(need *Need) predict.Prediction {
	pn := predict.Node{Name: n.Sealer.Name, Qual: n.Sealer.Status.Qualification, GPUs: int(need.gpusOn(n))}
	if l, err := n.Layout(need.BatchSize); err == nil && l != nil {
		// The pod gets the layout's cores: hasher threads beyond its CPUs share them.
		pn.CPUs = len(l.CoreCPUs())
		pn.Hashers = min(l.Hashers(), pn.CPUs)
	}
	return predict.Predict(need.Predict, pn)
}

// finishBucket groups predicted run times within about 10 % of each other, so measurement
// noise between like nodes does not outweigh best fit.
func finishBucket(d time.Duration) int64 {
	if d <= time.Second {
		return 0
	}
	return int64(math.Round(math.Log(d.Seconds()) / math.Log(1.1)))
}

// checkLayers is check() for what labelling needs: a free layer slot large enough, the PC2
// engine, a GPU, the parent cache, hugepages and a PC1 pipeline. An update needs none of them.
func checkLayers(n *Node, need *Need) (reason string, transient bool) {
	if need.Update {
		return "", false
	}
	sn, g, u := n.Sealer, n.Geometry, n.usage()
	if g.Count == 0 {
		return "no layer slots (no ready layer devices)", false
	}
	if g.SlotBytes < need.SlotBytes {
		return fmt.Sprintf("slot too small (%s < %s)", Human(g.SlotBytes), Human(need.SlotBytes)), false
	}
	if mode := sn.Spec.DeviceMode; mode != "" && !slices.Contains(n.layerDeviceModes(), mode) {
		return fmt.Sprintf("spec.deviceMode %s: the node's sealer image reads layer devices only in %s mode (it has no SPDK backend): set the SealerNode's spec.deviceMode to one of them",
			mode, joinNames(n.layerDeviceModes())), false
	}
	if !n.hasPC2Engine(need.PC2Engine) {
		return n.noEngineReason(need.PC2Engine), false
	}
	if need.usesGPUs() && n.GPUs == 0 {
		return "no " + string(sealv1.GPUResource) + " allocatable for pc2Engine gpu (no GPU, or its device plugin is not running)", false
	}
	if need.GPUs > n.GPUs {
		return fmt.Sprintf("spec.gpus %d: the node has %d %s allocatable", need.GPUs, n.GPUs, sealv1.GPUResource), false
	}
	if reason := gpuMemoryReason(n, need); reason != "" {
		return reason, false
	}
	if !n.IgnoreCaches {
		if reason, transient := n.cacheReason(need.Proof); reason != "" {
			return reason, transient
		}
	}
	if avail, total := HugepagesAvailable(n); total < int64(need.Hugepages) {
		return fmt.Sprintf("hugepages-1Gi %d total < %d needed", total, need.Hugepages), false
	} else if avail < int64(need.Hugepages) {
		return fmt.Sprintf("hugepages-1Gi %d/%d free, %d needed", avail, total, need.Hugepages), true
	}
	pipelines := int(sn.Spec.Pipelines)
	if pipelines < 1 {
		pipelines = 1
	}
	if u.PC1() >= pipelines {
		return fmt.Sprintf("PC1 pipelines busy (%d/%d)", u.PC1(), pipelines), true
	}
	if u.FreeSlot(g) < 0 {
		if d := u.Dirty(); d > 0 {
			return fmt.Sprintf("no free slot (%d/%d held, %d of them released and waiting for their scrub)", u.Slots(), g.Count, d), true
		}
		return fmt.Sprintf("no free slot (%d/%d held)", u.Slots(), g.Count), true
	}
	return "", false
}

// gpuMemoryReason says why the node's GPU cannot hold one page of the batch's rows (the least
// range the sealer hashes), where its sealer image reported the GPU's memory; "" otherwise. The
// sealer sizes its ranges to the rest of the memory (gpubudget), and each GPU is the batch's
// alone (the device plugin grants it whole), so nothing else is booked on it.
func gpuMemoryReason(n *Node, need *Need) string {
	c := n.Sealer.Status.Capabilities
	if !need.usesGPUs() || c == nil || c.GPUMemoryBytes <= 0 {
		return ""
	}
	dev := gpubudget.Device{MemoryBytes: uint64(c.GPUMemoryBytes), MaxAllocBytes: uint64(c.GPUMaxAllocBytes)}
	if dev.MaxAllocBytes == 0 {
		dev.MaxAllocBytes = dev.MemoryBytes
	}
	b := gpubudget.ForBatch(need.SectorSize, need.BatchSize, int(need.gpusOn(n)), dev)
	if b.DeviceBytes <= dev.MemoryBytes {
		return ""
	}
	return fmt.Sprintf("spec.sectors: PC2 of %d %s sectors on the GPU needs %s of GPU memory per GPU even at its smallest range, and the node's GPU has %s: seal fewer sectors per batch, or use a node with larger GPUs",
		need.BatchSize, need.SectorSize, Human(int64(b.DeviceBytes)), Human(c.GPUMemoryBytes))
}

// pc2Engines are the engines the node's sealer image reported it runs here (status.
// capabilities.pc2Engines; cpu when it reported none: every image has it).
func (n *Node) pc2Engines() []sealv1.PC2Engine {
	if c := n.Sealer.Status.Capabilities; c != nil && len(c.PC2Engines) > 0 {
		return c.PC2Engines
	}
	return []sealv1.PC2Engine{sealv1.PC2EngineCPU}
}

// layerDeviceModes are the device modes the node's sealer image reported it reads layers in
// (kernel when it reported none: every image has io_uring on kernel block devices and files).
func (n *Node) layerDeviceModes() []sealv1.DeviceMode {
	if c := n.Sealer.Status.Capabilities; c != nil && len(c.LayerDeviceModes) > 0 {
		return c.LayerDeviceModes
	}
	return []sealv1.DeviceMode{sealv1.DeviceModeKernel}
}

// noEngineReason says why engine e does not run here, with what the image said of its GPU.
func (n *Node) noEngineReason(e sealv1.PC2Engine) string {
	msg := fmt.Sprintf("the node's sealer image runs no %s PC2 here (only %s)", e, joinNames(n.pc2Engines()))
	if c := n.Sealer.Status.Capabilities; e == sealv1.PC2EngineGPU && c != nil && c.GPUEngine != "" {
		msg += "; GPU engine " + c.GPUEngine
	} else if e == sealv1.PC2EngineGPU {
		msg += "; its node agent has not reported the image's capabilities"
	}
	return msg + ": set spec.pc2Engine to one it runs"
}

// hasPC2Engine reports whether the sealer build of this node can run PC2 on engine e (an
// unset engine is the API default, cpu).
func (n *Node) hasPC2Engine(e sealv1.PC2Engine) bool {
	if e == "" {
		e = sealv1.PC2EngineCPU
	}
	return slices.Contains(n.pc2Engines(), e)
}

// joinNames lists engines or modes for a reason.
func joinNames[T ~string](xs []T) string {
	names := make([]string, len(xs))
	for i, x := range xs {
		names[i] = string(x)
	}
	return strings.Join(names, ", ")
}

func tolerated(ts []corev1.Toleration, t *corev1.Taint) bool {
	for i := range ts {
		if ts[i].ToleratesTaint(klog.Background(), t, false) {
			return true
		}
	}
	return false
}

func batchSizeSupported(sn *sealv1.SealerNode, n int) bool {
	c := sn.Status.Capabilities
	if c == nil {
		return false
	}
	for _, s := range c.BatchSizes {
		if int(s) == n {
			return true
		}
	}
	return false
}

// score ranks fitting nodes, higher is better: the fastest predicted finish first (within
// about 10 %), then best fit (fewest free slots left, so a node fills before another opens),
// then NUMA locality of layer devices and GPU, then spread (fewer batches already running).
func score(n *Node, need *Need) int64 {
	free := int64(n.Geometry.Count) - int64(n.usage().Slots())
	s := -finishBucket(n.Predict(need).Total())*1_000_000_000_000 - free*1_000_000
	if numaLocal(n.Sealer, need.usesGPUs()) {
		s += 1000
	}
	s -= int64(n.usage().PC1())
	return s
}

// numaLocal reports whether the node's ready layer devices (and its GPU, when used) sit on a
// single NUMA node.
func numaLocal(sn *sealv1.SealerNode, gpu bool) bool {
	numa := int32(-2)
	for _, d := range sn.Status.LayerDevices {
		if !d.Ready {
			continue
		}
		if numa == -2 {
			numa = d.NUMANode
		} else if d.NUMANode != numa {
			return false
		}
	}
	if gpu {
		for _, g := range sn.Status.GPUs {
			if numa != -2 && g.NUMANode == numa {
				return true
			}
		}
		return numa == -2
	}
	return true
}

// Queue orders batches: higher priority first, then older, then by namespace/name.
func Queue(batches []*sealv1.SealBatch) {
	sort.SliceStable(batches, func(i, j int) bool {
		a, b := batches[i], batches[j]
		if a.Spec.Priority != b.Spec.Priority {
			return a.Spec.Priority > b.Spec.Priority
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

// Schedule places pending batches in queue order on the fleet. Each decision is added to
// the node's usage (slot, hugepages, pipeline, CPUs, GPU) before the next batch is considered. A batch that fits nowhere only for lack of free capacity blocks the nodes that
// could run it once they free up: later (smaller) batches may not take them, so a big batch
// is not starved by a stream of small ones.
func Schedule(nodes []*Node, pending []*sealv1.SealBatch) ([]Decision, map[*sealv1.SealBatch]*Unschedulable) {
	Queue(pending)
	blocked := make(map[string]bool)
	var decisions []Decision
	failed := make(map[*sealv1.SealBatch]*Unschedulable)
	for _, b := range pending {
		need := NeedOf(b)
		var best *Node
		var bestScore int64
		var u *Unschedulable
		var waitingOn []*Node
		for _, n := range nodes {
			reason, transient := check(n, &need)
			if reason == "" && blocked[n.Sealer.Name] {
				reason, transient = "held for an older or higher-priority batch", true
			}
			if reason != "" {
				if u == nil {
					u = &Unschedulable{Nodes: len(nodes), Reasons: map[string]int{}}
				}
				u.Reasons[reason]++
				if transient {
					waitingOn = append(waitingOn, n)
				}
				continue
			}
			s := score(n, &need)
			if best == nil || s > bestScore || (s == bestScore && n.Sealer.Name < best.Sealer.Name) {
				best, bestScore = n, s
			}
		}
		if best == nil {
			if u == nil {
				u = &Unschedulable{Nodes: len(nodes)}
			}
			failed[b] = u
			for _, n := range waitingOn {
				blocked[n.Sealer.Name] = true
			}
			continue
		}
		lay, _ := best.Layout(need.BatchSize) // check() proved it exists
		d := Decision{Batch: b, Node: best.Sealer.Name, Slot: ledger.NoSlot, Hugepages: need.Hugepages, GPUs: int32(need.gpusOn(best)), Layout: lay, OutputBytes: need.OutputBytes, Prediction: best.Predict(&need)}
		if !need.Update {
			d.Slot = best.usage().FreeSlot(best.Geometry)
			d.Range = best.Geometry.Range(d.Slot)
		}
		decisions = append(decisions, d)
		best.usage().Add(d.Claim())
		best.layouts = nil
	}
	return decisions, failed
}

// Human renders bytes in binary units.
func Human(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

// FitOf is how many sectors one batch of the probe's kind can have on this fleet: now, the
// largest batch size (of sealv1.SupportedBatchSizes, at most maxSize) some node can place with
// what it has free; ever, the largest some node could place once its running batches end (every
// check it fails now is one that frees up). 0: no node. probe(n) is such a batch of n sectors.
// Parent caches are left out: a batch that waits for one asks for it to be built.
func FitOf(nodes []*Node, probe func(sectors int) *sealv1.SealBatch, maxSize int) (now, ever int) {
	for _, size := range sealv1.SupportedBatchSizes {
		if size > maxSize {
			break
		}
		need := NeedOf(probe(size))
		for _, n := range nodes {
			ignore := n.IgnoreCaches
			n.IgnoreCaches = true
			reason, transient := check(n, &need)
			n.IgnoreCaches = ignore
			switch {
			case reason == "":
				now, ever = max(now, size), max(ever, size)
			case transient:
				ever = max(ever, size)
			}
		}
	}
	return now, ever
}
