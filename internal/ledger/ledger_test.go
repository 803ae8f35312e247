package ledger

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

func sn(caps ...int64) *sealv1.SealerNode {
	n := &sealv1.SealerNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	for _, c := range caps {
		n.Status.LayerDevices = append(n.Status.LayerDevices, sealv1.LayerDeviceStatus{CapacityBytes: c, Ready: true})
	}
	return n
}

func bt(name, uid string) *sealv1.SealBatch {
	return &sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + uid)}}
}

func TestGeometry(t *testing.T) {
	const tib = int64(1) << 40
	n := sn(4*tib, 4*tib, 3*tib) // uneven devices: the smallest bounds the slots
	n.Spec.Pipelines = 2
	Geometry(n)
	l := n.Status.Slots
	// one slot per pipeline: 11 TiB / 2 split over 3 devices, 1 MiB aligned.
	perDev := (11 * tib / 2 / 3) &^ (1<<20 - 1)
	if l.SlotBytes != perDev*3 || l.Count != int32(3*tib/perDev) {
		t.Errorf("geometry %+v (perDev %d)", l, perDev)
	}
	q := resource.MustParse("3Ti")
	n.Spec.SlotBytes = &q
	Geometry(n)
	if l.SlotBytes != 3*tib || l.Count != 3 {
		t.Errorf("explicit slot size: %+v", l)
	}
	if got := DeviceOffset(l, 3, 2); got != 2*tib {
		t.Errorf("offset of slot 2 = %d", got)
	}
	n.Status.LayerDevices[0].Ready = false
	n.Status.LayerDevices[1].Ready = false
	n.Status.LayerDevices[2].Ready = false
	Geometry(n)
	if l.Count != 0 {
		t.Errorf("no ready devices must mean no slots: %+v", l)
	}
}

func TestReserveRelease(t *testing.T) {
	n := sn(1 << 40)
	n.Spec.Pipelines = 2
	Geometry(n)
	a, b := bt("a", "1"), bt("b", "2")
	if err := Reserve(n, a, 0, 36, nil); err != nil {
		t.Fatal(err)
	}
	if err := Reserve(n, a, 0, 36, nil); err != nil {
		t.Errorf("reserving the same slot again must be idempotent: %v", err)
	}
	if err := Reserve(n, a, 1, 36, nil); err == nil {
		t.Error("a batch got a second slot")
	}
	if err := Reserve(n, b, 0, 1, nil); err == nil {
		t.Error("slot 0 double-booked")
	}
	if err := Reserve(n, b, 5, 1, nil); err == nil {
		t.Error("a slot beyond the ledger was booked")
	}
	if err := Reserve(n, b, 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	if FreeSlot(n.Status.Slots) != -1 {
		t.Error("full ledger reports a free slot")
	}
	if !Release(n, a.UID) || Release(n, a.UID) {
		t.Error("release must report exactly one removal")
	}
	if FreeSlot(n.Status.Slots) != 0 || Holder(n, b.UID).Slot != 1 {
		t.Errorf("after release: %+v", n.Status.Slots)
	}
}
