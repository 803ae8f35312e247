package plugin

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

func TestQualifyAsksAndWaitsForTheAnswer(t *testing.T) {
	n := sealerNode("n1")
	// Play the operator: whatever the node was asked last is answered when read.
	c := fakeClientWith(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		if sn, ok := obj.(*sealv1.SealerNode); ok {
			if req := sn.Annotations[sealv1.AnnotationQualify]; req != "" {
				sn.Status.Qualification = &sealv1.Qualification{
					Request: req, MeasuredTime: ago(0), DurationMilliseconds: 9500, Tool: "sealer 0.1.0",
					HashKernel: "sha-ni", LabelsPerSecondPerThread: 1_680_000, Hugepages1GiFree: 2, Hugepages1GiMapped: 1,
					MemoryCopyBytesPerSecond: 8_300_000_000,
					LayerDevices: []sealv1.DeviceQualification{{Path: "/dev/nvme1n1", RandomReadIOPS: 612_000, QueueDepth: 64,
						SeqReadBytesPerSecond: 3_100_000_000, WriteSkipped: "no free slot: every slot is held", Direct: true}},
				}
			}
		}
		return nil
	}}, &n)
	out, errOut, code := runEnv(t, realClock(c), "qualify", "n1")
	if code != 0 || !strings.Contains(out, "qualification requested (sealfleet.io/qualify=") {
		t.Fatalf("qualify: exit %d %q %q", code, out, errOut)
	}
	out, errOut, code = runEnv(t, realClock(c), "qualify", "n1", "--wait", "--timeout", "5s")
	for _, want := range []string{"1.7M labels/s per thread (sha-ni)", "/dev/nvme1n1", "612k", "3.1GB/s", "not measured: no free slot", "2 free, 1 mapped"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("qualify --wait: exit %d, %q lacks %q (%q)", code, out, want, errOut)
		}
	}
	_, errOut, code = runEnv(t, realClock(c), "qualify", "nope")
	if code != ExitError || !strings.Contains(errOut, "nope") {
		t.Fatalf("unknown node: exit %d %q", code, errOut)
	}
}

func TestPredictionText(t *testing.T) {
	p := &sealv1.Prediction{PC1Seconds: "90.0", PC2Seconds: "30.0", LabelsPerSecond: 2_600_000, RatePercent: 100, Bottleneck: "hashers",
		FinishTime: &metav1.Time{Time: now}, MeasuredPC1Seconds: "95.2"}
	got := predictionText(p)
	want := "PC1 90.0 s at 2.6M labels/s (100% of the hashing bound, hashers), PC2 30.0 s; done by " + now.UTC().Format("2006-01-02T15:04:05Z07:00") + "; measured PC1 95.2 s, PC2 - s"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}
