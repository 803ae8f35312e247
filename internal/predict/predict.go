// Package predict estimates how long a batch takes on a node: PC1 from the node's measured
// hashing rate and layer-device random reads (the sealer's own model: `sealer plan`), PC2 from
// its four bounds (hashing, GPU copies, the slot's reads and the outputs' writes: pc2.go), and
// SyntheticPoRep's synthetic proofs from per-core rates measured on the reference machine.
// Pure functions: placement ranks nodes by them and refuses nodes too slow for a batch.
package predict

import (
	"fmt"
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/contracts"
)

// Model constants, measured with the sealer's benchmarks on the reference machine (AMD EPYC,
// 2 vCPUs, SHA-NI; sealer-image/README.md). A node's qualification replaces the hashing rate;
// the others scale with the CPUs a batch gets.
const (
	// PC1Efficiency is the share of the hashing bound (labelsPerSecondPerThread: one thread,
	// parents in memory) the PC1 engine reaches per hasher thread, reads aside: 62-69 % in
	// `sealer bench pc1`.
	PC1Efficiency = 0.65
	// UnqualifiedLabelsPerSecondPerThread is the hasher rate assumed on a node not qualified
	// yet (`sealer plan`'s default rate).
	UnqualifiedLabelsPerSecondPerThread = 1.0e6
	// ExpanderReadsPerNode is the random 4 KiB reads one node step (one node of every sector)
	// needs when the previous layer is not in memory: the 8 expander parents.
	ExpanderReadsPerNode = 8
	// NodeCacheBytes is the sealer's node-cache budget (its --cache-mib default): the previous
	// layer stays in memory when two layers of the batch fit it.
	NodeCacheBytes = 1 << 30
	// SynthChallengesMax is filecoin-proofs' DEFAULT_SYNTH_CHALLENGE_COUNT: a sector has
	// min(nodes, 2^18) synthetic challenges, so every size from 8 MiB up costs about the same.
	SynthChallengesMax = 1 << 18
)

// synthCost is the sealer's streaming writer's cost for one sector of a size
// (contracts/synth-costs.json, the sealer's own model).
func synthCost(size sealv1.SectorSize) contracts.SynthCost {
	c, _ := contracts.SynthCostOf(size.Bytes())
	return c
}

// SynthChallenges is the number of synthetic challenges of a sector.
func SynthChallenges(size sealv1.SectorSize) int64 {
	return min(int64(size.Bytes()/32), SynthChallengesMax)
}

// SynthProofsMemoryBytes is the most memory one SyntheticPoRep sector's synthetic proofs hold
// (bounded per sector by the sealer's streaming writer, whatever its size; the sectors of a
// batch are proved one after another, so it does not grow with the batch): under 256 MiB.
func SynthProofsMemoryBytes(size sealv1.SectorSize) int64 {
	return synthCost(size).PeakMemoryBytes
}

// SynthProofsFileBytes is one sector's syn-porep-vanilla-proofs.dat (6.2 GB at 8 MiB).
func SynthProofsFileBytes(size sealv1.SectorSize) int64 {
	return synthCost(size).FileBytes
}

// synthProofsCPUSeconds is one sector's synthetic proofs in CPU-seconds.
func synthProofsCPUSeconds(size sealv1.SectorSize) float64 {
	return synthCost(size).CPUSeconds
}

// Batch is what a prediction needs of a batch.
type Batch struct {
	SectorSize      sealv1.SectorSize
	Sectors         int
	ResidentPercent int32
	Synthetic       bool
	// Update: a SnapDeals update labels no layers (no PC1).
	Update bool
	// GPU: PC2 hashes on GPUs (pc2Engine gpu).
	GPU bool
}

// BatchOf reads a batch's spec.
func BatchOf(b *sealv1.SealBatch) Batch {
	return Batch{
		SectorSize: b.Spec.SectorSize, Sectors: len(b.Spec.Sectors), ResidentPercent: b.Spec.ResidentLayerPercent,
		Synthetic: b.Spec.ProofTypeOrDefault() == sealv1.ProofTypeSyntheticPoRep, Update: b.Spec.IsUpdate(),
		GPU: b.Spec.UsesGPUs(),
	}
}

// Node is what a prediction needs of a node: the batch's hasher threads, CPUs and GPUs there,
// and the node's qualification (nil: not qualified).
type Node struct {
	Name    string
	Hashers int
	CPUs    int
	GPUs    int
	Qual    *sealv1.Qualification
}

// Bottlenecks.
const (
	BottleneckHashers = "hashers"
	BottleneckReads   = "layer device reads"
)

// Prediction is a batch's expected run on a node.
type Prediction struct {
	PC1, PC2, Proofs time.Duration
	// HashBound is the hashers' labels/s over all sectors with parents in memory; Rate what
	// PC1 is predicted to reach; ReadsNeeded the random reads/s HashBound needs, ReadIOPS
	// what the node's layer devices measured (0: unknown).
	HashBound, Rate, ReadsNeeded, ReadIOPS float64
	// RatePercent is Rate as a share of HashBound (100 when reads keep up).
	RatePercent int32
	Bottleneck  string
	Basis       string
	// PC2Bounds are PC2's four bounds; PC2 is the largest (PC2Bounds.Bound names it).
	PC2Bounds PC2Bounds
}

// Total is the predicted run time.
func (p Prediction) Total() time.Duration { return p.PC1 + p.PC2 + p.Proofs }

// ReadShare is the share of a node step's expander parents that are random reads: none when
// the previous layer stays in memory, else those outside the resident share.
func ReadShare(b Batch) float64 {
	layerBytes := float64(b.SectorSize.Bytes()) * float64(b.Sectors)
	if 2*layerBytes <= NodeCacheBytes {
		return 0
	}
	return 1 - float64(b.ResidentPercent)/100
}

// Predict estimates batch b on node n.
func Predict(b Batch, n Node) Prediction {
	var p Prediction
	perThread, basis := UnqualifiedLabelsPerSecondPerThread, "not qualified: model defaults"
	if q := n.Qual; q != nil && q.LabelsPerSecondPerThread > 0 {
		perThread = float64(q.LabelsPerSecondPerThread) * PC1Efficiency
		basis = fmt.Sprintf("qualification of %s", q.MeasuredTime.UTC().Format(time.RFC3339))
		p.ReadIOPS = float64(q.ReadIOPS())
	}
	cpus := max(n.CPUs, 1)
	nodes := float64(b.SectorSize.Bytes() / 32)
	sectors := float64(max(b.Sectors, 1))
	if !b.Update {
		layers := float64(b.SectorSize.Layers())
		p.HashBound = perThread * float64(max(n.Hashers, 1))
		p.ReadsNeeded = p.HashBound / sectors * ExpanderReadsPerNode * ReadShare(b)
		p.Rate, p.Bottleneck, p.RatePercent = p.HashBound, BottleneckHashers, 100
		if p.ReadsNeeded > 0 && p.ReadIOPS > 0 && p.ReadIOPS < p.ReadsNeeded {
			p.Rate = p.HashBound * p.ReadIOPS / p.ReadsNeeded
			p.Bottleneck = BottleneckReads
			p.RatePercent = int32(math.Floor(100 * p.Rate / p.HashBound))
		}
		// Layer 1 has no expander parents: it runs at the hashing bound.
		layer := nodes * sectors
		p.PC1 = seconds(layer/p.HashBound + (layers-1)*layer/p.Rate)
	}
	in := PC2Input{SectorSize: b.SectorSize, Sectors: max(b.Sectors, 1), GPU: b.GPU, CPUs: cpus, GPUs: max(n.GPUs, 1)}
	if q := n.Qual; q != nil {
		in.ReadBytesPerSecond, in.WriteBytesPerSecond = seqBandwidth(q)
	}
	p.PC2Bounds = PC2(in)
	p.PC2 = seconds(p.PC2Bounds.Seconds)
	if b.Synthetic {
		// One sector after another, each on every CPU of the pod.
		p.Proofs = seconds(synthProofsCPUSeconds(b.SectorSize) * sectors / float64(cpus))
	}
	p.Basis = basis
	return p
}

// seqBandwidth is the layer devices' sequential read and write bandwidth, summed: a slot
// stripes across every layer device of its node. A device without a figure (not measured, or
// failed) leaves that sum unknown (0).
func seqBandwidth(q *sealv1.Qualification) (read, write float64) {
	if len(q.LayerDevices) == 0 {
		return 0, 0
	}
	readOK, writeOK := true, true
	for _, d := range q.LayerDevices {
		read += float64(d.SeqReadBytesPerSecond)
		write += float64(d.SeqWriteBytesPerSecond)
		readOK = readOK && d.SeqReadBytesPerSecond > 0
		writeOK = writeOK && d.SeqWriteBytesPerSecond > 0
	}
	if !readOK {
		read = 0
	}
	if !writeOK {
		write = 0
	}
	return read, write
}

// Reason is why a node predicted below minPercent of its hashing bound is refused ("" when it
// is not), e.g. "layer devices 85k reads/s, 64 sectors need 1.9M/s: PC1 at 4% of the hashing
// bound (spec.placement.minRatePercent 25)".
func Reason(b Batch, p Prediction, minPercent int32) string {
	if p.Bottleneck != BottleneckReads || p.RatePercent >= minPercent {
		return ""
	}
	return fmt.Sprintf("layer devices %s reads/s, %d sectors need %s/s: PC1 at %d%% of the hashing bound (spec.placement.minRatePercent %d)",
		SI(p.ReadIOPS), b.Sectors, SI(p.ReadsNeeded), p.RatePercent, minPercent)
}

// SI renders a rate with a k/M/G suffix (85k, 1.9M).
func SI(v float64) string {
	for _, u := range []struct {
		s string
		f float64
	}{{"G", 1e9}, {"M", 1e6}, {"k", 1e3}} {
		if v >= u.f {
			x := v / u.f
			if x >= 10 {
				return fmt.Sprintf("%.0f%s", x, u.s)
			}
			return fmt.Sprintf("%.1f%s", x, u.s)
		}
	}
	return fmt.Sprintf("%.0f", v)
}

func seconds(s float64) time.Duration {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// Status renders a prediction for a batch's status, finishing start + its total.
func Status(p Prediction, start time.Time) *sealv1.Prediction {
	s := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return fmt.Sprintf("%.1f", d.Seconds())
	}
	finish := metaTime(start.Add(p.Total()))
	return &sealv1.Prediction{
		PC1Seconds: s(p.PC1), PC2Seconds: s(p.PC2), ProofsSeconds: s(p.Proofs), FinishTime: finish,
		LabelsPerSecond: int64(p.Rate), RatePercent: p.RatePercent, Bottleneck: p.Bottleneck, Basis: p.Basis,
		PC2Bound: p.PC2Bounds.Bound,
	}
}

func metaTime(t time.Time) *metav1.Time { mt := metav1.NewTime(t.Truncate(time.Second)); return &mt }
