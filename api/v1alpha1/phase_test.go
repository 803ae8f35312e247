package v1alpha1

import "testing"

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
