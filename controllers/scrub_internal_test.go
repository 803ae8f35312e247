package controllers

import (
	"testing"
	"time"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

func TestScrubBackoff(t *testing.T) {
	for n, want := range map[int32]time.Duration{0: 10 * time.Second, 1: 10 * time.Second, 2: 20 * time.Second, 4: 80 * time.Second, 7: 10 * time.Minute, 40: 10 * time.Minute} {
		if got := scrubBackoff(n); got != want {
			t.Errorf("backoff after %d attempts: %s, want %s", n, got, want)
		}
	}
}

// Only devices the admin's spec names are scrubbed: a path the status alone lists (a node
// agent's word) is left alone, as is a PCI device whose reported path is not a block device.
func TestScrubDevicesComeFromTheSpec(t *testing.T) {
	sn := &sealv1.SealerNode{
		Spec: sealv1.SealerNodeSpec{LayerDevices: []sealv1.LayerDevice{{Path: "/data/layers.img"}, {PCIAddress: "0000:41:00.0"}, {PCIAddress: "0000:42:00.0"}}},
		Status: sealv1.SealerNodeStatus{LayerDevices: []sealv1.LayerDeviceStatus{
			{Path: "/data/layers.img", Ready: true},
			{PCIAddress: "0000:41:00.0", Path: "/dev/nvme1n1", Ready: true},
			{PCIAddress: "0000:42:00.0", Path: "/etc/shadow", Ready: true},
			{Path: "/dev/sda", Ready: true},
			{Path: "/data/not-ready.img"},
		}},
	}
	var got []string
	for _, d := range scrubDevices(sn) {
		got = append(got, d.Path)
	}
	if len(got) != 2 || got[0] != "/data/layers.img" || got[1] != "/dev/nvme1n1" {
		t.Errorf("scrub devices %v, want /data/layers.img and /dev/nvme1n1", got)
	}
	sn.Spec.DeviceMode = sealv1.DeviceModeVFIO
	if needsScrub(sn) {
		t.Error("a vfio node has nothing the kernel can discard")
	}
}

// A change decided for one record never lands on another that took its slot meanwhile.
func TestApplyChangesMatchTheRecord(t *testing.T) {
	dirty := []sealv1.DirtySlot{{Slot: 0, BatchUID: "a"}, {Slot: 1, BatchUID: "b"}, {Slot: 2, BatchUID: "c"}}
	got := applyChanges(dirty, map[int32]slotChange{
		0: {remove: true, next: sealv1.DirtySlot{Slot: 0, BatchUID: "a"}},
		1: {next: sealv1.DirtySlot{Slot: 1, BatchUID: "b", Attempts: 3}},
		2: {remove: true, next: sealv1.DirtySlot{Slot: 2, BatchUID: "other"}},
	})
	if got[0].Slot != -1 || got[1].Attempts != 3 || got[2].Slot != 2 {
		t.Errorf("applied: %+v", got)
	}
	merged := addDirty([]sealv1.DirtySlot{{Slot: 0, OffsetBytes: 100, LengthBytes: 100}}, sealv1.DirtySlot{Slot: 0, OffsetBytes: 50, LengthBytes: 100, BatchUID: "n"})
	if len(merged) != 1 || merged[0].OffsetBytes != 50 || merged[0].LengthBytes != 150 || merged[0].BatchUID != "n" {
		t.Errorf("two ranges under one slot: %+v", merged)
	}
}
