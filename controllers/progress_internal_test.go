package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/contracts"
)

// The operator reads the sealer's progress documents as the contract's examples give them
// (contracts/sealer-progress.json, which the sealer's tests check its documents against), and
// every key it reads is in them: a key renamed on either side fails one of the two tests.
func TestProgressContract(t *testing.T) {
	ex := contracts.SealerProgressExamples()
	if len(ex) != 4 {
		t.Fatalf("%d examples, want 4 (PC1 running, PC2 running, PC2 failed, synthetic proofs running)", len(ex))
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
	// SyntheticPoRep's proofs after PC2: one sector after another, the batch stays in PC2.
	if proofs := (ProgressReport{Phase: "proofs", Layer: 2, Layers: 8, Percent: 12.5, ETASeconds: 5950}); !reflect.DeepEqual(got[3], proofs) {
		t.Errorf("synthetic proofs running read as %+v, want %+v", got[3], proofs)
	}
	if moves := got[0].CPUs.toStatus().Moves; !reflect.DeepEqual(moves, []sealv1.CPUMove{{Layout: 5, Granted: 1}}) {
		t.Errorf("cpus.moved became %+v", moves)
	}
	for _, key := range contracts.UnknownKeys(ex, ProgressReport{}) {
		t.Errorf("the operator reads %q, which contracts/sealer-progress.json does not have", key)
	}
}

// logWith is a sealer log holding one results line (the sealer writes it compact).
type logWith []byte

func (l logWith) Read(context.Context, *corev1.Pod) ([]byte, error) {
	var line bytes.Buffer
	if err := json.Compact(&line, l); err != nil {
		return nil, err
	}
	return findLine([]byte("some log\n"+resultsLinePrefix+line.String()+"\nmore log\n"), resultsLinePrefix)
}

// The operator reads the sealer's results as the contract's examples give them
// (contracts/sealer-results.json, which the sealer's tests check its output against): a seal's
// commitments, an update's (its new ones become the sector's, the old comm_r stays), and a
// termination message too large to hold them sends it to the log's results line.
func TestResultsContract(t *testing.T) {
	ex := contracts.SealerResultsExamples()
	if len(ex) != 4 {
		t.Fatalf("%d examples, want 4 (a seal, an update, the overflow message, a sector left out)", len(ex))
	}
	terminated := func(msg []byte) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: string(msg)}},
		}}}}
	}
	ctx := context.Background()
	seal, err := readResults(ctx, nil, terminated(ex[0]))
	if err != nil {
		t.Fatal(err)
	}
	if s := seal.Sectors; len(s) != 1 || s[0].SectorID != 7 || s[0].CommR[:6] != "4c5d6e" || s[0].CommC == "" || s[0].ReplicaID == "" || s[0].CommROld != "" {
		t.Errorf("a seal's results read as %+v", s)
	}
	var b sealv1.SealBatch
	seal.recordMeasured(&b)
	if p := b.Status.Prediction; p == nil || p.MeasuredPC1Seconds != "41.5" || p.MeasuredPC2Seconds != "7.2" {
		t.Errorf("a seal's timings recorded as %+v", p)
	}
	update, err := readResults(ctx, nil, terminated(ex[1]))
	if err != nil {
		t.Fatal(err)
	}
	if s := update.Sectors; len(s) != 1 || s[0].CommR[:6] != "7f8091" || s[0].CommD[:6] != "5d6e7f" || s[0].CommROld != seal.Sectors[0].CommR {
		t.Errorf("an update's results read as %+v", s)
	}
	if st := update.toStatus(); st[0].State != "Updated" || st[0].CommRLast[:6] != "6e7f80" {
		t.Errorf("an update's sector status %+v", st[0])
	}
	fromLog, err := readResults(ctx, logWith(ex[0]), terminated(ex[2]))
	if err != nil || !reflect.DeepEqual(fromLog, seal) {
		t.Errorf("an overflowing termination message: %+v, %v; want the log's %+v", fromLog, err, seal)
	}
	// A sector left out: Failed with its reason, no commitments; the SectorsFailed condition
	// counts and names it.
	left, err := readResults(ctx, nil, terminated(ex[3]))
	if err != nil {
		t.Fatal(err)
	}
	st := left.toStatus()
	if len(st) != 1 || st[0].State != "Failed" || !strings.Contains(st[0].Reason, "does not hold those pieces") || st[0].CommR != "" || st[0].CommRCID != "" {
		t.Errorf("a sector left out reads as %+v", st)
	}
	recordSectorFailures(&b, left)
	if c := meta.FindStatusCondition(b.Status.Conditions, sealv1.CondSectorsFailed); c == nil || c.Reason != string(sealv1.ReasonSectorChecksFailed) ||
		!strings.Contains(c.Message, "1 of 1 sectors") || !strings.Contains(c.Message, "9 (data-mismatch)") {
		t.Errorf("SectorsFailed condition %+v", c)
	}
	// A sector whose outputs failed the audit: Failed, and the condition's reason is Audit.
	audited := Results{Sectors: []SectorResult{left.Sectors[0], {SectorID: 11, Failed: "sector 11: its outputs failed the audit before handoff: a WindowPoSt vanilla proof does not verify", FailureClass: "audit"}}}
	if st := audited.toStatus(); st[1].State != "Failed" || !strings.Contains(st[1].Reason, "audit") {
		t.Errorf("an audited-out sector reads as %+v", st)
	}
	ab := b.DeepCopy()
	ab.Status.Conditions = nil
	recordSectorFailures(ab, &audited)
	if c := meta.FindStatusCondition(ab.Status.Conditions, sealv1.CondSectorsFailed); c == nil || c.Reason != string(sealv1.ReasonAudit) || !strings.Contains(c.Message, "11 (audit)") {
		t.Errorf("SectorsFailed condition with an audit failure %+v", c)
	}
	// An update's sector left out beside one updated: the condition says the others were updated.
	mixed := Results{Sectors: append(append([]SectorResult{}, update.Sectors...), left.Sectors...)}
	if st := mixed.toStatus(); st[0].State != "Updated" || st[1].State != "Failed" {
		t.Errorf("an update with a sector left out reads as %+v", st)
	}
	u := b.DeepCopy()
	u.Spec.Update, u.Status.Conditions = &sealv1.SnapUpdate{}, nil
	recordSectorFailures(u, &mixed)
	if c := meta.FindStatusCondition(u.Status.Conditions, sealv1.CondSectorsFailed); c == nil || !strings.Contains(c.Message, "1 of 2 sectors failed and were left out, the others updated") {
		t.Errorf("an update's SectorsFailed condition %+v", c)
	}
	for _, key := range contracts.UnknownKeys(ex, Results{}) {
		t.Errorf("the operator reads %q, which contracts/sealer-results.json does not have", key)
	}
}
