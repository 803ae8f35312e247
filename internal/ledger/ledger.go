// Package ledger keeps a SealerNode's slot ledger: which batch holds which layer slot. The
// functions change an in-memory SealerNode; callers persist it with optimistic concurrency
// (an Update carrying the resourceVersion they read), so two operators or two reconciles can
// never both win the same slot.
package ledger

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// BatchKey is how a reservation names its batch: <namespace>/<name>.
func BatchKey(b *sealv1.SealBatch) string { return b.Namespace + "/" + b.Name }

// Holder returns the reservation a batch (by UID) holds on the node, or nil.
func Holder(sn *sealv1.SealerNode, uid types.UID) *sealv1.SlotReservation {
	if sn.Status.Slots == nil {
		return nil
	}
	for i := range sn.Status.Slots.Reservations {
		if sn.Status.Slots.Reservations[i].BatchUID == string(uid) {
			return &sn.Status.Slots.Reservations[i]
		}
	}
	return nil
}

// Reserve records that batch b holds slot on sn. It is idempotent for the same batch and
// slot, and refuses a slot that another batch holds or that does not exist.
func Reserve(sn *sealv1.SealerNode, b *sealv1.SealBatch, slot, hugepages int32, now *metav1.Time) error {
	l := sn.Status.Slots
	if l == nil || slot < 0 || slot >= l.Count {
		return fmt.Errorf("node %s has no slot %d", sn.Name, slot)
	}
	if h := Holder(sn, b.UID); h != nil {
		if h.Slot == slot {
			return nil
		}
		return fmt.Errorf("batch %s already holds slot %d on %s", BatchKey(b), h.Slot, sn.Name)
	}
	for _, r := range l.Reservations {
		if r.Slot == slot {
			return fmt.Errorf("slot %d on %s is held by %s", slot, sn.Name, r.Batch)
		}
	}
	l.Reservations = append(l.Reservations, sealv1.SlotReservation{
		Slot: slot, Batch: BatchKey(b), BatchUID: string(b.UID), Hugepages1Gi: hugepages, Since: now,
	})
	sort.Slice(l.Reservations, func(i, j int) bool { return l.Reservations[i].Slot < l.Reservations[j].Slot })
	return nil
}

// FreeSlot returns the lowest free slot index of a ledger, or -1.
func FreeSlot(l *sealv1.SlotLedger) int32 {
	if l == nil {
		return -1
	}
	held := make(map[int32]bool, len(l.Reservations))
	for _, r := range l.Reservations {
		held[r.Slot] = true
	}
	for i := int32(0); i < l.Count; i++ {
		if !held[i] {
			return i
		}
	}
	return -1
}

// Release drops every reservation of the batch with this UID; it reports whether one existed.
func Release(sn *sealv1.SealerNode, uid types.UID) bool {
	l := sn.Status.Slots
	if l == nil {
		return false
	}
	kept := l.Reservations[:0]
	found := false
	for _, r := range l.Reservations {
		if r.BatchUID == string(uid) {
			found = true
			continue
		}
		kept = append(kept, r)
	}
	l.Reservations = kept
	return found
}

// Geometry sets the ledger's slot size and count from the node's ready layer devices and
// spec, keeping existing reservations. Without spec.slotBytes the space is split evenly into
// one slot per pipeline. Each device gets an equal, 1 MiB-aligned share of every slot.
func Geometry(sn *sealv1.SealerNode) {
	var total int64
	devices := 0
	for _, d := range sn.Status.LayerDevices {
		if d.Ready {
			total += d.CapacityBytes
			devices++
		}
	}
	if sn.Status.Slots == nil {
		sn.Status.Slots = &sealv1.SlotLedger{}
	}
	l := sn.Status.Slots
	if devices == 0 || total == 0 {
		l.SlotBytes, l.Count = 0, 0
		return
	}
	pipelines := int64(sn.Spec.Pipelines)
	if pipelines < 1 {
		pipelines = 1
	}
	slot := total / pipelines
	if sn.Spec.SlotBytes != nil && sn.Spec.SlotBytes.Value() > 0 {
		slot = sn.Spec.SlotBytes.Value()
	}
	perDevice := slot / int64(devices) &^ (1<<20 - 1)
	l.SlotBytes = perDevice * int64(devices)
	if l.SlotBytes == 0 {
		l.Count = 0
		return
	}
	// Slots are equal ranges of every device, so the smallest device bounds the count.
	minDev := int64(-1)
	for _, d := range sn.Status.LayerDevices {
		if d.Ready && (minDev < 0 || d.CapacityBytes < minDev) {
			minDev = d.CapacityBytes
		}
	}
	l.Count = int32(minDev / perDevice)
}

// DeviceOffset is where a slot starts on each layer device, in bytes.
func DeviceOffset(l *sealv1.SlotLedger, devices int, slot int32) int64 {
	if devices == 0 {
		return 0
	}
	return int64(slot) * (l.SlotBytes / int64(devices))
}
