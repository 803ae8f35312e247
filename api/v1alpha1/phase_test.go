package v1alpha1

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPhaseMachine(t *testing.T) {
	for _, c := range []struct {
		from, to SealBatchPhase
		ok       bool
	}{
		{"", PhasePending, true},
		{PhasePending, PhasePlaced, true},
		{PhasePlaced, PhasePC1, true},
		{PhasePC1, PhasePC2, true},
		{PhasePC2, PhaseCompleted, true},
		{PhasePC2, PhaseWaitingForSeeds, true},
		{PhaseWaitingForSeeds, PhaseC1, true},
		{PhaseWaitingForSeeds, PhaseCompleted, true}, // no seed came
		{PhaseC1, PhaseCompleted, true},
		{PhasePlaced, PhaseUpdating, true},
		{PhaseUpdating, PhaseCompleted, true},
		{PhasePlaced, PhaseCompleted, true}, // the sealer finished before its progress was read
		{PhasePC1, PhaseFailed, true},
		{PhaseC1, PhaseC1, true},
		{PhasePC2, PhasePC1, false}, // a late progress report never moves a batch back
		{PhaseCompleted, PhaseFailed, false},
		{PhaseFailed, PhasePending, false},
		{PhaseCompleted, PhasePC1, false},
		{PhasePending, PhasePC1, false},
		{PhaseUpdating, PhasePC1, false},
		{PhaseC1, PhaseWaitingForSeeds, true},
	} {
		if got := c.from.CanMoveTo(c.to); got != c.ok {
			t.Errorf("%q → %q: allowed %v, want %v", c.from, c.to, got, c.ok)
		}
	}
	for _, p := range Phases {
		if _, ok := phaseNext[p]; !ok && !p.Final() {
			t.Errorf("phase %s is missing from the phase machine", p)
		}
	}
	if !PhaseCompleted.Final() || !PhaseFailed.Final() || PhasePC2.Final() || SealBatchPhase("").Final() {
		t.Error("only Completed and Failed are final")
	}
}

// A placed batch holds the GPUs placement booked (status.gpus, the node's count for All); one
// placed before that field existed, its spec's count.
func TestGPUsHeld(t *testing.T) {
	all, two := intstr.FromString(GPUsAll), intstr.FromInt32(2)
	for _, c := range []struct {
		name   string
		engine PC2Engine
		gpus   *intstr.IntOrString
		status int32
		want   int32
	}{
		{"cpu", PC2EngineCPU, nil, 0, 0},
		{"default", PC2EngineGPU, nil, 0, 1},
		{"two, older status", PC2EngineGPU, &two, 0, 2},
		{"two", PC2EngineGPU, &two, 2, 2},
		{"all, placed on four", PC2EngineGPU, &all, 4, 4},
		{"all, not placed", PC2EngineGPU, &all, 0, 0},
	} {
		b := &SealBatch{Spec: SealBatchSpec{PC2Engine: c.engine, GPUs: c.gpus}, Status: SealBatchStatus{GPUs: c.status}}
		if got := b.GPUsHeld(); got != c.want {
			t.Errorf("%s: %d GPUs held, want %d", c.name, got, c.want)
		}
	}
}
