package layout

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sealfleet/sealfleet/api/v1alpha1"
)

// synth builds a machine: sockets × groupsPerSocket L3 groups of coresPerGroup cores,
// numaPerSocket NUMA nodes per socket, Linux numbering (all first threads, then siblings).
func synth(vendor string, family, sockets, groupsPerSocket, coresPerGroup, numaPerSocket, threads int) Topology {
	t := Topology{Model: "synthetic", Vendor: vendor, Family: family, SHANI: true, ThreadsPerCore: threads}
	total := sockets * groupsPerSocket * coresPerGroup
	core := 0
	for s := 0; s < sockets; s++ {
		for g := 0; g < groupsPerSocket; g++ {
			grp := Group{ID: s*groupsPerSocket + g, Socket: s, NUMANode: s*numaPerSocket + g*numaPerSocket/groupsPerSocket}
			for c := 0; c < coresPerGroup; c++ {
				cpus := []int{core}
				if threads == 2 {
					cpus = append(cpus, core+total)
				}
				grp.Cores = append(grp.Cores, cpus)
				core++
			}
			t.Groups = append(t.Groups, grp)
		}
	}
	return t
}

func check(t *testing.T, topo Topology, n int, o Options) *Layout {
	t.Helper()
	l, err := Calculate(topo, n, o)
	if err != nil {
		if l == nil || l.Supported || l.Reason != err.Error() {
			t.Fatalf("batch %d: error %v with layout %+v", n, err, l)
		}
		return l
	}
	if err := l.Validate(topo, o); err != nil {
		b, _ := json.Marshal(l)
		t.Fatalf("batch %d: %v\n%s", n, err, b)
	}
	return l
}

func TestPropertiesSynthetic(t *testing.T) {
	machines := map[string]Topology{
		"zen3-4x8":       synth("AuthenticAMD", 0x19, 1, 4, 8, 1, 2),
		"zen3-4x4":       synth("AuthenticAMD", 0x19, 1, 4, 4, 1, 2),
		"zen4-12x8-nps4": synth("AuthenticAMD", 0x19, 1, 12, 8, 4, 2),
		"zen3-2s-8x4":    synth("AuthenticAMD", 0x19, 2, 8, 4, 1, 2),
		"zen2-8x4":       synth("AuthenticAMD", 0x17, 1, 8, 4, 1, 2),
		"intel-1x40":     synth("GenuineIntel", 6, 1, 1, 40, 1, 2),
		"intel-2s-1x32":  synth("GenuineIntel", 6, 2, 1, 32, 1, 2),
		"zen3-smt-off":   synth("AuthenticAMD", 0x19, 1, 8, 8, 1, 1),
	}
	reserveds := [][]int{nil, {0, 1}, {0, 5, 17, 33, 64}}
	for name, m := range machines {
		for _, r := range reserveds {
			for _, hpc := range []int{0, 1, 2} {
				for _, cap := range []int{0, 5, 14} {
					o := Options{ReservedCPUs: r, HashersPerCore: hpc, MaxHashersPerCoordinator: cap}
					for _, n := range v1alpha1.SupportedBatchSizes {
						t.Run(name, func(t *testing.T) { check(t, m, n, o) })
					}
				}
			}
		}
	}
}

func TestCapsAndSMT(t *testing.T) {
	// One 40-core Intel L3 with SMT: forced 2 hashers per core, batch 128 = 64 hashers must be
	// split over coordinators of at most 14 (Curio would give one coordinator 78).
	intel := synth("GenuineIntel", 6, 1, 1, 40, 1, 2)
	l := check(t, intel, 64, Options{HashersPerCore: 2})
	if !l.Supported {
		t.Fatalf("intel batch 64 unsupported: %s", l.Reason)
	}
	for _, c := range l.Coordinators {
		if len(c.Hashers) > 14 {
			t.Fatalf("coordinator with %d hashers", len(c.Hashers))
		}
	}
	// SMT off: hashers per core is 1 whatever is asked.
	off := synth("AuthenticAMD", 0x19, 1, 8, 8, 1, 1)
	if got := HashersPerCore(off, Options{HashersPerCore: 2}); got != 1 {
		t.Fatalf("SMT off: %d hashers per core", got)
	}
	// Zen2 and Intel default to one hasher per core; Zen3 to two.
	if HashersPerCore(synth("AuthenticAMD", 0x17, 1, 1, 4, 1, 2), Options{}) != 1 ||
		HashersPerCore(synth("GenuineIntel", 6, 1, 1, 4, 1, 2), Options{}) != 1 ||
		HashersPerCore(synth("AuthenticAMD", 0x19, 1, 1, 4, 1, 2), Options{}) != 2 {
		t.Fatal("hashers per core defaults wrong")
	}
}

func TestNUMAPreference(t *testing.T) {
	nps4 := synth("AuthenticAMD", 0x19, 1, 12, 8, 4, 2)
	l := check(t, nps4, 32, Options{})
	if len(l.NUMANodes) != 1 {
		t.Fatalf("batch 32 on NPS4 spans NUMA nodes %v", l.NUMANodes)
	}
	// Reserving all of NUMA node 0 moves the batch to node 1.
	var r []int
	for _, g := range nps4.Groups {
		if g.NUMANode == 0 {
			for _, c := range g.Cores {
				r = append(r, c...)
			}
		}
	}
	l = check(t, nps4, 32, Options{ReservedCPUs: r})
	if len(l.NUMANodes) != 1 || l.NUMANodes[0] != 1 {
		t.Fatalf("with node 0 reserved: NUMA nodes %v", l.NUMANodes)
	}
	// Two sockets: batch 128 needs both (Curio used the first only).
	two := synth("AuthenticAMD", 0x19, 2, 8, 4, 1, 2)
	l = check(t, two, 128, Options{})
	if !l.Supported || len(l.NUMANodes) != 2 {
		t.Fatalf("2-socket batch 128: %+v", l)
	}
}

func TestNonContiguousUneven(t *testing.T) {
	// Two L3 groups with interleaved CPU numbers and different sizes.
	topo := Topology{Vendor: "AuthenticAMD", Family: 0x19, SHANI: true, ThreadsPerCore: 2, Groups: []Group{
		{ID: 0, Cores: [][]int{{0, 16}, {2, 18}, {4, 20}, {6, 22}, {8, 24}, {10, 26}}},
		{ID: 1, Cores: [][]int{{1, 17}, {3, 19}, {5, 21}}},
		{ID: 2, Cores: [][]int{{7, 23}, {9, 25}, {11, 27}, {12, 28}, {13, 29}, {14, 30}, {15, 31}}},
	}}
	for _, n := range v1alpha1.SupportedBatchSizes {
		check(t, topo, n, Options{})
	}
	l := check(t, topo, 16, Options{})
	if !l.Supported {
		t.Fatal(l.Reason)
	}
}

func TestReasons(t *testing.T) {
	small := synth("AuthenticAMD", 0x19, 1, 4, 4, 1, 2)
	cases := []struct {
		topo Topology
		n    int
		o    Options
		want string
	}{
		{small, 3, Options{}, "not one the sealer accepts"},
		{small, 128, Options{}, "needs 64 hasher threads"},
		{Topology{}, 8, Options{}, "no CPU topology"},
		{func() Topology { t := small; t.SHANI = false; return t }(), 8, Options{}, "sha_ni"},
		{small, 8, Options{HashersPerCore: 3}, "hashers per core"},
		{small, 8, Options{MaxHashersPerCoordinator: 15}, "max hashers per coordinator"},
		{small, 32, Options{ReservedCPUs: []int{0, 1, 2, 3, 4, 5}}, "cores excluded by reserved CPUs"},
	}
	for _, c := range cases {
		l, err := Calculate(c.topo, c.n, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) || l.Supported || l.Reason != err.Error() {
			t.Errorf("batch %d: got %v, want reason containing %q", c.n, err, c.want)
		}
	}
}

func TestJSONShape(t *testing.T) {
	l := check(t, synth("AuthenticAMD", 0x19, 1, 4, 8, 1, 2), 1, Options{})
	b, _ := json.Marshal(l)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"batch_size", "supported", "coordinators", "roles"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
	h := m["coordinators"].([]any)[0].(map[string]any)["hashers"].([]any)[0].(map[string]any)
	if h["sectors"].(float64) != 1 {
		t.Errorf("batch 1 hasher seals %v sectors", h["sectors"])
	}
	if !strings.HasPrefix(l.Summary(), "1 CCX, 1 hashers x 1 sectors, cpus ") {
		t.Errorf("summary %q", l.Summary())
	}
	var back Layout
	if err := json.Unmarshal(b, &back); err != nil || len(back.CPUs()) != len(l.CPUs()) {
		t.Fatalf("round trip: %v", err)
	}
}

func TestSharedCores(t *testing.T) {
	two := synth("GenuineIntel", 6, 1, 1, 2, 1, 1) // a 2-core development VM
	if _, err := Calculate(two, 4, Options{}); err == nil {
		t.Fatal("a dedicated layout for 4 sectors should not fit 2 cores")
	}
	o := Options{SharedCores: true, ReservedCPUs: []int{0}}
	l, err := Calculate(two, 4, o)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Shared || l.PhysicalCores() != 1 || l.Hashers() != 2 || len(l.CoreCPUs()) != 1 || l.CoreCPUs()[0] != 1 {
		t.Fatalf("shared layout: %+v cores %v", l, l.CoreCPUs())
	}
	if err := l.Validate(two, o); err != nil {
		t.Fatal(err)
	}
	// A machine where the dedicated layout fits never gets a shared one.
	big := synth("AuthenticAMD", 0x19, 1, 4, 8, 1, 2)
	if l, err := Calculate(big, 32, Options{SharedCores: true}); err != nil || l.Shared {
		t.Fatalf("big machine: shared=%v err=%v", l.Shared, err)
	}
	// Every core reserved: still no layout.
	if _, err := Calculate(two, 4, Options{SharedCores: true, ReservedCPUs: []int{0, 1}}); err == nil {
		t.Fatal("no usable core must stay unsupported")
	}
}
