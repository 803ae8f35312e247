// Package layout computes the sealer's core layout: which logical CPUs run the per-L3
// coordinators and their hasher threads, and which run the batch-wide PC1 and PC2 roles.
//
// It is pure (no I/O) and is the single source of truth for the node agent (capabilities,
// `node-agent calc`, metrics) and the operator (placement and the rendered sealer config).
//
// Rules, and where they differ from Curio's generator (see docs/node-agent.md):
//   - every socket and every L3 group (CCX) is considered; groups may be uneven and their
//     CPUs need not be contiguous;
//   - a batch is kept inside one NUMA node when it fits, else inside one socket, else it
//     spans the machine;
//   - a coordinator drives at most MaxHashersPerCoordinator hashers (the sealer's limit, 14);
//     a large L3 (Intel) hosts several coordinators instead of one oversized one;
//   - hashers only ever use SMT siblings that really exist (SMT off means one per core);
//   - reserved CPUs exclude their whole physical core; no logical CPU is used twice;
//   - each hasher thread seals SectorsPerHasher sectors (1 for a batch of 1).
package layout

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/cpuset"
)

// DefaultMaxHashersPerCoordinator is the sealer's limit on hasher threads per coordinator
// (the same bound as supraseal's MAX_HASHERS_PER_COORD).
const DefaultMaxHashersPerCoordinator = 14

// SectorsPerHasher is how many sectors one hasher thread interleaves (two SHA-256 streams
// fill the latency gaps of the SHA-NI rounds instruction).
const SectorsPerHasher = 2

// AMDFamilyZen3 is the first AMD family (0x19) whose cores run two hasher threads well.
const AMDFamilyZen3 = 0x19

// Topology is the calculator's input: the machine's L3 groups and the CPU facts that decide
// how many hashers a core runs.
type Topology struct {
	// Model, Vendor and Family identify the CPU (Vendor as in /proc/cpuinfo vendor_id).
	Model  string
	Vendor string
	Family int
	// SHANI is true when the CPU has the SHA extensions the hashers need.
	SHANI bool
	// ThreadsPerCore is 2 with SMT on, 1 with it off.
	ThreadsPerCore int
	// Groups are the L3 groups (CCXs), each with its physical cores.
	Groups []Group
}

// Group is a set of cores sharing one L3 cache.
type Group struct {
	// ID, Socket and NUMANode locate the group.
	ID       int
	Socket   int
	NUMANode int
	// Cores lists each physical core's logical CPUs (SMT siblings), lowest first.
	Cores [][]int
}

// Options tune the calculation.
type Options struct {
	// HashersPerCore overrides the hasher threads per physical core (1 or 2); 0 detects it.
	// It never exceeds the threads a core really has.
	HashersPerCore int
	// ReservedCPUs are logical CPUs the sealer must not use; their whole physical core is
	// left out. Pass a running batch's Layout.CPUs() here to plan a second pipeline.
	ReservedCPUs []int
	// MaxHashersPerCoordinator lowers the per-coordinator cap; 0 means the sealer's default.
	MaxHashersPerCoordinator int
	// SharedCores allows, when no dedicated layout fits, a shared layout: the coordinator,
	// every hasher and every role on one physical core (the first usable one). For development
	// machines and test sector sizes only; its throughput means nothing.
	SharedCores bool
}

// Hasher is one hasher thread.
type Hasher struct {
	// CPU is the logical CPU the thread is pinned to.
	CPU int `json:"cpu"`
	// Sectors is how many sectors this thread hashes.
	Sectors int `json:"sectors"`
}

// Coordinator is one coordinator thread and the hashers it feeds; all share one L3.
type Coordinator struct {
	// CPU is the logical CPU the coordinator is pinned to.
	CPU int `json:"cpu"`
	// Hashers are its hasher threads.
	Hashers []Hasher `json:"hashers"`
}

// Roles are the batch-wide threads. The PC1 roles (writer, reader, orchestrator) each have
// their own logical CPU; the PC2 and C1 roles run after PC1 has finished, on the same batch's
// CPUs, so they reuse the PC1 role CPUs (and a spare SMT sibling of them) instead of holding
// cores of their own that would idle through PC1.
type Roles struct {
	// Writer writes PC1 layer pages to the layer devices.
	Writer int `json:"writer"`
	// Reader reads parent pages from the layer devices.
	Reader int `json:"reader"`
	// Orchestrator moves buffers between reader, coordinators and writer.
	Orchestrator int `json:"orchestrator"`
	// PC2Reader reads layer columns for tree-c.
	PC2Reader int `json:"pc2_reader"`
	// PC2Hasher drives the Poseidon hashing (GPU when present).
	PC2Hasher int `json:"pc2_hasher"`
	// PC2HasherCPU finishes tree levels on the CPU.
	PC2HasherCPU int `json:"pc2_hasher_cpu"`
	// PC2Writer writes tree files.
	PC2Writer int `json:"pc2_writer"`
	// C1Reader reads challenged nodes for commit phase 1.
	C1Reader int `json:"c1_reader"`
}

// cpus lists the role CPUs in declaration order.
func (r *Roles) cpus() []int {
	return []int{r.Writer, r.Reader, r.Orchestrator, r.PC2Reader, r.PC2Hasher, r.PC2HasherCPU, r.PC2Writer, r.C1Reader}
}

// pc1RoleCount is the roles that run during PC1, beside the hashers: writer, reader and
// orchestrator. Only they need logical CPUs of their own.
const pc1RoleCount = 3

// Layout is the assignment of sealer threads to logical CPUs for one batch size, or the
// reason this machine cannot run it. Its JSON is what `node-agent calc` prints and what the
// operator writes into the sealer config.
type Layout struct {
	// BatchSize is the number of sectors.
	BatchSize int `json:"batch_size"`
	// Supported is false when the machine cannot run this batch size; Reason says why.
	Supported bool `json:"supported"`
	// Reason explains an unsupported batch size.
	Reason string `json:"reason,omitempty"`
	// Coordinators are the coordinator threads with their hashers.
	Coordinators []Coordinator `json:"coordinators"`
	// Roles are the batch-wide threads (absent when unsupported).
	Roles *Roles `json:"roles,omitempty"`
	// HashersPerCore is the hasher threads per physical core this layout uses.
	HashersPerCore int `json:"hashers_per_core,omitempty"`
	// NUMANodes are the NUMA nodes the layout's CPUs belong to.
	NUMANodes []int `json:"numa_nodes,omitempty"`
	// Shared marks a shared-core layout (Options.SharedCores): threads share CPUs.
	Shared bool `json:"shared,omitempty"`

	cores  [][]int // physical cores used (each a list of its logical CPUs)
	groups int     // distinct L3 groups used by coordinators
}

// CPUs returns every logical CPU the layout uses, sorted.
func (l *Layout) CPUs() []int {
	var out []int
	for _, c := range l.Coordinators {
		out = append(out, c.CPU)
		for _, h := range c.Hashers {
			out = append(out, h.CPU)
		}
	}
	if l.Roles != nil {
		out = append(out, l.Roles.cpus()...)
	}
	sort.Ints(out)
	return out
}

// PhysicalCores is the number of whole cores the sealer pod must request (every core that
// holds one of its CPUs, including idle SMT siblings). For a layout decoded from JSON, which
// does not carry the core grouping, use PhysicalCoresOn.
func (l *Layout) PhysicalCores() int {
	if l.cores != nil {
		return len(l.cores)
	}
	return len(l.CPUs())
}

// PhysicalCoresOn counts the physical cores of t that hold one of the layout's CPUs.
func (l *Layout) PhysicalCoresOn(t Topology) int {
	used := map[int]bool{}
	for _, c := range l.CPUs() {
		used[c] = true
	}
	n := 0
	for _, g := range t.Groups {
		for _, core := range g.Cores {
			for _, c := range core {
				if used[c] {
					n++
					break
				}
			}
		}
	}
	return n
}

// CoreCPUs returns every logical CPU of the physical cores the layout occupies (what the
// pod's cpuset will contain), sorted. Nil for a layout decoded from JSON.
func (l *Layout) CoreCPUs() []int {
	var out []int
	for _, c := range l.cores {
		out = append(out, c...)
	}
	sort.Ints(out)
	return out
}

// Hashers is the number of hasher threads.
func (l *Layout) Hashers() int {
	n := 0
	for _, c := range l.Coordinators {
		n += len(c.Hashers)
	}
	return n
}

// Summary is one line for kubectl, e.g. "4 CCX, 16 hashers x 2 sectors, cpus 0-35".
func (l *Layout) Summary() string {
	if !l.Supported {
		return "unsupported: " + l.Reason
	}
	sectors := SectorsPerHasher
	if l.BatchSize == 1 {
		sectors = 1
	}
	where := fmt.Sprintf("%d coordinators", len(l.Coordinators))
	if l.Shared {
		where = "shared core"
	} else if l.groups > 0 {
		where = fmt.Sprintf("%d CCX", l.groups)
		if l.groups != len(l.Coordinators) {
			where += fmt.Sprintf(" (%d coordinators)", len(l.Coordinators))
		}
	}
	return fmt.Sprintf("%s, %d hashers x %d sectors, cpus %s", where, l.Hashers(), sectors, cpuset.Format(l.CPUs()))
}

// JSON is the layout as `node-agent calc` prints it.
func (l *Layout) JSON() ([]byte, error) { return json.Marshal(l) }

// FromStatus builds the calculator's input from a SealerNode's status.cpu.
func FromStatus(cpu *v1alpha1.CPUTopology) Topology {
	if cpu == nil {
		return Topology{}
	}
	t := Topology{
		Model:          cpu.Model,
		Vendor:         cpu.Vendor,
		Family:         int(cpu.Family),
		SHANI:          cpu.SHANI,
		ThreadsPerCore: int(cpu.ThreadsPerCore),
	}
	maxThreads := 0
	for _, g := range cpu.L3Groups {
		grp := Group{ID: int(g.ID), Socket: int(g.Socket), NUMANode: int(g.NUMANode)}
		for _, c := range g.Cores {
			cpus := make([]int, len(c.CPUs))
			for i, x := range c.CPUs {
				cpus[i] = int(x)
			}
			sort.Ints(cpus)
			if len(cpus) > maxThreads {
				maxThreads = len(cpus)
			}
			grp.Cores = append(grp.Cores, cpus)
		}
		t.Groups = append(t.Groups, grp)
	}
	if t.ThreadsPerCore == 0 {
		t.ThreadsPerCore = maxThreads
	}
	return t
}

// SingleHasherPerThread reports whether the CPU should run one hasher per physical core even
// with SMT on: AMD before Zen3 (family < 0x19) gains nothing from a second hasher thread, and
// for Intel and unknown vendors the dual-hasher gain has not been measured, so the safe
// default is one (override with Options.HashersPerCore / spec.hashersPerCore).
func SingleHasherPerThread(t Topology) bool {
	if t.Vendor == "AuthenticAMD" || t.Vendor == "HygonGenuine" {
		return t.Family < AMDFamilyZen3
	}
	return true
}

// HashersPerCore is the number of hasher threads per physical core the calculator uses.
func HashersPerCore(t Topology, o Options) int {
	hpc := o.HashersPerCore
	if hpc <= 0 {
		hpc = 2
		if SingleHasherPerThread(t) {
			hpc = 1
		}
	}
	if hpc > 2 {
		hpc = 2
	}
	if t.ThreadsPerCore > 0 && hpc > t.ThreadsPerCore {
		hpc = t.ThreadsPerCore // SMT off: never put a "sibling" on another core
	}
	if hpc < 1 {
		hpc = 1
	}
	return hpc
}

// SupportedBatchSizes runs Calculate for every batch size the sealer accepts and splits them
// into those this machine can run and, for the rest, the reason.
func SupportedBatchSizes(t Topology, o Options) (ok []int, unsupported map[int]string) {
	unsupported = map[int]string{}
	for _, n := range v1alpha1.SupportedBatchSizes {
		if _, err := Calculate(t, n, o); err != nil {
			unsupported[n] = err.Error()
			continue
		}
		ok = append(ok, n)
	}
	return ok, unsupported
}

// group is a Group with its usable cores and planning state.
type group struct {
	Group
	usable [][]int // cores with no reserved CPU, ordered by lowest CPU
	h      int     // hashers per core in this group
	used   int     // usable cores consumed so far
	assign int     // hashers assigned in this plan
}

// free is the number of usable cores not yet consumed.
func (g *group) free() int { return len(g.usable) - g.used }

// capacity is the most hashers the group's free cores can host: each coordinator takes one
// core and feeds at most maxPer hashers.
func (g *group) capacity(maxPer int) int {
	h, p := unitShape(g.h, maxPer)
	k := g.free()
	for hc := k; hc > 0; hc-- {
		if hc+ceilDiv(hc, p) <= k {
			return hc * h
		}
	}
	return 0
}

// unitShape returns the hashers per core and the hasher cores per coordinator.
func unitShape(h, maxPer int) (hpc, coresPerCoord int) {
	if h > maxPer {
		h = maxPer
	}
	return h, maxPer / h
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// plan is one feasible assignment.
type plan struct {
	coords  []Coordinator
	cores   [][]int
	groups  map[int]bool
	numa    map[int]bool
	roles   *Roles
	hashers int
}

// Calculate computes the layout for batchSize sectors. When the machine cannot run it, the
// returned layout has Supported=false and Reason set, and the error carries the same reason.
func Calculate(t Topology, batchSize int, o Options) (*Layout, error) {
	l := &Layout{BatchSize: batchSize, Coordinators: []Coordinator{}}
	fail := func(format string, args ...any) (*Layout, error) {
		l.Reason = fmt.Sprintf(format, args...)
		return l, errors.New(l.Reason)
	}
	if !v1alpha1.BatchSizeSupported(batchSize) {
		return fail("batch size %d is not one the sealer accepts (%s)", batchSize, joinInts(v1alpha1.SupportedBatchSizes))
	}
	if len(t.Groups) == 0 {
		return fail("no CPU topology: no L3 groups were discovered")
	}
	if !t.SHANI {
		return fail("CPU %q lacks the SHA extensions (sha_ni) the hashers need", t.Model)
	}
	if o.HashersPerCore < 0 || o.HashersPerCore > 2 {
		return fail("hashers per core must be 1 or 2 (0 = detect), not %d", o.HashersPerCore)
	}
	maxPer := o.MaxHashersPerCoordinator
	if maxPer == 0 {
		maxPer = DefaultMaxHashersPerCoordinator
	}
	if maxPer < 1 || maxPer > DefaultMaxHashersPerCoordinator {
		return fail("max hashers per coordinator must be 1..%d, not %d", DefaultMaxHashersPerCoordinator, maxPer)
	}
	hpc := HashersPerCore(t, o)
	l.HashersPerCore = hpc

	sectors, need := SectorsPerHasher, batchSize/SectorsPerHasher
	if batchSize == 1 {
		sectors, need = 1, 1
	}

	reserved := map[int]bool{}
	for _, c := range o.ReservedCPUs {
		reserved[c] = true
	}
	seen := map[int]bool{}
	var all []*group
	usableTotal, reservedCores := 0, 0
	for _, g := range t.Groups {
		gr := &group{Group: g, h: hpc}
		for _, core := range g.Cores {
			if len(core) == 0 {
				continue
			}
			skip := false
			for _, c := range core {
				if reserved[c] {
					skip = true
				}
				if seen[c] {
					return fail("topology lists CPU %d twice", c)
				}
				seen[c] = true
			}
			if skip {
				reservedCores++
				continue
			}
			cc := append([]int(nil), core...)
			sort.Ints(cc)
			gr.usable = append(gr.usable, cc)
			if len(cc) < gr.h {
				gr.h = len(cc)
			}
		}
		sort.Slice(gr.usable, func(i, j int) bool { return gr.usable[i][0] < gr.usable[j][0] })
		usableTotal += len(gr.usable)
		all = append(all, gr)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })

	// Scopes, narrowest first: each NUMA node, each socket, the whole machine.
	var scopes [][]*group
	byKey := func(key func(*group) int) [][]*group {
		m := map[int][]*group{}
		var keys []int
		for _, g := range all {
			k := key(g)
			if _, ok := m[k]; !ok {
				keys = append(keys, k)
			}
			m[k] = append(m[k], g)
		}
		sort.Ints(keys)
		out := make([][]*group, 0, len(keys))
		for _, k := range keys {
			out = append(out, m[k])
		}
		return out
	}
	numaScopes := byKey(func(g *group) int { return g.NUMANode })
	socketScopes := byKey(func(g *group) int { return g.Socket })
	if len(numaScopes) > 1 {
		scopes = append(scopes, numaScopes...)
	}
	if len(socketScopes) > 1 {
		for _, s := range socketScopes {
			if len(s) < len(all) && !sameGroups(s, numaScopes) {
				scopes = append(scopes, s)
			}
		}
	}
	scopes = append(scopes, all)

	var p *plan
	var reason string
	for _, s := range scopes {
		for _, g := range all {
			g.used, g.assign = 0, 0
		}
		p, reason = tryPlan(s, need, sectors, maxPer)
		if p != nil {
			break
		}
	}
	if p == nil && o.SharedCores {
		if sl := sharedLayout(l, all, need, sectors, maxPer); sl != nil {
			return sl, nil
		}
	}
	if p == nil {
		excl := ""
		if reservedCores > 0 {
			excl = fmt.Sprintf("; %d cores excluded by reserved CPUs", reservedCores)
		}
		return fail("%s: %d usable cores in %d L3 groups, %d hashers per core, at most %d hashers per coordinator%s", reason, usableTotal, len(all), hpc, maxPer, excl)
	}
	l.Supported = true
	l.Coordinators = p.coords
	l.Roles = p.roles
	l.cores = p.cores
	l.groups = len(p.groups)
	for n := range p.numa {
		l.NUMANodes = append(l.NUMANodes, n)
	}
	sort.Ints(l.NUMANodes)
	return l, nil
}

// sharedLayout puts the coordinators, hashers and roles of a batch on the first usable
// physical core (nil when there is none): hashers alternate over the core's logical CPUs,
// coordinators and roles sit on its first CPU.
func sharedLayout(l *Layout, all []*group, need, sectors, maxPer int) *Layout {
	for _, g := range all {
		if len(g.usable) == 0 {
			continue
		}
		core := g.usable[0]
		first := core[0]
		var hashers []Hasher
		for i := 0; i < need; i++ {
			hashers = append(hashers, Hasher{CPU: core[i%len(core)], Sectors: sectors})
		}
		for len(hashers) > 0 {
			n := min(len(hashers), maxPer)
			l.Coordinators = append(l.Coordinators, Coordinator{CPU: first, Hashers: hashers[:n]})
			hashers = hashers[n:]
		}
		l.Supported = true
		l.Shared = true
		l.Roles = &Roles{Writer: first, Reader: first, Orchestrator: first, PC2Reader: first,
			PC2Hasher: first, PC2HasherCPU: first, PC2Writer: first, C1Reader: first}
		l.HashersPerCore = len(core)
		l.cores = [][]int{core}
		l.groups = 1
		l.NUMANodes = []int{g.NUMANode}
		return l
	}
	return nil
}

// sameGroups reports whether s equals one of the scopes already listed.
func sameGroups(s []*group, scopes [][]*group) bool {
	for _, o := range scopes {
		if len(o) == len(s) {
			eq := true
			for i := range o {
				if o[i] != s[i] {
					eq = false
				}
			}
			if eq {
				return true
			}
		}
	}
	return false
}

// tryPlan assigns need hashers and the batch-wide roles inside scope, or says why it cannot.
func tryPlan(scope []*group, need, sectors, maxPer int) (*plan, string) {
	total := 0
	for _, g := range scope {
		total += g.capacity(maxPer)
	}
	if total < need {
		return nil, fmt.Sprintf("needs %d hasher threads but the L3 groups can host at most %d", need, total)
	}
	// Choose groups: the best-fitting single group for what remains, else the largest
	// (fewest coordinators, whole CCXs left free for another batch).
	numaUsed := map[int]bool{}
	remaining := need
	var chosen []*group
	for remaining > 0 {
		var best *group
		bestCap := 0
		for _, g := range scope {
			if g.assign > 0 {
				continue
			}
			c := g.capacity(maxPer)
			if c >= remaining && (best == nil || c < bestCap || (c == bestCap && better(g, best, numaUsed))) {
				best, bestCap = g, c
			}
		}
		if best == nil {
			for _, g := range scope {
				if g.assign > 0 {
					continue
				}
				c := g.capacity(maxPer)
				if c > 0 && (best == nil || c > bestCap || (c == bestCap && better(g, best, numaUsed))) {
					best, bestCap = g, c
				}
			}
		}
		if best == nil {
			return nil, fmt.Sprintf("needs %d hasher threads; no L3 group has room for the last %d", need, remaining)
		}
		m := min(bestCap, remaining)
		best.assign = m
		remaining -= m
		numaUsed[best.NUMANode] = true
		chosen = append(chosen, best)
	}
	sort.Slice(chosen, func(i, j int) bool { return chosen[i].ID < chosen[j].ID })

	p := &plan{groups: map[int]bool{}, numa: map[int]bool{}}
	coordCores, hasherCores := 0, 0
	for _, g := range chosen {
		h, per := unitShape(g.h, maxPer)
		hc := ceilDiv(g.assign, h)
		units := ceilDiv(hc, per)
		short := hc*h - g.assign // hashers fewer than the cores could hold (< h)
		for u := 0; u < units; u++ {
			cores := hc / units
			if u < hc%units {
				cores++
			}
			nh := cores * h
			if u == units-1 {
				nh -= short
			}
			coord := g.usable[g.used]
			g.used++
			p.cores = append(p.cores, coord)
			co := Coordinator{CPU: coord[0]}
			for i := 0; i < cores; i++ {
				core := g.usable[g.used]
				g.used++
				p.cores = append(p.cores, core)
				for t := 0; t < h && len(co.Hashers) < nh; t++ {
					co.Hashers = append(co.Hashers, Hasher{CPU: core[t], Sectors: sectors})
				}
			}
			coordCores++
			hasherCores += cores
			p.coords = append(p.coords, co)
			p.hashers += len(co.Hashers)
		}
		p.groups[g.ID] = true
		p.numa[g.NUMANode] = true
	}

	// Batch-wide roles: PC1 writer, reader and orchestrator each get a logical CPU (first
	// threads of the role cores before their siblings); the PC2 and C1 roles reuse them, as
	// PC2 starts when PC1 is done. Prefer the leftovers of the groups already in use, then the
	// fullest other groups of the same NUMA nodes.
	cand := make([]*group, 0, len(scope))
	cand = append(cand, chosen...)
	var others []*group
	for _, g := range scope {
		if g.assign == 0 {
			others = append(others, g)
		}
	}
	sort.SliceStable(others, func(i, j int) bool {
		a, b := others[i], others[j]
		if p.numa[a.NUMANode] != p.numa[b.NUMANode] {
			return p.numa[a.NUMANode]
		}
		if a.free() != b.free() {
			return a.free() < b.free()
		}
		return a.ID < b.ID
	})
	cand = append(cand, others...)
	var svc [][]int
	threads := 0
	for _, g := range cand {
		for g.free() > 0 && threads < pc1RoleCount {
			core := g.usable[g.used]
			g.used++
			svc = append(svc, core)
			threads += len(core)
			p.numa[g.NUMANode] = true
		}
	}
	if threads < pc1RoleCount {
		have := 0
		for _, g := range scope {
			have += len(g.usable)
		}
		roleCores := ceilDiv(pc1RoleCount, maxThreads(scope))
		return nil, fmt.Sprintf("needs %d physical cores (%d coordinators + %d hasher cores + %d for the writer/reader/orchestrator, which PC2 and C1 reuse) but only %d are usable",
			coordCores+hasherCores+roleCores, coordCores, hasherCores, roleCores, have)
	}
	// First threads of every role core, then their siblings.
	var order []int
	for t := 0; t < maxThreads(scope); t++ {
		for _, core := range svc {
			if t < len(core) {
				order = append(order, core[t])
			}
		}
	}
	spare := order[0] // PC2's CPU-side tree hashing: a fourth thread when the role cores have one
	if len(order) > pc1RoleCount {
		spare = order[pc1RoleCount]
	}
	p.roles = &Roles{
		Writer: order[0], Reader: order[1], Orchestrator: order[2],
		PC2Reader: order[1], PC2Hasher: order[2], PC2HasherCPU: spare, PC2Writer: order[0], C1Reader: order[1],
	}
	p.cores = append(p.cores, svc...)
	return p, ""
}

// maxThreads is the largest number of logical CPUs on one usable core of scope.
func maxThreads(scope []*group) int {
	m := 1
	for _, g := range scope {
		for _, c := range g.usable {
			m = max(m, len(c))
		}
	}
	return m
}

// better breaks ties between equally sized groups: a NUMA node already in use, then the
// lower NUMA node, then the lower group id.
func better(a, b *group, numaUsed map[int]bool) bool {
	if numaUsed[a.NUMANode] != numaUsed[b.NUMANode] {
		return numaUsed[a.NUMANode]
	}
	if a.NUMANode != b.NUMANode {
		return a.NUMANode < b.NUMANode
	}
	return a.ID < b.ID
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// Validate checks a supported layout against the topology it was computed for: every CPU
// exists and is used once, no reserved CPU is used, every hasher shares its coordinator's
// L3 group, no coordinator exceeds the cap, and the hashers' sectors add up to the batch.
func (l *Layout) Validate(t Topology, o Options) error {
	if !l.Supported {
		return nil
	}
	groupOf := map[int]int{}
	for _, g := range t.Groups {
		for _, core := range g.Cores {
			for _, c := range core {
				groupOf[c] = g.ID
			}
		}
	}
	reserved := map[int]bool{}
	for _, c := range o.ReservedCPUs {
		reserved[c] = true
	}
	maxPer := o.MaxHashersPerCoordinator
	if maxPer == 0 {
		maxPer = DefaultMaxHashersPerCoordinator
	}
	used := map[int]string{}
	use := func(c int, what string) error {
		if _, ok := groupOf[c]; !ok {
			return fmt.Errorf("%s: CPU %d is not in the topology", what, c)
		}
		if prev, ok := used[c]; ok && !l.Shared {
			return fmt.Errorf("CPU %d used twice (%s and %s)", c, prev, what)
		}
		if reserved[c] {
			return fmt.Errorf("%s: CPU %d is reserved", what, c)
		}
		used[c] = what
		return nil
	}
	sum := 0
	for i, co := range l.Coordinators {
		if err := use(co.CPU, fmt.Sprintf("coordinator %d", i)); err != nil {
			return err
		}
		if len(co.Hashers) == 0 || len(co.Hashers) > maxPer {
			return fmt.Errorf("coordinator %d has %d hashers (1..%d allowed)", i, len(co.Hashers), maxPer)
		}
		for j, h := range co.Hashers {
			if err := use(h.CPU, fmt.Sprintf("coordinator %d hasher %d", i, j)); err != nil {
				return err
			}
			if groupOf[h.CPU] != groupOf[co.CPU] {
				return fmt.Errorf("hasher CPU %d (L3 %d) is not in coordinator CPU %d's L3 group %d", h.CPU, groupOf[h.CPU], co.CPU, groupOf[co.CPU])
			}
			sum += h.Sectors
		}
	}
	if sum != l.BatchSize {
		return fmt.Errorf("hashers seal %d sectors, batch size is %d", sum, l.BatchSize)
	}
	if l.Roles == nil {
		return errors.New("supported layout without roles")
	}
	names := []string{"writer", "reader", "orchestrator", "pc2_reader", "pc2_hasher", "pc2_hasher_cpu", "pc2_writer", "c1_reader"}
	roleCPUs := map[int]bool{}
	for i, c := range l.Roles.cpus() {
		if i >= pc1RoleCount && roleCPUs[c] {
			continue // a PC2/C1 role reusing a PC1 role's CPU: the phases do not overlap
		}
		if err := use(c, names[i]); err != nil {
			return err
		}
		roleCPUs[c] = true
	}
	return nil
}

// Capabilities is what a SealerNode publishes for a machine: the batch sizes it can run, the
// reason for each it cannot (in batch-size order), and the hashers per core in use.
func Capabilities(t Topology, o Options) *v1alpha1.Capabilities {
	ok, unsupported := SupportedBatchSizes(t, o)
	caps := &v1alpha1.Capabilities{HashersPerCore: int32(HashersPerCore(t, o))}
	for _, n := range ok {
		caps.BatchSizes = append(caps.BatchSizes, int32(n))
	}
	keys := make([]int, 0, len(unsupported))
	for n := range unsupported {
		keys = append(keys, n)
	}
	sort.Ints(keys)
	for _, n := range keys {
		caps.Unsupported = append(caps.Unsupported, v1alpha1.UnsupportedBatchSize{BatchSize: int32(n), Reason: unsupported[n]})
	}
	return caps
}

// Record is the layout as the SealBatch status stores it (placement decides it once; the
// sealer config, retries and the node agent read it back with FromRecord).
func (l *Layout) Record() *v1alpha1.CoreLayout {
	r := &v1alpha1.CoreLayout{HashersPerCore: int32(l.HashersPerCore), Shared: l.Shared}
	for _, c := range l.Coordinators {
		rc := v1alpha1.LayoutCoordinator{CPU: int32(c.CPU), Hashers: []v1alpha1.LayoutHasher{}}
		for _, h := range c.Hashers {
			rc.Hashers = append(rc.Hashers, v1alpha1.LayoutHasher{CPU: int32(h.CPU), Sectors: int32(h.Sectors)})
		}
		r.Coordinators = append(r.Coordinators, rc)
	}
	for _, n := range l.NUMANodes {
		r.NUMANodes = append(r.NUMANodes, int32(n))
	}
	if ro := l.Roles; ro != nil {
		r.Roles = v1alpha1.LayoutRoles{
			Writer: int32(ro.Writer), Reader: int32(ro.Reader), Orchestrator: int32(ro.Orchestrator),
			PC2Reader: int32(ro.PC2Reader), PC2Hasher: int32(ro.PC2Hasher), PC2HasherCPU: int32(ro.PC2HasherCPU),
			PC2Writer: int32(ro.PC2Writer), C1Reader: int32(ro.C1Reader),
		}
	}
	return r
}

// FromRecord rebuilds a batch's layout from its status record (batchSize sectors).
func FromRecord(r *v1alpha1.CoreLayout, batchSize int) *Layout {
	l := &Layout{BatchSize: batchSize, Supported: true, HashersPerCore: int(r.HashersPerCore), Shared: r.Shared}
	for _, c := range r.Coordinators {
		lc := Coordinator{CPU: int(c.CPU), Hashers: []Hasher{}}
		for _, h := range c.Hashers {
			lc.Hashers = append(lc.Hashers, Hasher{CPU: int(h.CPU), Sectors: int(h.Sectors)})
		}
		l.Coordinators = append(l.Coordinators, lc)
	}
	for _, n := range r.NUMANodes {
		l.NUMANodes = append(l.NUMANodes, int(n))
	}
	ro := r.Roles
	l.Roles = &Roles{
		Writer: int(ro.Writer), Reader: int(ro.Reader), Orchestrator: int(ro.Orchestrator),
		PC2Reader: int(ro.PC2Reader), PC2Hasher: int(ro.PC2Hasher), PC2HasherCPU: int(ro.PC2HasherCPU),
		PC2Writer: int(ro.PC2Writer), C1Reader: int(ro.C1Reader),
	}
	return l
}
