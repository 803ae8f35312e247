// Command gen writes the sysfs/procfs fixture trees under internal/topology/testdata/<machine>.
// The CPU numbering, L3 sharing and NUMA layout follow how Linux enumerates each real part;
// the NVMe and GPU devices are the same invented set on every machine.
//
//	go run ./internal/topology/testdata/gen [-out internal/topology/testdata]
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type machine struct {
	name, model, vendor string
	family, modelNum    int
	flags               string
	sockets             int
	ccxPerSocket        int
	coresPerCCX         int
	numaPerSocket       int
	threads             int
	interleave          bool // CPU numbers alternate between sockets (some Intel BIOSes)
	coreIDStride        int  // sysfs core_id step between cores of a CCX group (gaps on AMD)
	hugepages1G, free1G int  // per NUMA node
}

const (
	amdFlags   = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid aperfmperf pni pclmulqdq monitor ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext perfctr_core cpb hw_pstate ssbd ibpb fsgsbase bmi1 avx2 smep bmi2 cqm rdt_a rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves clzero irperf xsaveerptr rdpru wbnoinvd arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean flushbyasid decodeassists pausefilter pfthreshold umip rdpid overflow_recov succor smca"
	zen3Extra  = " invpcid pku ospke vaes vpclmulqdq rdpid fsrm"
	zen4Extra  = " avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx512_bf16 avx512vbmi avx512_vbmi2 gfni avx512_vnni avx512_bitalg avx512_vpopcntdq"
	intelFlags = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb cat_l3 invpcid_single ssbd mba ibrs ibpb stibp ibrs_enhanced fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm cqm rdt_a avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb intel_pt avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves split_lock_detect wbnoinvd dtherm ida arat pln pts avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg tme avx512_vpopcntdq la57 rdpid fsrm md_clear pconfig flush_l1d arch_capabilities"
)

var machines = []machine{
	{name: "tr-pro-5975wx", model: "AMD Ryzen Threadripper PRO 5975WX 32-Cores", vendor: "AuthenticAMD", family: 25, modelNum: 8,
		flags: amdFlags + zen3Extra, sockets: 1, ccxPerSocket: 4, coresPerCCX: 8, numaPerSocket: 1, threads: 2, coreIDStride: 1, hugepages1G: 36, free1G: 36},
	{name: "epyc-7313", model: "AMD EPYC 7313 16-Core Processor", vendor: "AuthenticAMD", family: 25, modelNum: 1,
		flags: amdFlags + zen3Extra, sockets: 1, ccxPerSocket: 4, coresPerCCX: 4, numaPerSocket: 1, threads: 2, coreIDStride: 2, hugepages1G: 0, free1G: 0},
	{name: "epyc-9654", model: "AMD EPYC 9654 96-Core Processor", vendor: "AuthenticAMD", family: 25, modelNum: 17,
		flags: amdFlags + zen3Extra + zen4Extra, sockets: 1, ccxPerSocket: 12, coresPerCCX: 8, numaPerSocket: 1, threads: 2, coreIDStride: 1, hugepages1G: 72, free1G: 60},
	{name: "epyc-9654-nps4", model: "AMD EPYC 9654 96-Core Processor", vendor: "AuthenticAMD", family: 25, modelNum: 17,
		flags: amdFlags + zen3Extra + zen4Extra, sockets: 1, ccxPerSocket: 12, coresPerCCX: 8, numaPerSocket: 4, threads: 2, coreIDStride: 1, hugepages1G: 18, free1G: 18},
	{name: "epyc-7543-2s", model: "AMD EPYC 7543 32-Core Processor", vendor: "AuthenticAMD", family: 25, modelNum: 1,
		flags: amdFlags + zen3Extra, sockets: 2, ccxPerSocket: 8, coresPerCCX: 4, numaPerSocket: 1, threads: 2, coreIDStride: 2, hugepages1G: 36, free1G: 20},
	{name: "epyc-7402p-zen2", model: "AMD EPYC 7402P 24-Core Processor", vendor: "AuthenticAMD", family: 23, modelNum: 49,
		flags: amdFlags, sockets: 1, ccxPerSocket: 8, coresPerCCX: 3, numaPerSocket: 1, threads: 2, coreIDStride: 1, hugepages1G: 36, free1G: 36},
	{name: "xeon-8380", model: "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", vendor: "GenuineIntel", family: 6, modelNum: 106,
		flags: intelFlags, sockets: 1, ccxPerSocket: 1, coresPerCCX: 40, numaPerSocket: 1, threads: 2, coreIDStride: 1, hugepages1G: 36, free1G: 36},
	{name: "xeon-6338-2s-interleaved", model: "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", vendor: "GenuineIntel", family: 6, modelNum: 106,
		flags: intelFlags, sockets: 2, ccxPerSocket: 1, coresPerCCX: 32, numaPerSocket: 1, threads: 2, interleave: true, coreIDStride: 1, hugepages1G: 18, free1G: 18},
	{name: "epyc-7313-smt-off", model: "AMD EPYC 7313 16-Core Processor", vendor: "AuthenticAMD", family: 25, modelNum: 1,
		flags: amdFlags + zen3Extra, sockets: 1, ccxPerSocket: 4, coresPerCCX: 4, numaPerSocket: 1, threads: 1, coreIDStride: 2, hugepages1G: 36, free1G: 36},
}

type w struct{ root string }

func (w w) file(p, content string) {
	full := filepath.Join(w.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		log.Fatal(err)
	}
}

func (w w) link(p, target string) {
	full := filepath.Join(w.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		log.Fatal(err)
	}
	_ = os.Remove(full)
	if err := os.Symlink(target, full); err != nil {
		log.Fatal(err)
	}
}

func cpulist(c []int) string {
	sort.Ints(c)
	var parts []string
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(c[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", c[i], c[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func gen(out string, m machine) {
	root := filepath.Join(out, m.name)
	if err := os.RemoveAll(root); err != nil {
		log.Fatal(err)
	}
	w := w{root}
	perSocket := m.ccxPerSocket * m.coresPerCCX
	total := m.sockets * perSocket
	nodes := m.sockets * m.numaPerSocket
	type core struct{ socket, ccx, numa, idx int }
	cpuOf := func(g, thread int) int {
		s, i := g/perSocket, g%perSocket
		base := g
		if m.interleave {
			base = i*m.sockets + s
		}
		return base + thread*total
	}
	var cores []core
	ccxCPUs := map[int][]int{}
	nodeCPUs := map[int][]int{}
	for g := 0; g < total; g++ {
		s, i := g/perSocket, g%perSocket
		ccx := s*m.ccxPerSocket + i/m.coresPerCCX
		numa := s*m.numaPerSocket + (i/m.coresPerCCX)*m.numaPerSocket/m.ccxPerSocket
		cores = append(cores, core{s, ccx, numa, i})
		for t := 0; t < m.threads; t++ {
			ccxCPUs[ccx] = append(ccxCPUs[ccx], cpuOf(g, t))
			nodeCPUs[numa] = append(nodeCPUs[numa], cpuOf(g, t))
		}
	}
	ncpu := total * m.threads
	w.file("sys/devices/system/cpu/online", fmt.Sprintf("0-%d\n", ncpu-1))
	w.file("sys/devices/system/cpu/present", fmt.Sprintf("0-%d\n", ncpu-1))
	type info struct{ socket, coreID, core int }
	infos := map[int]info{}
	for g, c := range cores {
		var sib []int
		for t := 0; t < m.threads; t++ {
			sib = append(sib, cpuOf(g, t))
		}
		coreID := (c.idx/m.coresPerCCX)*m.coresPerCCX*m.coreIDStride + c.idx%m.coresPerCCX
		for _, cpu := range sib {
			d := fmt.Sprintf("sys/devices/system/cpu/cpu%d/", cpu)
			w.file(d+"topology/physical_package_id", fmt.Sprintf("%d\n", c.socket))
			w.file(d+"topology/core_id", fmt.Sprintf("%d\n", coreID))
			w.file(d+"topology/thread_siblings_list", cpulist(append([]int(nil), sib...))+"\n")
			w.file(d+"cache/index3/level", "3\n")
			w.file(d+"cache/index3/shared_cpu_list", cpulist(append([]int(nil), ccxCPUs[c.ccx]...))+"\n")
			infos[cpu] = info{c.socket, coreID, g}
		}
	}
	w.file("sys/devices/system/node/online", fmt.Sprintf("0-%d\n", nodes-1))
	for n := 0; n < nodes; n++ {
		d := fmt.Sprintf("sys/devices/system/node/node%d/", n)
		w.file(d+"cpulist", cpulist(nodeCPUs[n])+"\n")
		w.file(d+"hugepages/hugepages-1048576kB/nr_hugepages", fmt.Sprintf("%d\n", m.hugepages1G))
		w.file(d+"hugepages/hugepages-1048576kB/free_hugepages", fmt.Sprintf("%d\n", m.free1G))
		w.file(d+"hugepages/hugepages-2048kB/nr_hugepages", "0\n")
		w.file(d+"hugepages/hugepages-2048kB/free_hugepages", "0\n")
	}
	// /proc/cpuinfo (trimmed to the fields discovery reads) and /proc/stat.
	var ci, st strings.Builder
	fmt.Fprintf(&st, "cpu  %d 0 %d %d 0 0 0 0 0 0\n", ncpu*1000, ncpu*100, ncpu*9000)
	for cpu := 0; cpu < ncpu; cpu++ {
		in := infos[cpu]
		flags := m.flags
		if cpu > 0 {
			flags = "(trimmed: same as processor 0)"
		}
		fmt.Fprintf(&ci, "processor\t: %d\nvendor_id\t: %s\ncpu family\t: %d\nmodel\t\t: %d\nmodel name\t: %s\nphysical id\t: %d\nsiblings\t: %d\ncore id\t\t: %d\ncpu cores\t: %d\nflags\t\t: %s\n\n",
			cpu, m.vendor, m.family, m.modelNum, m.model, in.socket, perSocket*m.threads, in.coreID, perSocket, flags)
		fmt.Fprintf(&st, "cpu%d %d 0 %d %d 0 0 0 0 0 0\n", cpu, 1000+cpu, 100, 9000)
	}
	w.file("proc/cpuinfo", ci.String())
	st.WriteString("intr 0\nctxt 0\nbtime 1700000000\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n")
	w.file("proc/stat", st.String())
	devices(w, nodes)
}

type nvme struct {
	bdf, vendor, device, model, serial, driver, iommu string
	ctrl                                              string
	sizeSectors                                       int64
	lba                                               int
	dev                                               string
	parts                                             [][2]string // name, dev
	holders                                           []string
}

func devices(w w, nodes int) {
	list := []nvme{
		{bdf: "0000:01:00.0", vendor: "0x144d", device: "0xa80a", model: "SAMSUNG MZQL21T9HCJR-00A07", serial: "S64GNA0T100001", driver: "nvme", iommu: "20",
			ctrl: "nvme0", sizeSectors: 3750748848, lba: 4096, dev: "259:0", parts: [][2]string{{"nvme0n1p1", "259:1"}, {"nvme0n1p2", "259:2"}}},
		{bdf: "0000:02:00.0", vendor: "0x1344", device: "0x51c3", model: "Micron_7450_MTFDKCC3T8TFS", serial: "2233E6A10001", driver: "nvme", iommu: "21",
			ctrl: "nvme1", sizeSectors: 7501476528, lba: 512, dev: "259:3", parts: [][2]string{{"nvme1n1p1", "259:4"}}},
		{bdf: "0000:03:00.0", vendor: "0x144d", device: "0xa80a", model: "SAMSUNG MZQL23T8HCLS-00A07", serial: "S64HNE0T200002", driver: "nvme", iommu: "22",
			ctrl: "nvme2", sizeSectors: 7501476528, lba: 4096, dev: "259:5"},
		{bdf: "0000:04:00.0", vendor: "0x144d", device: "0xa80a", driver: "vfio-pci", iommu: "23"},
		{bdf: "0000:05:00.0", vendor: "0x1e0f", device: "0x0007", model: "KCM61VUL3T20", serial: "X0A0A001T0Z1", driver: "nvme", iommu: "24",
			ctrl: "nvme3", sizeSectors: 6251233968, lba: 512, dev: "259:6", holders: []string{"md0"}},
		{bdf: "0000:06:00.0", vendor: "0x144d", device: "0xa80a", model: "SAMSUNG MZQL23T8HCLS-00A07", serial: "S64HNE0T200003", driver: "nvme", iommu: "25",
			ctrl: "nvme4", sizeSectors: 7501476528, lba: 4096, dev: "259:7"},
	}
	for _, d := range []string{"nvme", "vfio-pci", "ice", "nvidia", "snd_hda_intel"} {
		for _, f := range []string{"bind", "unbind", "new_id", "remove_id"} {
			w.file("sys/bus/pci/drivers/"+d+"/"+f, "")
		}
	}
	w.file("sys/bus/pci/drivers_probe", "")
	for i, n := range list {
		d := "sys/bus/pci/devices/" + n.bdf + "/"
		w.file(d+"class", "0x010802\n")
		w.file(d+"vendor", n.vendor+"\n")
		w.file(d+"device", n.device+"\n")
		w.file(d+"numa_node", fmt.Sprintf("%d\n", i%nodes))
		w.file(d+"driver_override", "(null)\n")
		w.link(d+"driver", "../../drivers/"+n.driver)
		w.link(d+"iommu_group", "../../../../kernel/iommu_groups/"+n.iommu)
		w.file("sys/kernel/iommu_groups/"+n.iommu+"/type", "DMA-FQ\n")
		if n.ctrl == "" {
			continue
		}
		c := d + "nvme/" + n.ctrl + "/"
		w.file(c+"model", n.model+"\n")
		w.file(c+"serial", n.serial+"\n")
		ns := c + n.ctrl + "n1/"
		w.file(ns+"size", fmt.Sprintf("%d\n", n.sizeSectors))
		w.file(ns+"dev", n.dev+"\n")
		w.file(ns+"queue/logical_block_size", fmt.Sprintf("%d\n", n.lba))
		for _, h := range n.holders {
			w.file(ns+"holders/"+h, "")
		}
		for k, p := range n.parts {
			w.file(ns+p[0]+"/partition", fmt.Sprintf("%d\n", k+1))
			w.file(ns+p[0]+"/dev", p[1]+"\n")
			w.file(ns+p[0]+"/size", "2097152\n")
		}
	}
	w.file("sys/class/block/md0/dev", "9:0\n")
	// A NIC (ignored), the GPU and its audio function.
	for _, p := range []struct{ bdf, class, vendor, device, driver string }{
		{"0000:41:00.0", "0x020000", "0x8086", "0x1593", "ice"},
		{"0000:c1:00.0", "0x030000", "0x10de", "0x2684", "nvidia"},
		{"0000:c1:00.1", "0x040300", "0x10de", "0x22ba", "snd_hda_intel"},
	} {
		d := "sys/bus/pci/devices/" + p.bdf + "/"
		w.file(d+"class", p.class+"\n")
		w.file(d+"vendor", p.vendor+"\n")
		w.file(d+"device", p.device+"\n")
		w.file(d+"numa_node", fmt.Sprintf("%d\n", nodes-1))
		w.link(d+"driver", "../../drivers/"+p.driver)
	}
	w.file("proc/driver/nvidia/gpus/0000:c1:00.0/information", "Model: \t\t NVIDIA GeForce RTX 4090\nIRQ:   \t\t 180\nGPU UUID: \t GPU-00000000-0000-0000-0000-000000000001\nBus Location: \t 0000:c1:00.0\n")
	w.file("proc/self/mountinfo", strings.Join([]string{
		"22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw",
		"23 22 259:1 / /boot/efi rw,relatime shared:2 - vfat /dev/nvme0n1p1 rw",
		"24 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:3 - proc proc rw",
		"25 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:4 - sysfs sysfs rw",
		"26 22 9:0 / /data rw,relatime shared:5 - xfs /dev/md0 rw",
	}, "\n")+"\n")
	w.file("proc/mounts", "/dev/nvme0n1p2 / ext4 rw,relatime 0 0\n/dev/nvme0n1p1 /boot/efi vfat rw 0 0\nproc /proc proc rw 0 0\nsysfs /sys sysfs rw 0 0\n/dev/md0 /data xfs rw 0 0\n")
	w.file("proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")
}

func main() {
	out := flag.String("out", "internal/topology/testdata", "fixture directory")
	flag.Parse()
	for _, m := range machines {
		gen(*out, m)
		fmt.Println("wrote", filepath.Join(*out, m.name))
	}
}
