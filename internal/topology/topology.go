// Package topology discovers a machine's CPU, NUMA, hugepage, NVMe and GPU inventory from a
// filesystem root holding sys/ and proc/ (the host's "/" in production, a fixture tree in
// tests). It only reads; internal/nodeprep changes the machine.
package topology

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sealfleet/sealfleet/internal/cpuset"
)

// Topology is everything discovery found.
type Topology struct {
	CPU       CPUInfo    `json:"cpu"`
	Sockets   int        `json:"sockets"`
	Cores     int        `json:"physicalCores"`
	Logical   int        `json:"logicalCPUs"`
	Threads   int        `json:"threadsPerCore"`
	CPUs      []CPU      `json:"cpus"`
	L3Groups  []L3Group  `json:"l3Groups"`
	NUMANodes []NUMANode `json:"numaNodes"`
	NVMe      []NVMe     `json:"nvme"`
	GPUs      []GPU      `json:"gpus"`
}

// CPUInfo is what /proc/cpuinfo says about the (first) processor.
type CPUInfo struct {
	Model  string `json:"model"`
	Vendor string `json:"vendor"`
	Family int    `json:"family"`
	SHANI  bool   `json:"shaNI"`
	AVX2   bool   `json:"avx2"`
	AVX512 bool   `json:"avx512f"`
}

// CPU is one online logical CPU.
type CPU struct {
	ID     int `json:"id"`
	Socket int `json:"socket"`
	// Core is an index into the machine's physical cores (not the sysfs core_id, which
	// repeats per socket and has gaps).
	Core int `json:"core"`
	NUMA int `json:"numa"`
	L3   int `json:"l3"`
}

// L3Group is a set of cores sharing one L3 cache.
type L3Group struct {
	ID     int     `json:"id"`
	Socket int     `json:"socket"`
	NUMA   int     `json:"numa"`
	CPUs   string  `json:"cpus"`
	Cores  [][]int `json:"cores"`
}

// NUMANode is one NUMA node.
type NUMANode struct {
	ID        int         `json:"id"`
	CPUs      string      `json:"cpus"`
	Hugepages []Hugepages `json:"hugepages,omitempty"`
}

// Hugepages counts pages of one size on one NUMA node.
type Hugepages struct {
	SizeKB int64 `json:"sizeKB"`
	Total  int64 `json:"total"`
	Free   int64 `json:"free"`
}

// NVMe is one NVMe controller (PCI class 0x010802).
type NVMe struct {
	BDF        string      `json:"bdf"`
	Vendor     string      `json:"vendor"`
	Device     string      `json:"device"`
	Model      string      `json:"model,omitempty"`
	Serial     string      `json:"serial,omitempty"`
	Driver     string      `json:"driver,omitempty"`
	IOMMUGroup string      `json:"iommuGroup,omitempty"`
	NUMA       int         `json:"numa"`
	Namespaces []Namespace `json:"namespaces,omitempty"`
}

// Namespace is one block device of a controller on the kernel driver.
type Namespace struct {
	Name          string   `json:"name"`
	Dev           string   `json:"dev,omitempty"`
	CapacityBytes int64    `json:"capacityBytes"`
	LBABytes      int      `json:"lbaBytes"`
	Partitions    []string `json:"partitions,omitempty"`
	Holders       []string `json:"holders,omitempty"`
	Mounts        []string `json:"mounts,omitempty"`
	Swap          bool     `json:"swap,omitempty"`
	RootFS        bool     `json:"rootFS,omitempty"`
}

// InUse says why the namespace is not free for layers, or "" when it is free as far as sysfs
// and the mount table can tell (on-disk signatures are checked by nodeprep).
func (n Namespace) InUse() string {
	var why []string
	if n.RootFS {
		why = append(why, "backs the root filesystem")
	}
	if len(n.Mounts) > 0 {
		why = append(why, "mounted at "+strings.Join(n.Mounts, ", "))
	}
	if n.Swap {
		why = append(why, "used as swap")
	}
	if len(n.Holders) > 0 {
		why = append(why, "held by "+strings.Join(n.Holders, ", ")+" (RAID/LVM/device-mapper)")
	}
	if len(n.Partitions) > 0 {
		why = append(why, "has partitions "+strings.Join(n.Partitions, ", "))
	}
	return strings.Join(why, "; ")
}

// GPU is one NVIDIA display/3D PCI function.
type GPU struct {
	BDF    string `json:"bdf"`
	Vendor string `json:"vendor"`
	Device string `json:"device"`
	Model  string `json:"model,omitempty"`
	Driver string `json:"driver,omitempty"`
	NUMA   int    `json:"numa"`
}

// NVMeClass is the PCI class of an NVMe controller.
const NVMeClass = "0x010802"

// NVIDIAVendor is NVIDIA's PCI vendor id.
const NVIDIAVendor = "0x10de"

type reader struct{ root string }

func (r reader) path(p ...string) string { return filepath.Join(append([]string{r.root}, p...)...) }

func (r reader) str(p ...string) string {
	b, err := os.ReadFile(r.path(p...))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (r reader) int(def int, p ...string) int {
	v, err := strconv.Atoi(r.str(p...))
	if err != nil {
		return def
	}
	return v
}

func (r reader) link(p ...string) string {
	l, err := os.Readlink(r.path(p...))
	if err != nil {
		return ""
	}
	return filepath.Base(l)
}

func (r reader) dir(p ...string) []string {
	ents, err := os.ReadDir(r.path(p...))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// Discover reads root/sys and root/proc.
func Discover(root string) (*Topology, error) {
	r := reader{root: root}
	t := &Topology{CPUs: []CPU{}, L3Groups: []L3Group{}, NUMANodes: []NUMANode{}, NVMe: []NVMe{}, GPUs: []GPU{}}
	var err error
	if t.CPU, err = r.cpuinfo(); err != nil {
		return nil, err
	}
	if err := r.cpus(t); err != nil {
		return nil, err
	}
	r.pci(t)
	return t, nil
}

func (r reader) cpuinfo() (CPUInfo, error) {
	f, err := os.Open(r.path("proc", "cpuinfo"))
	if err != nil {
		return CPUInfo{}, fmt.Errorf("reading cpuinfo: %w", err)
	}
	defer f.Close()
	var ci CPUInfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" && ci.Vendor != "" {
			break // first processor block is enough: all sockets of a machine match
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "vendor_id":
			ci.Vendor = v
		case "cpu family":
			ci.Family, _ = strconv.Atoi(v)
		case "model name":
			ci.Model = v
		case "flags":
			for _, fl := range strings.Fields(v) {
				switch fl {
				case "sha_ni":
					ci.SHANI = true
				case "avx2":
					ci.AVX2 = true
				case "avx512f":
					ci.AVX512 = true
				}
			}
		}
	}
	return ci, sc.Err()
}

func (r reader) cpus(t *Topology) error {
	base := []string{"sys", "devices", "system", "cpu"}
	online, err := cpuset.Parse(r.str(append(base, "online")...))
	if err != nil || len(online) == 0 {
		for _, n := range r.dir(base...) {
			if id, err := strconv.Atoi(strings.TrimPrefix(n, "cpu")); err == nil && strings.HasPrefix(n, "cpu") {
				online = append(online, id)
			}
		}
		sort.Ints(online)
	}
	if len(online) == 0 {
		return fmt.Errorf("no CPUs under %s", r.path(base...))
	}
	// NUMA nodes.
	numaOf := map[int]int{}
	nodeBase := []string{"sys", "devices", "system", "node"}
	for _, n := range r.dir(nodeBase...) {
		id, err := strconv.Atoi(strings.TrimPrefix(n, "node"))
		if err != nil || !strings.HasPrefix(n, "node") {
			continue
		}
		cpus, _ := cpuset.Parse(r.str(append(nodeBase, n, "cpulist")...))
		for _, c := range cpus {
			numaOf[c] = id
		}
		node := NUMANode{ID: id, CPUs: cpuset.Format(cpus)}
		for _, hp := range r.dir(append(nodeBase, n, "hugepages")...) {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(hp, "hugepages-"), "kB"), 10, 64)
			if err != nil {
				continue
			}
			p := append(nodeBase, n, "hugepages", hp)
			node.Hugepages = append(node.Hugepages, Hugepages{
				SizeKB: kb,
				Total:  int64(r.int(0, append(p, "nr_hugepages")...)),
				Free:   int64(r.int(0, append(p, "free_hugepages")...)),
			})
		}
		sort.Slice(node.Hugepages, func(i, j int) bool { return node.Hugepages[i].SizeKB > node.Hugepages[j].SizeKB })
		t.NUMANodes = append(t.NUMANodes, node)
	}
	sort.Slice(t.NUMANodes, func(i, j int) bool { return t.NUMANodes[i].ID < t.NUMANodes[j].ID })
	if len(t.NUMANodes) == 0 {
		t.NUMANodes = []NUMANode{{ID: 0, CPUs: cpuset.Format(online)}}
	}

	coreKey := map[string]int{} // thread-siblings list -> core index
	l3Key := map[string][]int{} // shared list -> cpus
	sockets := map[int]bool{}
	type raw struct {
		cpu           CPU
		siblings, l3s string
	}
	var raws []raw
	for _, c := range online {
		p := append(append([]string{}, base...), fmt.Sprintf("cpu%d", c))
		sock := r.int(0, append(p, "topology", "physical_package_id")...)
		sockets[sock] = true
		sib := r.str(append(p, "topology", "core_cpus_list")...)
		if sib == "" {
			sib = r.str(append(p, "topology", "thread_siblings_list")...)
		}
		sibs, err := cpuset.Parse(sib)
		if err != nil || len(sibs) == 0 {
			sibs = []int{c}
		}
		sib = cpuset.Format(sibs)
		l3 := ""
		for _, idx := range r.dir(append(p, "cache")...) {
			if strings.HasPrefix(idx, "index") && r.str(append(p, "cache", idx, "level")...) == "3" {
				l3 = r.str(append(p, "cache", idx, "shared_cpu_list")...)
			}
		}
		if l3s, err := cpuset.Parse(l3); err == nil && len(l3s) > 0 {
			l3 = cpuset.Format(l3s)
		} else {
			l3 = fmt.Sprintf("socket%d", sock) // no L3 info: one group per socket
		}
		raws = append(raws, raw{cpu: CPU{ID: c, Socket: sock, NUMA: numaOf[c]}, siblings: sib, l3s: l3})
		l3Key[l3] = append(l3Key[l3], c)
	}
	// L3 groups in order of their lowest CPU.
	var keys []string
	for k := range l3Key {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return l3Key[keys[i]][0] < l3Key[keys[j]][0] })
	l3ID := map[string]int{}
	for i, k := range keys {
		l3ID[k] = i
	}
	// Cores in order of their lowest CPU.
	sort.Slice(raws, func(i, j int) bool { return raws[i].cpu.ID < raws[j].cpu.ID })
	coreCPUs := map[int][]int{}
	for i := range raws {
		idx, ok := coreKey[raws[i].siblings]
		if !ok {
			idx = len(coreKey)
			coreKey[raws[i].siblings] = idx
		}
		raws[i].cpu.Core = idx
		raws[i].cpu.L3 = l3ID[raws[i].l3s]
		coreCPUs[idx] = append(coreCPUs[idx], raws[i].cpu.ID)
		t.CPUs = append(t.CPUs, raws[i].cpu)
	}
	maxThreads := 1
	for _, cs := range coreCPUs {
		maxThreads = max(maxThreads, len(cs))
	}
	for i, k := range keys {
		cpus := l3Key[k]
		first := t.cpu(cpus[0])
		g := L3Group{ID: i, Socket: first.Socket, NUMA: first.NUMA, CPUs: cpuset.Format(cpus)}
		done := map[int]bool{}
		for _, c := range cpus {
			core := t.cpu(c).Core
			if !done[core] {
				done[core] = true
				g.Cores = append(g.Cores, coreCPUs[core])
			}
		}
		t.L3Groups = append(t.L3Groups, g)
	}
	t.Sockets, t.Cores, t.Logical, t.Threads = len(sockets), len(coreKey), len(t.CPUs), maxThreads
	return nil
}

// NamespaceNames lists the block device names (nvme0n1, …) of every NVMe namespace.
func (t *Topology) NamespaceNames() []string {
	var out []string
	for _, n := range t.NVMe {
		for _, ns := range n.Namespaces {
			out = append(out, ns.Name)
		}
	}
	return out
}

func (t *Topology) cpu(id int) CPU {
	i := sort.Search(len(t.CPUs), func(i int) bool { return t.CPUs[i].ID >= id })
	return t.CPUs[i]
}

// mount is one mount table entry.
type mount struct{ dev, source, target string }

func (r reader) mounts() []mount {
	var out []mount
	// PID 1's table is the host's when the host /proc is mounted into the agent's container
	// (proc/self would be the container's own mounts); fixtures and bare runs use self.
	b, err := os.ReadFile(r.path("proc", "1", "mountinfo"))
	if err != nil {
		b, err = os.ReadFile(r.path("proc", "self", "mountinfo"))
	}
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 10 {
				continue
			}
			sep := -1
			for i, x := range f {
				if x == "-" {
					sep = i
					break
				}
			}
			src := ""
			if sep > 0 && sep+2 < len(f) {
				src = f[sep+2]
			}
			out = append(out, mount{dev: f[2], source: src, target: unescape(f[4])})
		}
	}
	if b, err := os.ReadFile(r.path("proc", "mounts")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 {
				out = append(out, mount{source: f[0], target: unescape(f[1])})
			}
		}
	}
	return out
}

func unescape(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

func (r reader) swaps() map[string]bool {
	out := map[string]bool{}
	b, _ := os.ReadFile(r.path("proc", "swaps"))
	for i, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); i > 0 && len(f) > 0 {
			out[filepath.Base(f[0])] = true
		}
	}
	return out
}

func (r reader) pci(t *Topology) {
	devs := []string{"sys", "bus", "pci", "devices"}
	mounts := r.mounts()
	swaps := r.swaps()
	for _, bdf := range r.dir(devs...) {
		p := append(append([]string{}, devs...), bdf)
		class := r.str(append(p, "class")...)
		vendor := r.str(append(p, "vendor")...)
		numa := r.int(-1, append(p, "numa_node")...)
		switch {
		case class == NVMeClass:
			n := NVMe{
				BDF: bdf, Vendor: vendor, Device: r.str(append(p, "device")...),
				Driver: r.link(append(p, "driver")...), IOMMUGroup: r.link(append(p, "iommu_group")...), NUMA: numa,
			}
			for _, ctrl := range r.dir(append(p, "nvme")...) {
				cp := append(append([]string{}, p...), "nvme", ctrl)
				if n.Model == "" {
					n.Model = r.str(append(cp, "model")...)
					n.Serial = r.str(append(cp, "serial")...)
				}
				for _, ns := range r.dir(cp...) {
					if strings.HasPrefix(ns, "nvme") && r.str(append(cp, ns, "size")...) != "" {
						n.Namespaces = append(n.Namespaces, r.namespace(append(cp, ns), ns, mounts, swaps))
					}
				}
			}
			t.NVMe = append(t.NVMe, n)
		case vendor == NVIDIAVendor && strings.HasPrefix(class, "0x03"):
			g := GPU{BDF: bdf, Vendor: vendor, Device: r.str(append(p, "device")...), Driver: r.link(append(p, "driver")...), NUMA: numa}
			info := r.str("proc", "driver", "nvidia", "gpus", bdf, "information")
			for _, line := range strings.Split(info, "\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "Model" {
					g.Model = strings.TrimSpace(v)
				}
			}
			t.GPUs = append(t.GPUs, g)
		}
	}
}

// namespace reads one NVMe namespace block device at p (a sysfs directory).
func (r reader) namespace(p []string, name string, mounts []mount, swaps map[string]bool) Namespace {
	sectors, _ := strconv.ParseInt(r.str(append(p, "size")...), 10, 64)
	ns := Namespace{
		Name:          name,
		Dev:           r.str(append(p, "dev")...),
		CapacityBytes: sectors * 512, // sysfs size is in 512-byte units whatever the LBA format
		LBABytes:      r.int(512, append(p, "queue", "logical_block_size")...),
		Holders:       r.dir(append(p, "holders")...),
	}
	devs := map[string]bool{}
	names := map[string]bool{name: true}
	if ns.Dev != "" {
		devs[ns.Dev] = true
	}
	for _, e := range r.dir(p...) {
		if strings.HasPrefix(e, name+"p") && r.str(append(p, e, "partition")...) != "" {
			ns.Partitions = append(ns.Partitions, e)
			names[e] = true
			if d := r.str(append(p, e, "dev")...); d != "" {
				devs[d] = true
			}
			ns.Holders = append(ns.Holders, r.dir(append(p, e, "holders")...)...)
		}
	}
	// The holders' own block devices (md0, dm-0) can be mounted too.
	for _, h := range ns.Holders {
		names[h] = true
		if d := r.str("sys", "class", "block", h, "dev"); d != "" {
			devs[d] = true
		}
	}
	seen := map[string]bool{}
	for _, m := range mounts {
		if (m.dev != "" && devs[m.dev]) || (strings.HasPrefix(m.source, "/dev/") && names[filepath.Base(m.source)]) {
			if !seen[m.target] {
				seen[m.target] = true
				ns.Mounts = append(ns.Mounts, m.target)
			}
			if m.target == "/" {
				ns.RootFS = true
			}
		}
	}
	sort.Strings(ns.Mounts)
	for n := range names {
		if swaps[n] {
			ns.Swap = true
		}
	}
	return ns
}
