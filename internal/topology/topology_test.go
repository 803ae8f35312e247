package topology

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealfleet/sealfleet/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Fixtures lists the machine fixture directories under testdata.
func fixtures(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && e.Name() != "gen" && e.Name() != "golden" {
			out = append(out, e.Name())
		}
	}
	if len(out) < 6 {
		t.Fatalf("only %d fixtures", len(out))
	}
	return out
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testutil.Golden(t, filepath.Join("testdata", "golden", name), got, *update, "./internal/topology")
}

func TestDiscoverGolden(t *testing.T) {
	for _, m := range fixtures(t) {
		t.Run(m, func(t *testing.T) {
			topo, err := Discover(filepath.Join("testdata", m))
			if err != nil {
				t.Fatal(err)
			}
			// The CPU list is long and derivable; the golden keeps the groups.
			topo.CPUs = nil
			b, _ := json.MarshalIndent(topo, "", "  ")
			golden(t, m+".json", append(b, '\n'))
		})
	}
}

func TestDiscoverFacts(t *testing.T) {
	cases := []struct {
		m                          string
		sockets, cores, threads    int
		groups, coresPerGroup, nps int
		avx512                     bool
	}{
		{"tr-pro-5975wx", 1, 32, 2, 4, 8, 1, false},
		{"epyc-7313", 1, 16, 2, 4, 4, 1, false},
		{"epyc-9654", 1, 96, 2, 12, 8, 1, true},
		{"epyc-9654-nps4", 1, 96, 2, 12, 8, 4, true},
		{"epyc-7543-2s", 2, 64, 2, 16, 4, 2, false},
		{"epyc-7402p-zen2", 1, 24, 2, 8, 3, 1, false},
		{"xeon-8380", 1, 40, 2, 1, 40, 1, true},
		{"xeon-6338-2s-interleaved", 2, 64, 2, 2, 32, 2, true},
		{"epyc-7313-smt-off", 1, 16, 1, 4, 4, 1, false},
	}
	for _, c := range cases {
		topo, err := Discover(filepath.Join("testdata", c.m))
		if err != nil {
			t.Fatal(err)
		}
		if topo.Sockets != c.sockets || topo.Cores != c.cores || topo.Threads != c.threads ||
			len(topo.L3Groups) != c.groups || len(topo.NUMANodes) != c.nps || topo.CPU.AVX512 != c.avx512 || !topo.CPU.SHANI {
			t.Errorf("%s: sockets %d cores %d threads %d groups %d numa %d avx512 %v sha %v", c.m,
				topo.Sockets, topo.Cores, topo.Threads, len(topo.L3Groups), len(topo.NUMANodes), topo.CPU.AVX512, topo.CPU.SHANI)
		}
		for _, g := range topo.L3Groups {
			if len(g.Cores) != c.coresPerGroup {
				t.Errorf("%s: L3 group %d has %d cores", c.m, g.ID, len(g.Cores))
			}
		}
	}
	// Interleaved numbering: the socket-0 L3 holds the even CPUs.
	topo, _ := Discover(filepath.Join("testdata", "xeon-6338-2s-interleaved"))
	if !strings.HasPrefix(topo.L3Groups[0].CPUs, "0,2,4,") || topo.L3Groups[1].Socket != 1 {
		t.Errorf("interleaved L3 groups: %+v", topo.L3Groups[0].CPUs)
	}
}

func TestDevices(t *testing.T) {
	topo, err := Discover(filepath.Join("testdata", "tr-pro-5975wx"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"0000:01:00.0": "backs the root filesystem; mounted at /, /boot/efi; has partitions nvme0n1p1, nvme0n1p2",
		"0000:02:00.0": "has partitions nvme1n1p1",
		"0000:03:00.0": "",
		"0000:05:00.0": "mounted at /data; held by md0 (RAID/LVM/device-mapper)",
		"0000:06:00.0": "",
	}
	if len(topo.NVMe) != 6 {
		t.Fatalf("%d NVMe controllers", len(topo.NVMe))
	}
	for bdf, why := range want {
		n := topo.FindNVMe(bdf)
		if n == nil || len(n.Namespaces) != 1 {
			t.Fatalf("%s: %+v", bdf, n)
		}
		if got := n.Namespaces[0].InUse(); got != why {
			t.Errorf("%s: in use %q, want %q", bdf, got, why)
		}
	}
	v := topo.FindNVMe("0000:04:00.0")
	if v.Driver != "vfio-pci" || v.IOMMUGroup != "23" || len(v.Namespaces) != 0 {
		t.Errorf("vfio device: %+v", v)
	}
	if c := topo.FindNVMe("0000:03:00.0"); c.Namespaces[0].CapacityBytes != 7501476528*512 || c.Namespaces[0].LBABytes != 4096 || c.Model == "" || c.Driver != "nvme" {
		t.Errorf("clean device: %+v", c)
	}
	if len(topo.GPUs) != 1 || topo.GPUs[0].Model != "NVIDIA GeForce RTX 4090" {
		t.Errorf("GPUs: %+v", topo.GPUs)
	}
	// Status conversion.
	st := topo.CPUStatus()
	if st.PhysicalCores != 32 || len(st.L3Groups) != 4 || len(st.L3Groups[0].Cores[0].CPUs) != 2 {
		t.Errorf("cpu status: %+v", st)
	}
	if n := topo.NUMAStatus(); n[0].Hugepages[0].PageSize != "1Gi" || n[0].Hugepages[1].PageSize != "2Mi" || n[0].Hugepages[0].Free != 36 {
		t.Errorf("numa status: %+v", n)
	}
	if topo.Hugepages1GiFree() != 36 {
		t.Errorf("free 1Gi pages %d", topo.Hugepages1GiFree())
	}
}

// TestLiveSys reads this machine's own /sys and /proc.
func TestLiveSys(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/cpu"); err != nil {
		t.Skip("no /sys on this machine")
	}
	topo, err := Discover("/")
	if err != nil {
		t.Fatal(err)
	}
	if topo.Logical == 0 || topo.Cores == 0 || len(topo.L3Groups) == 0 || len(topo.NUMANodes) == 0 {
		t.Fatalf("live discovery found too little: %+v", topo)
	}
	n := 0
	for _, g := range topo.L3Groups {
		for _, c := range g.Cores {
			n += len(c)
		}
	}
	if n != topo.Logical {
		t.Errorf("L3 groups cover %d of %d CPUs", n, topo.Logical)
	}
	b, _ := json.Marshal(topo.CPUStatus())
	t.Logf("live: %s; %d NVMe, %d GPUs", b, len(topo.NVMe), len(topo.GPUs))
}
