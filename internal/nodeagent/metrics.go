package nodeagent

import (
	"path/filepath"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sealfleet/sealfleet/internal/layout"
	"github.com/sealfleet/sealfleet/internal/nodeprep"
	"github.com/sealfleet/sealfleet/internal/topology"
)

// Metrics are the node agent's Prometheus gauges.
type Metrics struct {
	Registry  *prometheus.Registry
	cpuBusy   *prometheus.GaugeVec
	hugeFree  *prometheus.GaugeVec
	devReady  *prometheus.GaugeVec
	node      string
	mu        sync.Mutex
	prev      map[int]CPUTimes
	scanTotal *prometheus.CounterVec
	dataBytes *prometheus.CounterVec
}

// NewMetrics registers the agent's metrics in a fresh registry.
func NewMetrics(node string) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		node:     node,
		cpuBusy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sealfleet_node_cpu_busy_ratio",
			Help: "Fraction of the last sampling interval that a CPU assigned to a running batch's hasher or coordinator was busy (from /proc/stat).",
		}, []string{"node", "cpu", "role", "batch", "ccx"}),
		hugeFree: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sealfleet_node_hugepages_free",
			Help: "Free hugepages per NUMA node and page size.",
		}, []string{"node", "numa", "size"}),
		devReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sealfleet_node_layer_device_ready",
			Help: "1 when a layer device from spec.layerDevices can be handed to a sealer, else 0.",
		}, []string{"node", "device"}),
		scanTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealfleet_node_agent_scans_total",
			Help: "Node agent scans by result (ok, error).",
		}, []string{"node", "result"}),
		dataBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealfleet_node_sector_data_bytes_total",
			Help: "Bytes of sealed sector data this node served to remote-seal partners, by kind (sealed, cache, commit1).",
		}, []string{"node", "kind"}),
	}
	m.Registry.MustRegister(m.cpuBusy, m.hugeFree, m.devReady, m.scanTotal, m.dataBytes)
	return m
}

// SectorDataServed counts bytes the sector data server wrote.
func (m *Metrics) SectorDataServed(kind string, n int64) {
	m.dataBytes.WithLabelValues(m.node, kind).Add(float64(n))
}

// RunningBatch is a batch placed on this node in PC1 or PC2 with its layout.
type RunningBatch struct {
	// Name is <namespace>/<name>.
	Name   string
	Layout *layout.Layout
	// Moved maps layout CPUs to the CPUs the sealer runs them on, where the kubelet granted
	// others (the sealer's status.runningCPUs).
	Moved map[int]int
}

// cpu is where the batch runs the thread its layout put on CPU c.
func (b RunningBatch) cpu(c int) int {
	if to, ok := b.Moved[c]; ok {
		return to
	}
	return c
}

// Assignment is one CPU's role in a running batch.
type Assignment struct {
	CPU   int
	Role  string // "hasher" or "coordinator"
	Batch string
}

// Assignments lists the hasher and coordinator CPUs of the running batches, where they run.
func Assignments(batches []RunningBatch) []Assignment {
	var out []Assignment
	for _, b := range batches {
		if b.Layout == nil {
			continue
		}
		for _, c := range b.Layout.Coordinators {
			out = append(out, Assignment{CPU: b.cpu(c.CPU), Role: "coordinator", Batch: b.Name})
			for _, h := range c.Hashers {
				out = append(out, Assignment{CPU: b.cpu(h.CPU), Role: "hasher", Batch: b.Name})
			}
		}
	}
	return out
}

// ObserveCPUs samples stat (the /proc/stat content as read by ReadStat) and sets the busy
// ratio of every assigned CPU relative to the previous sample. The first sample only primes.
func (m *Metrics) ObserveCPUs(stat map[int]CPUTimes, assigned []Assignment, topo *topology.Topology) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cpuBusy.Reset()
	ccx := map[int]int{}
	if topo != nil {
		for _, g := range topo.L3Groups {
			for _, core := range g.Cores {
				for _, c := range core {
					ccx[c] = g.ID
				}
			}
		}
	}
	if m.prev != nil {
		for _, a := range assigned {
			prev, ok1 := m.prev[a.CPU]
			cur, ok2 := stat[a.CPU]
			if !ok1 || !ok2 {
				continue
			}
			if r, ok := BusyRatio(prev, cur); ok {
				g := ""
				if id, ok := ccx[a.CPU]; ok {
					g = strconv.Itoa(id)
				}
				m.cpuBusy.WithLabelValues(m.node, strconv.Itoa(a.CPU), a.Role, a.Batch, g).Set(r)
			}
		}
	}
	m.prev = stat
}

// ObserveStatFile reads root/proc/stat and calls ObserveCPUs.
func (m *Metrics) ObserveStatFile(root string, assigned []Assignment, topo *topology.Topology) error {
	stat, err := ReadStat(filepath.Join(root, "proc"))
	if err != nil {
		return err
	}
	m.ObserveCPUs(stat, assigned, topo)
	return nil
}

// ObserveInventory sets the hugepage and device gauges.
func (m *Metrics) ObserveInventory(topo *topology.Topology, prep *nodeprep.Result) {
	m.hugeFree.Reset()
	for _, n := range topo.NUMANodes {
		for _, h := range n.Hugepages {
			m.hugeFree.WithLabelValues(m.node, strconv.Itoa(n.ID), topology.PageSize(h.SizeKB)).Set(float64(h.Free))
		}
	}
	m.devReady.Reset()
	if prep != nil {
		for _, d := range prep.Devices {
			name := d.PCIAddress
			if name == "" {
				name = d.Path
			}
			v := 0.0
			if d.Ready {
				v = 1
			}
			m.devReady.WithLabelValues(m.node, name).Set(v)
		}
	}
}

// scanned counts a scan.
func (m *Metrics) scanned(err error) {
	r := "ok"
	if err != nil {
		r = "error"
	}
	m.scanTotal.WithLabelValues(m.node, r).Inc()
}
