package placement

import (
	"fmt"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// sectorKey is one sector of one miner, sealed or updated (an update of a sector is not a
// second seal of it).
type sectorKey struct {
	miner  string // the actor id's digits: f01000 and t01000 are one miner
	number int64
	update bool
}

func sectorKeys(b *sealv1.SealBatch) []sectorKey {
	miner := b.Spec.MinerID
	if len(miner) > 2 && (miner[0] == 'f' || miner[0] == 't') && miner[1] == '0' {
		miner = miner[2:]
	}
	keys := make([]sectorKey, len(b.Spec.Sectors))
	for i, s := range b.Spec.Sectors {
		keys[i] = sectorKey{miner: miner, number: s.Number, update: b.Spec.IsUpdate()}
	}
	return keys
}

// DuplicateSectors finds the pending batches that name a sector (miner, number) another batch
// already seals, or already updates: one placed, running or completed, or a pending one ahead
// of it in the queue. Two batches sealing one sector write two replicas of which a provider can
// precommit one, and they may overwrite each other's outputs. A deleted or failed batch holds
// no sector; a pending batch that is itself a duplicate holds none either. all is every batch
// in the cluster; pending are those not placed yet.
func DuplicateSectors(all []sealv1.SealBatch, pending []*sealv1.SealBatch) map[*sealv1.SealBatch]string {
	isPending := make(map[*sealv1.SealBatch]bool, len(pending))
	for _, b := range pending {
		isPending[b] = true
	}
	owner := map[sectorKey]*sealv1.SealBatch{}
	for i := range all {
		b := &all[i]
		if b.DeletionTimestamp != nil || b.Status.Phase == sealv1.PhaseFailed || isPending[b] || b.Status.Node == "" && b.Status.Phase != sealv1.PhaseCompleted {
			continue
		}
		for _, k := range sectorKeys(b) {
			if o := owner[k]; o == nil || older(b, o) {
				owner[k] = b
			}
		}
	}
	queue := append([]*sealv1.SealBatch(nil), pending...)
	Queue(queue)
	dup := map[*sealv1.SealBatch]string{}
	for _, b := range queue {
		keys := sectorKeys(b)
		for i, k := range keys {
			if o := owner[k]; o != nil && o != b {
				what := "seals"
				if k.update {
					what = "updates"
				}
				phase := o.Status.Phase
				if phase == "" {
					phase = sealv1.PhasePending
				}
				dup[b] = fmt.Sprintf("spec.sectors[%d]: batch %s/%s (%s) already %s sector %d of %s: one batch %s a sector at a time; delete one of them",
					i, o.Namespace, o.Name, phase, what, k.number, b.Spec.MinerID, what)
				break
			}
		}
		if dup[b] == "" {
			for _, k := range keys {
				owner[k] = b
			}
		}
	}
	return dup
}

// older: created first (then by namespace and name), the queue's order among equals.
func older(a, b *sealv1.SealBatch) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// SealingBatch returns the live batch among all that seals sector number of minerID (f0… and
// t0… are one miner), or nil: what a new order for that sector would duplicate.
func SealingBatch(all []sealv1.SealBatch, minerID string, number int64) *sealv1.SealBatch {
	probe := sealv1.SealBatch{Spec: sealv1.SealBatchSpec{MinerID: minerID, Sectors: []sealv1.SectorSpec{{Number: number}}}}
	want := sectorKeys(&probe)[0]
	for i := range all {
		b := &all[i]
		if b.DeletionTimestamp != nil || b.Status.Phase == sealv1.PhaseFailed {
			continue
		}
		for _, k := range sectorKeys(b) {
			if k == want {
				return b
			}
		}
	}
	return nil
}
