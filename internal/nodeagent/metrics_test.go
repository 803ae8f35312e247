package nodeagent

import (
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sealfleet/sealfleet/internal/layout"
	"github.com/sealfleet/sealfleet/internal/nodeprep"
	"github.com/sealfleet/sealfleet/internal/topology"
)

func stat(t *testing.T, name string) map[int]CPUTimes {
	s, err := ReadStat("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReadStatBusyRatio(t *testing.T) {
	a, b := stat(t, "proc-0"), stat(t, "proc-1")
	// 150 and 1010 jiffies at USER_HZ 100.
	if len(a) != 4 || math.Abs(a[17].Busy-1.5) > 1e-9 || math.Abs(a[17].Idle-10.1) > 1e-9 {
		t.Fatalf("parse: %+v", a)
	}
	cases := map[int]float64{0: 100.0 / 200, 1: 1, 2: 0.95, 17: 0}
	for cpu, want := range cases {
		got, ok := BusyRatio(a[cpu], b[cpu])
		if !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("cpu%d: %v %v, want %v", cpu, got, ok, want)
		}
	}
	if _, ok := BusyRatio(b[0], a[0]); ok {
		t.Error("counters going backwards accepted")
	}
}

func TestCPUMetrics(t *testing.T) {
	topo, err := topology.Discover("../topology/testdata/epyc-7313")
	if err != nil {
		t.Fatal(err)
	}
	l := &layout.Layout{BatchSize: 4, Supported: true, Coordinators: []layout.Coordinator{
		{CPU: 0, Hashers: []layout.Hasher{{CPU: 1, Sectors: 2}, {CPU: 17, Sectors: 2}}},
	}}
	as := Assignments([]RunningBatch{{Name: "ns/b1", Layout: l}})
	if len(as) != 3 || as[0].Role != "coordinator" || as[2].CPU != 17 {
		t.Fatalf("assignments %+v", as)
	}
	m := NewMetrics("n1")
	m.ObserveCPUs(stat(t, "proc-0"), as, topo)
	if n := testutil.CollectAndCount(m.cpuBusy); n != 0 {
		t.Fatalf("first sample exported %d series", n)
	}
	m.ObserveCPUs(stat(t, "proc-1"), as, topo)
	want := `
# HELP sealfleet_node_cpu_busy_ratio Fraction of the last sampling interval that a CPU assigned to a running batch's hasher or coordinator was busy (from /proc/stat).
# TYPE sealfleet_node_cpu_busy_ratio gauge
sealfleet_node_cpu_busy_ratio{batch="ns/b1",ccx="0",cpu="0",node="n1",role="coordinator"} 0.5
sealfleet_node_cpu_busy_ratio{batch="ns/b1",ccx="0",cpu="1",node="n1",role="hasher"} 1
sealfleet_node_cpu_busy_ratio{batch="ns/b1",ccx="0",cpu="17",node="n1",role="hasher"} 0
`
	if err := testutil.CollectAndCompare(m.cpuBusy, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// Batch gone: its series disappear on the next sample.
	m.ObserveCPUs(stat(t, "proc-1"), nil, topo)
	if n := testutil.CollectAndCount(m.cpuBusy); n != 0 {
		t.Errorf("%d stale series", n)
	}
	// Fixture /proc/stat read through the file path.
	if err := m.ObserveStatFile("../topology/testdata/epyc-7313", as, topo); err != nil {
		t.Fatal(err)
	}
}

func TestInventoryMetrics(t *testing.T) {
	topo, err := topology.Discover("../topology/testdata/epyc-9654-nps4")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics("n1")
	m.ObserveInventory(topo, &nodeprep.Result{Devices: nil})
	if got := testutil.ToFloat64(m.hugeFree.WithLabelValues("n1", "3", "1Gi")); got != 18 {
		t.Errorf("hugepages free = %v", got)
	}
	if n := testutil.CollectAndCount(m.hugeFree); n != 8 {
		t.Errorf("%d hugepage series, want 4 nodes x 2 sizes", n)
	}
}
