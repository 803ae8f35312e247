package nodeprep

import (
	"github.com/sealfleet/sealfleet/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/topology"
)

func setup(t *testing.T) (string, *topology.Topology) {
	root := testutil.CopyTree(t, "../topology/testdata/tr-pro-5975wx")
	topo, err := topology.Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, topo
}

func read(t *testing.T, root, rel string) string {
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func pci(bdfs ...string) []v1alpha1.LayerDevice {
	var out []v1alpha1.LayerDevice
	for _, b := range bdfs {
		out = append(out, v1alpha1.LayerDevice{PCIAddress: b})
	}
	return out
}

func byAddr(r *Result, bdf string) v1alpha1.LayerDeviceStatus {
	for _, d := range r.Devices {
		if d.PCIAddress == bdf {
			return d
		}
	}
	return v1alpha1.LayerDeviceStatus{}
}

func TestRefusals(t *testing.T) {
	root, topo := setup(t)
	// A signature on an otherwise clean device: LVM2 label at sector 1.
	img := make([]byte, 8192)
	copy(img[512:], "LABELONE")
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "dev", "nvme4n1"), img, 0o644); err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.SealerNodeSpec{DeviceMode: v1alpha1.DeviceModeVFIO, LayerDevices: append(pci(
		"0000:01:00.0", "0000:02:00.0", "0000:05:00.0", "0000:06:00.0", "0000:c1:00.0", "0000:09:00.0"),
		v1alpha1.LayerDevice{Path: "/dev/sda"})}
	res, err := Prepare(root, topo, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"0000:01:00.0": "backs the root filesystem",
		"0000:02:00.0": "has partitions",
		"0000:05:00.0": "held by md0",
		"0000:06:00.0": "LVM2 physical volume",
		"0000:c1:00.0": "not an NVMe controller",
		"0000:09:00.0": "no PCI device",
	}
	for bdf, why := range want {
		d := byAddr(res, bdf)
		if d.Ready || !strings.Contains(d.Reason, why) {
			t.Errorf("%s: ready=%v reason %q, want %q", bdf, d.Ready, d.Reason, why)
		}
	}
	if d := res.Devices[len(res.Devices)-1]; d.Ready || !strings.Contains(d.Reason, "not an NVMe namespace") {
		t.Errorf("/dev/sda: %+v", d)
	}
	if len(res.Actions) != 0 {
		t.Errorf("refused devices were touched: %+v", res.Actions)
	}
	// Not on the allow-list: never touched even if asked directly.
	p := &prep{root: root, topo: topo, res: &Result{}}
	if d := p.pciDevice("0000:03:00.0", v1alpha1.DeviceModeVFIO, pci("0000:06:00.0")); d.Ready || !strings.Contains(d.Reason, "allow-list") {
		t.Errorf("off-list device: %+v", d)
	}
	if len(p.res.Actions) != 0 {
		t.Errorf("off-list device touched: %+v", p.res.Actions)
	}
}

func TestBindVFIOIdempotent(t *testing.T) {
	root, topo := setup(t)
	spec := v1alpha1.SealerNodeSpec{DeviceMode: v1alpha1.DeviceModeVFIO, LayerDevices: pci("0000:03:00.0", "0000:04:00.0")}

	// Dry run: plans the writes, changes nothing.
	res, err := Prepare(root, topo, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Actions) != 3 || read(t, root, "sys/bus/pci/devices/0000:03:00.0/driver_override") != "(null)\n" {
		t.Fatalf("dry run: %+v", res.Actions)
	}
	if d := byAddr(res, "0000:03:00.0"); d.Ready {
		t.Errorf("dry run reports ready: %+v", d)
	}

	res, err = Prepare(root, topo, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, root, "sys/bus/pci/devices/0000:03:00.0/driver_override"); got != "vfio-pci" {
		t.Errorf("driver_override = %q", got)
	}
	if got := read(t, root, "sys/bus/pci/drivers/nvme/unbind"); got != "0000:03:00.0" {
		t.Errorf("unbind = %q", got)
	}
	if got := read(t, root, "sys/bus/pci/drivers_probe"); got != "0000:03:00.0" {
		t.Errorf("drivers_probe = %q", got)
	}
	for _, bdf := range []string{"0000:03:00.0", "0000:04:00.0"} {
		if d := byAddr(res, bdf); !d.Ready || d.IOMMUGroup == "" {
			t.Errorf("%s: %+v", bdf, d)
		}
	}
	if d := byAddr(res, "0000:03:00.0"); d.CapacityBytes != 7501476528*512 {
		t.Errorf("capacity %d", d.CapacityBytes)
	}

	// The kernel would now show the device on vfio-pci without namespaces.
	link := filepath.Join(root, "sys/bus/pci/devices/0000:03:00.0/driver")
	_ = os.Remove(link)
	if err := os.Symlink("../../drivers/vfio-pci", link); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(filepath.Join(root, "sys/bus/pci/devices/0000:03:00.0/nvme"))
	topo2, _ := topology.Discover(root)
	res, err = Prepare(root, topo2, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Actions) != 0 {
		t.Errorf("second run wrote: %+v", res.Actions)
	}
	if len(res.DevicesNotReady()) != 0 {
		t.Errorf("not ready: %+v", res.DevicesNotReady())
	}
}

func TestKernelMode(t *testing.T) {
	root, topo := setup(t)
	spec := v1alpha1.SealerNodeSpec{LayerDevices: pci("0000:03:00.0", "0000:04:00.0")}
	res, err := Prepare(root, topo, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := byAddr(res, "0000:03:00.0"); !d.Ready || d.Path != "/dev/nvme2n1" {
		t.Errorf("kernel device: %+v", d)
	}
	// The vfio-bound one goes back to nvme: override cleared, unbind from vfio-pci, probe.
	if got := read(t, root, "sys/bus/pci/drivers/vfio-pci/unbind"); got != "0000:04:00.0" {
		t.Errorf("vfio unbind = %q", got)
	}
	if d := byAddr(res, "0000:04:00.0"); d.Ready || !strings.Contains(d.Reason, "next scan") {
		t.Errorf("returned device: %+v", d)
	}
	// A regular file with a capacity (tests, tmpfs).
	q := resource.MustParse("1Gi")
	res, _ = Prepare(root, topo, v1alpha1.SealerNodeSpec{LayerDevices: []v1alpha1.LayerDevice{{Path: "/var/lib/sealfleet/layers.img", Capacity: &q}, {Path: "/var/lib/none"}}}, false)
	if !res.Devices[0].Ready || res.Devices[0].CapacityBytes != 1<<30 || res.Devices[1].Ready {
		t.Errorf("files: %+v", res.Devices)
	}
}

func TestHugepages(t *testing.T) {
	root, topo := setup(t)
	spec := v1alpha1.SealerNodeSpec{Hugepages1GiPerNUMANode: 40}
	res, err := Prepare(root, topo, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	rel := "sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages"
	if got := read(t, root, rel); got != "40" {
		t.Errorf("nr_hugepages = %q", got)
	}
	if res.HugepagesShort() || res.Hugepages[0].Total != 40 {
		t.Errorf("hugepages: %+v", res.Hugepages)
	}
	// Idempotent, and never lowers the pool.
	topo, _ = topology.Discover(root)
	res, _ = Prepare(root, topo, v1alpha1.SealerNodeSpec{Hugepages1GiPerNUMANode: 10}, false)
	if len(res.Actions) != 0 || read(t, root, rel) != "40" {
		t.Errorf("lowered or rewrote: %+v", res.Actions)
	}
	// A kernel that cannot allocate (simulated: the file refuses the write) is Short.
	if err := os.Chmod(filepath.Join(root, rel), 0o444); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 { // root ignores file modes
		res, err = Prepare(root, topo, v1alpha1.SealerNodeSpec{Hugepages1GiPerNUMANode: 64}, false)
		if err == nil || !res.HugepagesShort() {
			t.Errorf("short not reported: %+v %v", res.Hugepages, err)
		}
	}
}

func TestSignatures(t *testing.T) {
	mk := func(off int, s string) []byte {
		b := make([]byte, probeBytes)
		copy(b[off:], s)
		return b
	}
	mbr := make([]byte, 1024)
	mbr[446+4] = 0x83
	mbr[510], mbr[511] = 0x55, 0xaa
	cases := map[string][]byte{
		"GPT partition table":  mk(512, "EFI PART"),
		"LVM2 physical volume": mk(512, "LABELONE"),
		"Linux RAID (md)":      mk(4096, "\xfc\x4e\x2b\xa9"),
		"XFS":                  mk(0, "XFSB"),
		"ext2/3/4":             mk(1080, "\x53\xef"),
		"btrfs":                mk(65600, "_BHRfS_M"),
		"swap":                 mk(4086, "SWAPSPACE2"),
		"MBR partition table":  mbr,
		"":                     make([]byte, probeBytes),
	}
	for want, img := range cases {
		if got := Signature(img); got != want {
			t.Errorf("Signature = %q, want %q", got, want)
		}
	}
}
