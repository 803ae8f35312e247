package gpubudget

import (
	"testing"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/contracts"
)

// The sealer's examples (its test checks the same file): the budget is computed alike on both
// sides.
func TestComputeIsTheSealers(t *testing.T) {
	doc := contracts.PC2GPUBudgetDoc()
	if len(doc.Examples) == 0 {
		t.Fatal("contracts/pc2-gpu-budget.json has no examples")
	}
	for _, e := range doc.Examples {
		devices := make([]Device, len(e.Devices))
		for i, d := range e.Devices {
			devices[i] = Device{MemoryBytes: d.MemoryBytes, MaxAllocBytes: d.MaxAllocBytes}
		}
		got := Compute(devices, e.Leaves, e.NPP, e.Sectors, e.Layers)
		want := Budget{Range: e.Range, Parts: e.Parts, InFlight: e.InFlight, DeviceBytes: e.DeviceBytes, HostBytes: e.HostBytes}
		if got != want {
			t.Errorf("%s: got %+v, the sealer computes %+v", e.What, got, want)
		}
	}
}

func TestForBatchDerivesTheTreeShapeFromTheSectorSize(t *testing.T) {
	h100 := Device{MemoryBytes: 85520809984, MaxAllocBytes: 21380202496}
	// 128 x 32 GiB: 2^27 leaves per base tree, one node of every sector per page.
	if got, want := ForBatch(sealv1.SectorSize32GiB, 128, 1, h100), Compute([]Device{h100}, 1<<27, 1, 128, 11); got != want {
		t.Errorf("32 GiB x 128: %+v, want %+v", got, want)
	}
	// 2 KiB x 2: the whole 64-node tree in one range.
	if got := ForBatch(sealv1.SectorSize2KiB, 2, 1, h100); got.Range != 64 {
		t.Errorf("2 KiB x 2: range %d, want 64", got.Range)
	}
	// Two GPUs split each range.
	if got := ForBatch(sealv1.SectorSize32GiB, 16, 2, h100); got.Parts != 2 {
		t.Errorf("two GPUs: %d parts", got.Parts)
	}
}

func TestHostBytesAreBoundedByTheHostBuffers(t *testing.T) {
	limit := contracts.PC2GPUBudgetDoc().HostBufferBytes
	for _, size := range []sealv1.SectorSize{sealv1.SectorSize2KiB, sealv1.SectorSize8MiB, sealv1.SectorSize512MiB, sealv1.SectorSize32GiB, sealv1.SectorSize64GiB} {
		for _, n := range sealv1.SupportedBatchSizes {
			got := HostBytes(size, n)
			if got == 0 || got > limit {
				t.Errorf("%s x %d: %d bytes of host buffers (limit %d)", size, n, got, limit)
			}
		}
	}
	// A large batch takes the whole of them; a test-size batch only its tree's pages.
	if got := HostBytes(sealv1.SectorSize32GiB, 128); got < limit/2 {
		t.Errorf("32 GiB x 128: %d bytes, want about %d", got, limit)
	}
	// 2 KiB x 2: the whole tree (64 rows, one page) in a range, two in flight: three sets of a
	// page per layer and a range's readbacks (64 rows of 2 sectors, both trees).
	part := uint64(64 * 2 * nodeBytes)
	if got, want := HostBytes(sealv1.SectorSize2KiB, 2), 3*(2*pageBytes+2*part+2*part/7); got != want {
		t.Errorf("2 KiB x 2: %d bytes, want %d", got, want)
	}
}
