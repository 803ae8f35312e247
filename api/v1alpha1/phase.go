package v1alpha1

// Phases lists every SealBatch phase in the order a batch goes through them.
var Phases = []SealBatchPhase{
	PhasePending, PhasePlaced, PhasePC1, PhasePC2, PhaseWaitingForSeeds, PhaseC1, PhaseUpdating,
	PhaseCompleted, PhaseFailed,
}

// phaseNext is the phase machine: the phases a batch may move to from each phase (staying
// is always allowed). A sealer that finishes before its progress was read skips the phases
// in between (Placed → Completed); a FromSlot batch whose seeds never came completes without
// C1, and one whose seeds come apart goes back from C1 to WaitingForSeeds after each run;
// any phase short of the end may fail. Completed and Failed are final.
var phaseNext = map[SealBatchPhase][]SealBatchPhase{
	"":                   {PhasePending, PhasePlaced, PhaseFailed},
	PhasePending:         {PhasePlaced, PhaseFailed},
	PhasePlaced:          {PhasePC1, PhasePC2, PhaseUpdating, PhaseWaitingForSeeds, PhaseCompleted, PhaseFailed},
	PhasePC1:             {PhasePC2, PhaseWaitingForSeeds, PhaseCompleted, PhaseFailed},
	PhasePC2:             {PhaseWaitingForSeeds, PhaseCompleted, PhaseFailed},
	PhaseWaitingForSeeds: {PhaseC1, PhaseCompleted, PhaseFailed},
	PhaseC1:              {PhaseWaitingForSeeds, PhaseCompleted, PhaseFailed},
	PhaseUpdating:        {PhaseCompleted, PhaseFailed},
}

// CanMoveTo says whether the phase machine allows a batch in phase p to move to next.
func (p SealBatchPhase) CanMoveTo(next SealBatchPhase) bool {
	if p == next {
		return true
	}
	for _, n := range phaseNext[p] {
		if n == next {
			return true
		}
	}
	return false
}

// Final says whether no phase follows p (Completed, Failed).
func (p SealBatchPhase) Final() bool { return p != "" && len(phaseNext[p]) == 0 }
