package predict

import (
	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/contracts"
)

// PC2's bounds: what limits a batch's PC2 (contracts/pc2-bounds.json; the sealer's `sealer
// plan` computes the same).
const (
	PC2BoundKernels = "kernels"
	PC2BoundCopies  = "copies"
	PC2BoundReads   = "reads"
	PC2BoundWrites  = "writes"
)

// PC2Input is a batch's PC2 and the machine it runs on.
type PC2Input struct {
	SectorSize sealv1.SectorSize
	Sectors    int
	GPU        bool
	// CPUs of the CPU engine; GPUs of the GPU engine.
	CPUs, GPUs int
	// ReadBytesPerSecond and WriteBytesPerSecond are the layer devices' sequential bandwidths
	// summed over the devices the slot stripes across (0: not measured, that bound left out).
	ReadBytesPerSecond, WriteBytesPerSecond float64
}

// PC2Bounds are each bound's seconds for the whole batch, and the largest: PC2 overlaps its
// reads, hashing, copies and writes, so the batch takes the longest of them.
type PC2Bounds struct {
	ReadBytes, WriteBytes                                 int64
	KernelSeconds, CopySeconds, ReadSeconds, WriteSeconds float64
	Seconds                                               float64
	Bound                                                 string
}

// PC2 computes the bounds of in.
func PC2(in PC2Input) PC2Bounds {
	m := contracts.PC2()
	n := float64(in.Sectors)
	s := float64(in.SectorSize.Bytes())
	nodes := s / 32
	treeD, treeC, treeRLast := TreeBytes(in.SectorSize)
	b := PC2Bounds{
		ReadBytes:  int64(in.Sectors) * int64(in.SectorSize.Layers()) * int64(in.SectorSize.Bytes()),
		WriteBytes: int64(in.Sectors) * (int64(in.SectorSize.Bytes()) + treeD + treeC + treeRLast),
	}
	if in.GPU {
		gpus := float64(max(in.GPUs, 1))
		b.KernelSeconds = n * (nodes/m.GPUArity11HashesPerSecond + 2*nodes/7/m.GPUArity8HashesPerSecond) / gpus
		// The layers up; the replica and both trees back (tree-d is built on the host).
		back := int64(in.Sectors) * (int64(in.SectorSize.Bytes()) + treeC + treeRLast)
		b.CopySeconds = float64(b.ReadBytes+back) / (m.GPUCopyBytesPerSecond * gpus)
	} else {
		b.KernelSeconds = n * s / (m.CPUSectorBytesPerCPUSecond * float64(max(in.CPUs, 1)))
	}
	over := func(bytes int64, bw float64) float64 {
		if bw <= 0 {
			return 0
		}
		return float64(bytes) / bw
	}
	b.ReadSeconds = over(b.ReadBytes, in.ReadBytesPerSecond)
	b.WriteSeconds = over(b.WriteBytes, in.WriteBytesPerSecond)
	b.Bound, b.Seconds = PC2BoundKernels, b.KernelSeconds
	for _, c := range []struct {
		name string
		s    float64
	}{{PC2BoundCopies, b.CopySeconds}, {PC2BoundReads, b.ReadSeconds}, {PC2BoundWrites, b.WriteSeconds}} {
		if c.s > b.Seconds {
			b.Bound, b.Seconds = c.name, c.s
		}
	}
	return b
}

// TreeBytes is the size of a sector's tree-d, tree-c and tree-r-last files (tree-r-last
// without the rows rust-fil-proofs discards).
func TreeBytes(size sealv1.SectorSize) (treeD, treeC, treeRLast int64) {
	s := int64(size.Bytes())
	nodes := s / 32
	trees := int64(size.BaseTrees())
	leaves := nodes / trees
	var levels []int64 // arity-8 tree levels, leaves first
	for n := leaves; ; n /= 8 {
		levels = append(levels, n)
		if n <= 1 {
			break
		}
	}
	sum := func(from int) int64 {
		var t int64
		for _, n := range levels[min(from, len(levels)):] {
			t += n
		}
		return t * 32
	}
	return (2*nodes - 1) * 32, trees * sum(0), trees * sum(rowsToDiscard(len(levels))+1)
}

// rowsToDiscard is rust-fil-proofs' default for tree-r-last (FIL_PROOFS_ROWS_TO_DISCARD 2),
// for a tree with the given number of rows.
func rowsToDiscard(rows int) int {
	switch {
	case rows <= 2:
		return 0
	case rows == 3:
		return 1
	}
	return min(rows-2, 2)
}
