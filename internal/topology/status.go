package topology

import (
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/layout"
)

// CPUStatus converts the CPU part for SealerNode status.
func (t *Topology) CPUStatus() *v1alpha1.CPUTopology {
	c := &v1alpha1.CPUTopology{
		Model: t.CPU.Model, Vendor: t.CPU.Vendor, Family: int32(t.CPU.Family),
		SHANI: t.CPU.SHANI, AVX2: t.CPU.AVX2, AVX512: t.CPU.AVX512,
		Sockets: int32(t.Sockets), PhysicalCores: int32(t.Cores), LogicalCPUs: int32(t.Logical),
		ThreadsPerCore: int32(t.Threads),
	}
	for _, g := range t.L3Groups {
		sg := v1alpha1.L3Group{ID: int32(g.ID), Socket: int32(g.Socket), NUMANode: int32(g.NUMA), Cores: []v1alpha1.Core{}}
		for _, core := range g.Cores {
			cc := v1alpha1.Core{CPUs: make([]int32, len(core))}
			for i, x := range core {
				cc.CPUs[i] = int32(x)
			}
			sg.Cores = append(sg.Cores, cc)
		}
		c.L3Groups = append(c.L3Groups, sg)
	}
	return c
}

// PageSize names a hugepage size the way Kubernetes does ("1Gi", "2Mi").
func PageSize(kb int64) string {
	return resource.NewQuantity(kb*1024, resource.BinarySI).String()
}

// NUMAStatus converts the NUMA nodes and their hugepages.
func (t *Topology) NUMAStatus() []v1alpha1.NUMANode {
	var out []v1alpha1.NUMANode
	for _, n := range t.NUMANodes {
		sn := v1alpha1.NUMANode{ID: int32(n.ID), CPUs: n.CPUs}
		for _, h := range n.Hugepages {
			sn.Hugepages = append(sn.Hugepages, v1alpha1.Hugepages{PageSize: PageSize(h.SizeKB), Total: h.Total, Free: h.Free})
		}
		out = append(out, sn)
	}
	return out
}

// NVMeStatus converts the NVMe controllers.
func (t *Topology) NVMeStatus() []v1alpha1.NVMeDevice {
	var out []v1alpha1.NVMeDevice
	for _, n := range t.NVMe {
		d := v1alpha1.NVMeDevice{
			PCIAddress: n.BDF, Vendor: n.Vendor, Device: n.Device, Model: n.Model, Serial: n.Serial,
			Driver: n.Driver, IOMMUGroup: n.IOMMUGroup, NUMANode: int32(n.NUMA),
		}
		for _, ns := range n.Namespaces {
			d.Namespaces = append(d.Namespaces, v1alpha1.NVMeNamespace{
				Name: ns.Name, CapacityBytes: ns.CapacityBytes, LBABytes: int32(ns.LBABytes), InUse: ns.InUse(),
			})
		}
		out = append(out, d)
	}
	return out
}

// GPUStatus converts the GPUs.
func (t *Topology) GPUStatus() []v1alpha1.GPU {
	var out []v1alpha1.GPU
	for _, g := range t.GPUs {
		model := g.Model
		if model == "" {
			model = "device " + g.Device
		}
		out = append(out, v1alpha1.GPU{PCIAddress: g.BDF, Vendor: g.Vendor, Model: model, NUMANode: int32(g.NUMA)})
	}
	return out
}

// ApplyTo fills the inventory fields of a SealerNode status (cpu, numaNodes, nvme, gpus,
// hugepages1GiFree); it leaves everything else alone.
func (t *Topology) ApplyTo(st *v1alpha1.SealerNodeStatus) {
	st.CPU = t.CPUStatus()
	st.NUMANodes = t.NUMAStatus()
	st.NVMe = t.NVMeStatus()
	st.GPUs = t.GPUStatus()
	st.Hugepages1GiFree = int32(t.Hugepages1GiFree())
}

// Hugepages1GiFree sums free 1 GiB pages over NUMA nodes.
func (t *Topology) Hugepages1GiFree() int64 {
	var n int64
	for _, node := range t.NUMANodes {
		for _, h := range node.Hugepages {
			if h.SizeKB == 1<<20 {
				n += h.Free
			}
		}
	}
	return n
}

// Layout is the calculator's input for this machine.
func (t *Topology) Layout() layout.Topology { return layout.FromStatus(t.CPUStatus()) }

// FindNVMe returns the controller with this BDF.
func (t *Topology) FindNVMe(bdf string) *NVMe {
	for i := range t.NVMe {
		if t.NVMe[i].BDF == bdf {
			return &t.NVMe[i]
		}
	}
	return nil
}
