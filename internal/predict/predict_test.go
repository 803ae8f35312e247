package predict

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/contracts"
)

func qual(perThread, iops int64) *sealv1.Qualification {
	return &sealv1.Qualification{
		MeasuredTime:             &metav1.Time{Time: time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)},
		LabelsPerSecondPerThread: perThread,
		LayerDevices:             []sealv1.DeviceQualification{{Path: "/dev/a", RandomReadIOPS: iops / 2}, {Path: "/dev/b", RandomReadIOPS: iops - iops/2}},
	}
}

func TestPredict(t *testing.T) {
	const m = 1_000_000
	for _, tc := range []struct {
		name       string
		b          Batch
		n          Node
		bottleneck string
		percent    int32
		pc1        time.Duration // ±1 s
	}{{
		// 8 MiB × 4 keeps the previous layer in memory: hash bound, 2 layers of 2^18 × 4 labels
		// at 2 × 2M × 0.65 = 2.6M/s.
		name: "in memory", b: Batch{SectorSize: sealv1.SectorSize8MiB, Sectors: 4},
		n: Node{Hashers: 2, CPUs: 2, Qual: qual(2*m, 1000)}, bottleneck: BottleneckHashers, percent: 100, pc1: 806 * time.Millisecond,
	}, {
		// 32 GiB × 64 on 32 hashers at 1.3M/s each: 41.6M labels/s needs 41.6M/64 × 8 = 5.2M
		// reads/s; 520k reads/s feed 10 % of it.
		name: "read bound", b: Batch{SectorSize: sealv1.SectorSize32GiB, Sectors: 64},
		n: Node{Hashers: 32, CPUs: 64, Qual: qual(2*m, 520_000)}, bottleneck: BottleneckReads, percent: 10,
		pc1: secs((1.0/41.6e6 + 10.0/4.16e6) * (1 << 30) * 64),
	}, {
		// Half the previous layer resident halves the reads: 2.6M/s needed, 1.3M/s measured.
		name: "resident share", b: Batch{SectorSize: sealv1.SectorSize32GiB, Sectors: 64, ResidentPercent: 50},
		n: Node{Hashers: 32, CPUs: 64, Qual: qual(2*m, 1_300_000)}, bottleneck: BottleneckReads, percent: 50,
		pc1: secs((1.0/41.6e6 + 10.0/20.8e6) * (1 << 30) * 64),
	}, {
		// Not qualified: model rate, reads unknown, never read bound.
		name: "unqualified", b: Batch{SectorSize: sealv1.SectorSize32GiB, Sectors: 64},
		n: Node{Hashers: 32, CPUs: 64}, bottleneck: BottleneckHashers, percent: 100,
		pc1: secs(11.0 / 32e6 * (1 << 30) * 64),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := Predict(tc.b, tc.n)
			if p.Bottleneck != tc.bottleneck || p.RatePercent != tc.percent {
				t.Fatalf("bottleneck %q at %d%%, want %q at %d%%", p.Bottleneck, p.RatePercent, tc.bottleneck, tc.percent)
			}
			if d := p.PC1 - tc.pc1; d > time.Second || d < -time.Second {
				t.Fatalf("PC1 %v, want %v", p.PC1, tc.pc1)
			}
			if p.PC2 <= 0 || p.Proofs != 0 {
				t.Fatalf("PC2 %v, proofs %v", p.PC2, p.Proofs)
			}
		})
	}
}

func TestSyntheticProofsGrowWithSectorsAndSize(t *testing.T) {
	n := Node{Hashers: 1, CPUs: 2}
	one := Predict(Batch{SectorSize: sealv1.SectorSize8MiB, Sectors: 1, Synthetic: true}, n).Proofs
	c, ok := contracts.SynthCostOf(8 << 20)
	if want := time.Duration(c.CPUSeconds / 2 * float64(time.Second)); !ok || one-want > time.Second || want-one > time.Second {
		t.Fatalf("one 8 MiB sector on 2 CPUs: %v, want half the contract's %.1f CPU-s", one, c.CPUSeconds)
	}
	if four := Predict(Batch{SectorSize: sealv1.SectorSize8MiB, Sectors: 4, Synthetic: true}, n).Proofs; four != 4*one {
		t.Fatalf("4 sectors %v, want 4 × %v (one sector after another)", four, one)
	}
	if big := Predict(Batch{SectorSize: sealv1.SectorSize32GiB, Sectors: 1, Synthetic: true}, n).Proofs; big <= one {
		t.Fatalf("32 GiB %v: the same 2^18 challenges as 8 MiB (%v), each with deeper paths and its tree-r-last rebuilt", big, one)
	}
	if tiny := Predict(Batch{SectorSize: sealv1.SectorSize2KiB, Sectors: 1, Synthetic: true}, n).Proofs; tiny > time.Second {
		t.Fatalf("2 KiB (64 challenges) %v", tiny)
	}
	// Memory: bounded per sector at every size (filecoin-proofs held 19 GB at 8 MiB, 37 GB at 32 GiB).
	for _, size := range []sealv1.SectorSize{sealv1.SectorSize2KiB, sealv1.SectorSize8MiB, sealv1.SectorSize512MiB, sealv1.SectorSize32GiB, sealv1.SectorSize64GiB} {
		if m := SynthProofsMemoryBytes(size); m <= 0 || m > 256<<20 {
			t.Fatalf("%s synthetic proofs %d bytes", size, m)
		}
	}
	if f := SynthProofsFileBytes(sealv1.SectorSize32GiB); f < 11e9 || f > 11.5e9 {
		t.Fatalf("32 GiB proofs file %d bytes", f)
	}
}

func TestReasonNamesTheShortfall(t *testing.T) {
	b := Batch{SectorSize: sealv1.SectorSize32GiB, Sectors: 64}
	p := Predict(b, Node{Hashers: 32, CPUs: 64, Qual: qual(2_000_000, 85_000)})
	got := Reason(b, p, 25)
	for _, want := range []string{"85k reads/s", "64 sectors need 5.2M/s", "PC1 at 1% of the hashing bound", "minRatePercent 25"} {
		if !strings.Contains(got, want) {
			t.Fatalf("reason %q lacks %q", got, want)
		}
	}
	if r := Reason(b, p, 0); r != "" {
		t.Fatalf("minRatePercent 0 refused: %q", r)
	}
	inMem := Batch{SectorSize: sealv1.SectorSize8MiB, Sectors: 4}
	if r := Reason(inMem, Predict(inMem, Node{Hashers: 1, Qual: qual(2_000_000, 1)}), 100); r != "" {
		t.Fatalf("an in-memory batch refused for reads: %q", r)
	}
}

func TestStatusFinishesAfterTheTotal(t *testing.T) {
	start := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	p := Prediction{PC1: 90 * time.Second, PC2: 30 * time.Second, Rate: 2.5e6, RatePercent: 100, Bottleneck: BottleneckHashers}
	st := Status(p, start)
	if st.PC1Seconds != "90.0" || st.PC2Seconds != "30.0" || st.ProofsSeconds != "" || !st.FinishTime.Time.Equal(start.Add(2*time.Minute)) {
		t.Fatalf("status %+v", st)
	}
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
