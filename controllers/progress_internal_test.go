package controllers

import (
	"encoding/json"
	"reflect"
	"testing"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/contracts"
)

// The operator reads the sealer's progress documents as the contract's examples give them
// (contracts/sealer-progress.json, which the sealer's tests check its documents against), and
// every key it reads is in them: a key renamed on either side fails one of the two tests.
func TestProgressContract(t *testing.T) {
	ex := contracts.SealerProgressExamples()
	if len(ex) != 3 {
		t.Fatalf("%d examples, want 3 (PC1 running, PC2 running, PC2 failed)", len(ex))
	}
	var got []ProgressReport
	for _, e := range ex {
		var rep ProgressReport
		if err := json.Unmarshal(e, &rep); err != nil {
			t.Fatal(err)
		}
		got = append(got, rep)
	}
	pc1 := ProgressReport{Phase: "pc1", Layer: 2, Layers: 2, Percent: 70, Rate: 1.25e6, ETASeconds: 42.5,
		CPUs: &CPUReport{Granted: "0-3", L3Groups: []string{"0-3"}, Moved: map[string]int{"5": 1}}}
	if !reflect.DeepEqual(got[0], pc1) {
		t.Errorf("PC1 running read as %+v, want %+v", got[0], pc1)
	}
	// No rate yet: eta_seconds is null, read as 0.
	if pc2 := (ProgressReport{Phase: "pc2", Layer: 1, Layers: 1, Percent: 25}); !reflect.DeepEqual(got[1], pc2) {
		t.Errorf("PC2 running read as %+v, want %+v", got[1], pc2)
	}
	if moves := got[0].CPUs.toStatus().Moves; !reflect.DeepEqual(moves, []sealv1.CPUMove{{Layout: 5, Granted: 1}}) {
		t.Errorf("cpus.moved became %+v", moves)
	}
	for _, key := range contracts.UnknownKeys(ex, ProgressReport{}) {
		t.Errorf("the operator reads %q, which contracts/sealer-progress.json does not have", key)
	}
}
