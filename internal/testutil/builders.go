package testutil

import (
	"fmt"
	"hash/fnv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// Ticket is a valid 32-byte ticket for test sectors.
const Ticket = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"

// Batch builds a SealBatch of `sectors` CC sectors of one size for miner f01000; UID is
// derived from the name, and so are the sector numbers (SectorBase(ns, name) + 0, 1, …), so that
// two batches never name one sector (placement holds such a batch back). Options adjust it.
func Batch(ns, name string, size sealv1.SectorSize, sectors int, opts ...func(*sealv1.SealBatch)) *sealv1.SealBatch {
	b := &sealv1.SealBatch{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
		Spec:       sealv1.SealBatchSpec{SectorSize: size, MinerID: "f01000"},
	}
	for i := 0; i < sectors; i++ {
		b.Spec.Sectors = append(b.Spec.Sectors, sealv1.SectorSpec{Number: SectorBase(ns, name) + int64(i), Ticket: Ticket})
	}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Placed records in a batch's status that it holds slot `slot` on node, in phase.
func Placed(node string, slot int32, phase sealv1.SealBatchPhase) func(*sealv1.SealBatch) {
	return func(b *sealv1.SealBatch) {
		b.Status.Node, b.Status.Slot, b.Status.Phase = node, &slot, phase
	}
}

// CPU builds an AMD-like CPU topology: `groups` L3 groups of `cores` physical cores each,
// numbered group by group, with an SMT sibling at +groups×cores when smt is set.
func CPU(groups, cores int, smt bool) *sealv1.CPUTopology {
	total := groups * cores
	t := &sealv1.CPUTopology{Model: fmt.Sprintf("Test EPYC %d-core", total), Vendor: "AuthenticAMD", Family: 25,
		SHANI: true, AVX2: true, Sockets: 1, PhysicalCores: int32(total), LogicalCPUs: int32(total), ThreadsPerCore: 1}
	if smt {
		t.LogicalCPUs, t.ThreadsPerCore = int32(2*total), 2
	}
	for g := 0; g < groups; g++ {
		grp := sealv1.L3Group{ID: int32(g)}
		for c := 0; c < cores; c++ {
			core := sealv1.Core{CPUs: []int32{int32(g*cores + c)}}
			if smt {
				core.CPUs = append(core.CPUs, int32(g*cores+c+total))
			}
			grp.Cores = append(grp.Cores, core)
		}
		t.L3Groups = append(t.L3Groups, grp)
	}
	return t
}

// VerifiedCaches is a SealerNode status's parentCaches with every graph's cache verified.
func VerifiedCaches() []sealv1.ParentCacheStatus {
	var out []sealv1.ParentCacheStatus
	for _, p := range sealv1.AllRegisteredProofs() {
		out = append(out, sealv1.ParentCacheStatus{Proof: p, Verified: true, Bytes: 1})
	}
	return out
}

// SectorBase is the first sector number Batch gives batch ns/name: 100 plus a multiple of 1000
// that differs between names.
func SectorBase(ns, name string) int64 {
	h := fnv.New32a()
	h.Write([]byte(ns + "/" + name))
	return 100 + int64(h.Sum32()%1_000_000)*1000
}

// NumberedFrom numbers the batch's sectors first, first+1, … (tests that name sector numbers).
func NumberedFrom(first int64) func(*sealv1.SealBatch) {
	return func(b *sealv1.SealBatch) {
		for i := range b.Spec.Sectors {
			b.Spec.Sectors[i].Number = first + int64(i)
		}
	}
}
