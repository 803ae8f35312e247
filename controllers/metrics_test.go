package controllers

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// A batch stuck in PC1 causes no scheduling cycle; its phase age must still grow per scrape.
func TestPhaseSecondsGrowWithoutCycles(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)
	now := t0.Add(90 * time.Second)
	clock := &phaseClock{desc: metricBatchPhaseSeconds.desc, now: func() time.Time { return now }}
	saved := metricBatchPhaseSeconds
	metricBatchPhaseSeconds = clock
	defer func() { metricBatchPhaseSeconds = saved }()

	running := sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b1", CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec:   sealv1.SealBatchSpec{SectorSize: "32GiB", Sectors: make([]sealv1.SectorSpec, 2)},
		Status: sealv1.SealBatchStatus{Phase: sealv1.PhasePC1, Node: "n1", StartTime: &metav1.Time{Time: t0}}}
	done := running
	done.Name, done.Status.Phase = "b2", sealv1.PhaseCompleted
	exportBatchMetrics([]sealv1.SealBatch{running, done})

	want := func(v string) string {
		return `# HELP sealfleet_batch_phase_seconds Seconds a batch has spent in its current phase.
# TYPE sealfleet_batch_phase_seconds gauge
sealfleet_batch_phase_seconds{batch="b1",namespace="ns",node="n1",phase="PC1",sector_size="32GiB",sectors="2"} ` + v + "\n"
	}
	if err := testutil.CollectAndCompare(clock, strings.NewReader(want("90"))); err != nil {
		t.Fatal(err)
	}
	now = now.Add(10 * time.Minute)
	if err := testutil.CollectAndCompare(clock, strings.NewReader(want("690"))); err != nil {
		t.Fatal(err)
	}
}
