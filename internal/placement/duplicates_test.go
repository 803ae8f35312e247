package placement

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// A sector (miner, number) is sealed by one batch at a time: a pending batch naming a sector a
// placed, running or completed batch holds, or an older pending batch names, waits with a reason.
func TestDuplicateSectors(t *testing.T) {
	numbers := func(ns ...int64) func(*sealv1.SealBatch) {
		return func(b *sealv1.SealBatch) {
			for i := range b.Spec.Sectors {
				b.Spec.Sectors[i].Number = ns[i]
			}
		}
	}
	phase := func(p sealv1.SealBatchPhase, node string) func(*sealv1.SealBatch) {
		return func(b *sealv1.SealBatch) { b.Status.Phase, b.Status.Node = p, node }
	}
	miner := func(m string) func(*sealv1.SealBatch) { return func(b *sealv1.SealBatch) { b.Spec.MinerID = m } }
	update := func(b *sealv1.SealBatch) { b.Spec.Update = &sealv1.SnapUpdate{} }
	deleted := func(b *sealv1.SealBatch) { now := metav1.Now(); b.DeletionTimestamp = &now }

	all := []*sealv1.SealBatch{
		batch("running", sealv1.SectorSize8MiB, 2, 0, numbers(1, 2), phase(sealv1.PhasePC1, "n1")),
		batch("completed", sealv1.SectorSize8MiB, 1, 0, numbers(3), phase(sealv1.PhaseCompleted, "n1")),
		batch("failed", sealv1.SectorSize8MiB, 1, 0, numbers(4), phase(sealv1.PhaseFailed, "")),
		batch("gone", sealv1.SectorSize8MiB, 1, 0, numbers(5), phase(sealv1.PhasePC1, "n1"), deleted),
		// Pending:
		batch("dup-running", sealv1.SectorSize8MiB, 2, time.Second, numbers(9, 2)),
		batch("dup-completed-t0", sealv1.SectorSize8MiB, 1, time.Second, numbers(3), miner("t01000")),
		batch("after-failed", sealv1.SectorSize8MiB, 1, time.Second, numbers(4)),
		batch("after-deleted", sealv1.SectorSize8MiB, 1, time.Second, numbers(5)),
		batch("first", sealv1.SectorSize8MiB, 1, 2*time.Second, numbers(6)),
		batch("second", sealv1.SectorSize8MiB, 1, 3*time.Second, numbers(6)),
		batch("other-miner", sealv1.SectorSize8MiB, 1, 3*time.Second, numbers(6), miner("f01001")),
		batch("update-of-completed", sealv1.SectorSize8MiB, 1, 3*time.Second, numbers(3), update),
		// dup-running holds no sector (it is a duplicate): 9 is free for this one.
		batch("after-a-duplicate", sealv1.SectorSize8MiB, 1, 4*time.Second, numbers(9)),
	}
	var items []sealv1.SealBatch
	for _, b := range all {
		items = append(items, *b)
	}
	var pending []*sealv1.SealBatch
	for i := range items {
		if items[i].Status.Phase == "" {
			pending = append(pending, &items[i])
		}
	}
	dup := DuplicateSectors(items, pending)
	got := map[string]string{}
	for b, why := range dup {
		got[b.Name] = why
	}
	want := map[string]string{
		"dup-running":      "spec.sectors[1]: batch ns/running (PC1) already seals sector 2 of f01000",
		"dup-completed-t0": "spec.sectors[0]: batch ns/completed (Completed) already seals sector 3 of t01000",
		"second":           "spec.sectors[0]: batch ns/first (Pending) already seals sector 6 of f01000",
	}
	if len(got) != len(want) {
		t.Errorf("duplicates %v, want only %v", got, want)
	}
	for name, w := range want {
		if !strings.HasPrefix(got[name], w) {
			t.Errorf("%s: %q, want %q…", name, got[name], w)
		}
	}
}
