// Package gpubudget sizes a batch's PC2 on the GPU engine as the sealer does
// (sealer_pc2::engine::gpu_budget): how many nodes of every sector a range hashes at once, and
// the device memory and page-locked host memory a range takes. Placement refuses GPUs too small
// for even one page of rows, and the sealer pod's memory request books the host buffers.
// contracts/pc2-gpu-budget.json holds examples that this package's tests and the sealer's
// check alike, so neither side changes the budget alone.
package gpubudget

import (
	"math/bits"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/contracts"
)

const (
	nodeBytes = 32
	pageBytes = 4096
	// inFlight is the ranges each device holds at once where its memory allows.
	inFlight = 2
)

// Device is one GPU as the sealer image reported it.
type Device struct {
	MemoryBytes   uint64
	MaxAllocBytes uint64
}

// Budget is what PC2 on the GPU engine takes for a batch.
type Budget struct {
	// Range is the nodes of every sector hashed at once.
	Range uint64
	// Parts is how many devices each range is split among.
	Parts int
	// InFlight is how many ranges each device holds at once.
	InFlight int
	// DeviceBytes is the device memory each of them needs for one range's part.
	DeviceBytes uint64
	// HostBytes is the page-locked host memory: InFlight+1 sets of layer buffers, and on each
	// device InFlight+1 sets of readbacks.
	HostBytes uint64
}

// Compute is the budget of `sectors` sectors of `layers` layers, base trees of `leaves` nodes
// stored `npp` nodes of a sector per 4 KiB page, on `devices`: as many nodes as each device's
// memory holds inFlight times within half of it, its largest allocation and the host buffers
// hold (a device's part takes at most layers + 5 nodes of device memory per sector-node, and
// inFlight + 1 host sets at most layers + 3), a power of two up to the leaves, at least a page.
func Compute(devices []Device, leaves, npp uint64, sectors, layers int) Budget {
	perNode := uint64(sectors) * nodeBytes
	l := uint64(layers)
	device := uint64(1)
	for i, d := range devices {
		fit := min(d.MemoryBytes/2/inFlight/(perNode*(l+5)), d.MaxAllocBytes/(perNode*l))
		if i == 0 || fit < device {
			device = fit
		}
	}
	shared := uint64(1) << (bits.Len(uint(max(len(devices), 1))) - 1) // devices a range is split among
	host := contracts.PC2GPUBudgetDoc().HostBufferBytes / (perNode * (l + 3) * (inFlight + 1))
	hi, spread := bits.Mul64(device, shared)
	if hi != 0 {
		spread = ^uint64(0)
	}
	fit := max(min(spread, host), 1)
	pow2 := uint64(1) << (bits.Len64(fit) - 1)
	r := max(min(pow2, leaves), min(npp, leaves))
	parts := Parts(r, len(devices))
	part := r / uint64(parts) * perNode
	deviceBytes := part*(l+3) + 2*part/7
	smallest := uint64(0)
	for i, d := range devices {
		if i == 0 || d.MemoryBytes < smallest {
			smallest = d.MemoryBytes
		}
	}
	flight := min(max(smallest/2/max(deviceBytes, 1), 1), inFlight)
	readbacks := 2*part + 2*part/7
	return Budget{
		Range:       r,
		Parts:       parts,
		InFlight:    int(flight),
		DeviceBytes: deviceBytes,
		HostBytes:   (flight + 1) * (l*((r+npp-1)/npp)*pageBytes + uint64(parts)*readbacks),
	}
}

// Parts is how many of `devices` a range of `count` rows is split among: a power of two, each
// part at least 8 rows and the count divided evenly.
func Parts(count uint64, devices int) int {
	p := 1
	for p*2 <= devices && count%uint64(p*2) == 0 && count/uint64(p*2) >= 8 {
		p *= 2
	}
	return p
}

// ForBatch is the budget of a batch of `sectors` sectors of `size` on `gpus` devices like dev.
func ForBatch(size sealv1.SectorSize, sectors int, gpus int, dev Device) Budget {
	devices := make([]Device, max(gpus, 1))
	for i := range devices {
		devices[i] = dev
	}
	nodes := size.Bytes() / nodeBytes
	return Compute(devices, nodes/uint64(size.BaseTrees()), max(pageBytes/(uint64(sectors)*nodeBytes), 1), sectors, size.Layers())
}

// HostBytes is the most page-locked host memory (layer buffers and readbacks) a batch of
// `sectors` sectors of `size` takes, whatever its GPUs: what the sealer pod's memory request
// books.
func HostBytes(size sealv1.SectorSize, sectors int) uint64 {
	unbounded := Device{MemoryBytes: ^uint64(0), MaxAllocBytes: ^uint64(0)}
	return ForBatch(size, sectors, 1, unbounded).HostBytes
}
