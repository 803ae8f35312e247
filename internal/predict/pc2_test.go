package predict

import (
	"math"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/contracts"
)

// The operator's PC2 bounds are the sealer's: every example of contracts/pc2-bounds.json.
func TestPC2IsTheSealers(t *testing.T) {
	ex := contracts.PC2BoundsExamples()
	if len(ex) < 4 {
		t.Fatalf("only %d examples", len(ex))
	}
	for _, e := range ex {
		var size sealv1.SectorSize
		for _, s := range []sealv1.SectorSize{sealv1.SectorSize2KiB, sealv1.SectorSize8MiB, sealv1.SectorSize512MiB, sealv1.SectorSize32GiB, sealv1.SectorSize64GiB} {
			if s.Bytes() == e.SectorSize {
				size = s
			}
		}
		if size == "" {
			t.Fatalf("%s: sector size %d", e.Name, e.SectorSize)
		}
		got := PC2(PC2Input{SectorSize: size, Sectors: e.Sectors, GPU: e.Engine == "gpu", CPUs: e.CPUs, GPUs: e.GPUs,
			ReadBytesPerSecond: e.ReadBytesPerSecond, WriteBytesPerSecond: e.WriteBytesPerSecond})
		if got.ReadBytes != e.ReadBytes || got.WriteBytes != e.WriteBytes {
			t.Errorf("%s: bytes %d/%d, want %d/%d", e.Name, got.ReadBytes, got.WriteBytes, e.ReadBytes, e.WriteBytes)
		}
		for _, c := range []struct {
			what      string
			got, want float64
		}{{"kernel", got.KernelSeconds, e.KernelSeconds}, {"copy", got.CopySeconds, e.CopySeconds},
			{"read", got.ReadSeconds, e.ReadSeconds}, {"write", got.WriteSeconds, e.WriteSeconds}, {"total", got.Seconds, e.Seconds}} {
			if math.Abs(c.got-c.want) > 1e-9*math.Max(c.want, 1) {
				t.Errorf("%s: %s seconds %v, want %v", e.Name, c.what, c.got, c.want)
			}
		}
		if got.Bound != e.Bound {
			t.Errorf("%s: bound %s, want %s", e.Name, got.Bound, e.Bound)
		}
	}
}

// A node's prediction takes PC2's reads and writes from its layer devices' sequential
// bandwidth, summed over the devices, and names the bound; a device without a figure leaves
// that bound out.
func TestPredictBoundsPC2ByTheLayerDevices(t *testing.T) {
	now := metav1.Now()
	qual := func(read, write int64, devices int) *sealv1.Qualification {
		q := &sealv1.Qualification{MeasuredTime: &now, LabelsPerSecondPerThread: 1_000_000}
		for i := 0; i < devices; i++ {
			q.LayerDevices = append(q.LayerDevices, sealv1.DeviceQualification{Path: "/dev/nvme", SeqReadBytesPerSecond: read, SeqWriteBytesPerSecond: write})
		}
		return q
	}
	gpu := Batch{SectorSize: sealv1.SectorSize32GiB, Sectors: 128, GPU: true}
	// Two 2.5 GB/s devices: 48 TB of layers at 5 GB/s outlast the GPU's 8,119 s of hashing.
	p := Predict(gpu, Node{CPUs: 32, Hashers: 16, GPUs: 1, Qual: qual(25e8, 2e9, 2)})
	if p.PC2Bounds.Bound != PC2BoundReads || math.Abs(p.PC2.Seconds()-float64(p.PC2Bounds.ReadBytes)/5e9) > 1e-3 {
		t.Errorf("two devices: %+v", p.PC2Bounds)
	}
	// Eight of them: the kernels bound, 63 s a sector.
	p = Predict(gpu, Node{CPUs: 32, Hashers: 16, GPUs: 1, Qual: qual(3e9, 2e9, 8)})
	if p.PC2Bounds.Bound != PC2BoundKernels || math.Abs(p.PC2.Seconds()/128-63.4) > 0.1 {
		t.Errorf("eight devices: %+v (%v)", p.PC2Bounds, p.PC2)
	}
	if s := Status(p, now.Time); s.PC2Bound != PC2BoundKernels {
		t.Errorf("status: %+v", s)
	}
	// Writes not measured on one device: the writes bound is left out, not guessed.
	q := qual(3e9, 1e6, 8)
	q.LayerDevices[3].SeqWriteBytesPerSecond = 0
	if p := Predict(gpu, Node{CPUs: 32, Hashers: 16, GPUs: 1, Qual: q}); p.PC2Bounds.WriteSeconds != 0 {
		t.Errorf("a device without a write figure: %+v", p.PC2Bounds)
	}
	// A node not qualified: the CPU engine's hashing alone.
	p = Predict(Batch{SectorSize: sealv1.SectorSize8MiB, Sectors: 4}, Node{CPUs: 2, Hashers: 2})
	if p.PC2Bounds.Bound != PC2BoundKernels || p.PC2Bounds.ReadSeconds != 0 {
		t.Errorf("not qualified: %+v", p.PC2Bounds)
	}
}
