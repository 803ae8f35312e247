package nodeprep

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealfleet/sealfleet/internal/testutil"

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
	// Blank device nodes for the fixture's namespaces: the signature probe opens every
	// namespace it would prepare.
	testutil.BlankDevices(t, root, topo.NamespaceNames()...)
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
	// An otherwise clean device that was a member of an md array (metadata 1.0 sits at the
	// end of the device, where a probe of the first sectors never looks).
	mdImage(t, filepath.Join(root, "dev", "nvme4n1"), "1.0")
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
		"0000:06:00.0": "linux_raid_member (raid, 1.0) signature",
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

// mdImage writes a sparse 64 MiB image carrying an md superblock of the given metadata
// version where mdadm puts it: 0.90 in the last 64 KiB-aligned 64 KiB, 1.0 8 KiB from the end,
// 1.1 at the start, 1.2 at 4 KiB.
func mdImage(t *testing.T, path, version string) {
	t.Helper()
	const size = 64 << 20
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	v1 := func(sector int64) []byte { // struct mdp_superblock_1 with 4 device roles
		b := make([]byte, 256+2*4)
		le := binary.LittleEndian
		le.PutUint32(b[0:], 0xa92b4efc)
		le.PutUint32(b[4:], 1)
		for i := range 16 {
			b[16+i] = byte(i + 1) // set uuid
		}
		copy(b[32:], "host:md0")
		le.PutUint32(b[72:], 1) // raid1
		le.PutUint32(b[92:], 2) // raid disks
		le.PutUint64(b[128:], 2048)
		le.PutUint64(b[136:], 1000)
		le.PutUint64(b[144:], uint64(sector)) // where the superblock is, in sectors
		le.PutUint32(b[220:], 4)              // max_dev
		var sum uint64
		for i := 0; i+4 <= len(b); i += 4 {
			sum += uint64(le.Uint32(b[i:]))
		}
		le.PutUint32(b[216:], uint32(sum&0xffffffff+sum>>32))
		return b
	}
	var off int64
	var sb []byte
	switch version {
	case "0.90":
		off = size&^(64<<10-1) - 64<<10
		sb = make([]byte, 4096)
		binary.LittleEndian.PutUint32(sb[0:], 0xa92b4efc)
		binary.LittleEndian.PutUint32(sb[8:], 90)
	case "1.0":
		off = (size>>9 - 16) &^ 7 << 9
		sb = v1(off >> 9)
	case "1.1":
		sb = v1(0)
	case "1.2":
		off = 4096
		sb = v1(8)
	}
	if _, err := f.WriteAt(sb, off); err != nil {
		t.Fatal(err)
	}
}

// TestProbe: util-linux blkid finds md members of every metadata version (the hand-written
// probe it replaced missed 0.90 and 1.0), filesystems and swap; a blank device is blank; a
// device that cannot be opened or probed is an error, so it is never prepared.
func TestProbe(t *testing.T) {
	if _, err := Probe(os.DevNull); err != nil && strings.Contains(err.Error(), "not found") {
		t.Skip("blkid (util-linux) is not installed")
	}
	dir := t.TempDir()
	for _, v := range []string{"0.90", "1.0", "1.1", "1.2"} {
		p := filepath.Join(dir, "md"+v)
		mdImage(t, p, v)
		if got, err := Probe(p); err != nil || !strings.HasPrefix(got, "linux_raid_member (raid, "+v) {
			t.Errorf("md %s: %q, %v", v, got, err)
		}
	}
	blank := filepath.Join(dir, "blank")
	if err := os.WriteFile(blank, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Probe(blank); got != "" || err != nil {
		t.Errorf("blank device: %q, %v", got, err)
	}
	for tool, want := range map[string]string{"mkswap": "swap (other", "mkfs.ext4": "ext4 (filesystem"} {
		bin, err := exec.LookPath(tool)
		if err != nil {
			if bin, err = exec.LookPath("/usr/sbin/" + tool); err != nil {
				t.Logf("%s not installed: not probed", tool)
				continue
			}
		}
		img := filepath.Join(dir, tool)
		if err := os.WriteFile(img, make([]byte, 8<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, "-q", img).CombinedOutput(); err != nil {
			if out2, err2 := exec.Command(bin, img).CombinedOutput(); err2 != nil {
				t.Fatalf("%s: %v %s %s", tool, err2, out, out2)
			}
		}
		if got, err := Probe(img); err != nil || !strings.HasPrefix(got, want) {
			t.Errorf("%s image: %q, %v", tool, got, err)
		}
	}
	if _, err := Probe(filepath.Join(dir, "missing")); err == nil {
		t.Error("a device that cannot be opened probed as blank")
	}
	// Without blkid the agent cannot tell: the device is refused, not prepared.
	saved := blkidPaths
	blkidPaths = []string{filepath.Join(dir, "no-blkid")}
	defer func() { blkidPaths = saved }()
	if _, err := Probe(blank); err == nil || !strings.Contains(err.Error(), "blkid (util-linux) not found") {
		t.Errorf("no blkid: %v", err)
	}
}
