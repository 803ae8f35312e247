// Package nodeprep prepares a node for sealing, and only as far as the SealerNode spec asks:
// it raises the 1 GiB hugepage pool per NUMA node to spec.hugepages1GiPerNUMANode and puts
// the allow-listed layer devices (spec.layerDevices) on the driver spec.deviceMode needs
// (vfio-pci for SPDK, the kernel nvme driver for io_uring). It refuses, with a reason, any
// device that is mounted, backs the root filesystem, is used as swap, has holders
// (RAID/LVM/device-mapper), partitions or on-disk signatures, or is not on the allow-list.
//
// Every change is a write of one sysfs file under the given root, so it runs the same on a
// host ("/") and on a writable copy of a fixture tree; it is idempotent (a second run with
// nothing to do writes nothing) and has a dry-run mode that only reports the writes.
package nodeprep

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/topology"
)

// Action is one sysfs write, done or (dry run) planned.
type Action struct {
	// Path is relative to the root ("sys/bus/pci/drivers/nvme/unbind").
	Path  string `json:"path"`
	Value string `json:"value"`
	// Why names the intent ("bind 0000:03:00.0 to vfio-pci").
	Why string `json:"why"`
	// Err is the write error, if any.
	Err string `json:"err,omitempty"`
}

// HugepageResult is the 1 GiB pool of one NUMA node after preparation.
type HugepageResult struct {
	NUMANode int   `json:"numaNode"`
	Target   int64 `json:"target"`
	Total    int64 `json:"total"`
	Free     int64 `json:"free"`
	// Short is true when the kernel could not reach the target (fragmented memory: reserve
	// 1 GiB pages on the kernel command line instead).
	Short bool `json:"short"`
}

// Result is what Prepare did and found.
type Result struct {
	DryRun    bool                         `json:"dryRun"`
	Actions   []Action                     `json:"actions"`
	Hugepages []HugepageResult             `json:"hugepages,omitempty"`
	Devices   []v1alpha1.LayerDeviceStatus `json:"devices"`
}

// HugepagesShort reports whether some NUMA node is below its 1 GiB target.
func (r *Result) HugepagesShort() bool {
	for _, h := range r.Hugepages {
		if h.Short {
			return true
		}
	}
	return false
}

// DevicesNotReady lists the layer devices that cannot be handed to a sealer.
func (r *Result) DevicesNotReady() []v1alpha1.LayerDeviceStatus {
	var out []v1alpha1.LayerDeviceStatus
	for _, d := range r.Devices {
		if !d.Ready {
			out = append(out, d)
		}
	}
	return out
}

// Driver names.
const (
	DriverVFIO = "vfio-pci"
	DriverNVMe = "nvme"
)

type prep struct {
	root   string
	dryRun bool
	res    *Result
	topo   *topology.Topology
}

// Prepare applies spec to the machine under root (whose inventory is topo, freshly
// discovered). dryRun (or spec.dryRun) only plans. The returned error is for failures to
// act at all; per-device refusals are in Result.Devices.
func Prepare(root string, topo *topology.Topology, spec v1alpha1.SealerNodeSpec, dryRun bool) (*Result, error) {
	p := &prep{root: root, dryRun: dryRun || spec.DryRun, topo: topo}
	p.res = &Result{DryRun: p.dryRun, Actions: []Action{}, Devices: []v1alpha1.LayerDeviceStatus{}}
	var errs []error
	if spec.Hugepages1GiPerNUMANode > 0 {
		if err := p.hugepages(int64(spec.Hugepages1GiPerNUMANode)); err != nil {
			errs = append(errs, err)
		}
	}
	mode := spec.DeviceMode
	if mode == "" {
		mode = v1alpha1.DeviceModeKernel
	}
	seen := map[string]bool{}
	for _, d := range spec.LayerDevices {
		key := d.PCIAddress + d.Path
		if seen[key] {
			p.res.Devices = append(p.res.Devices, v1alpha1.LayerDeviceStatus{PCIAddress: d.PCIAddress, Path: d.Path, NUMANode: -1, Reason: "listed twice in spec.layerDevices"})
			continue
		}
		seen[key] = true
		if d.PCIAddress != "" {
			p.res.Devices = append(p.res.Devices, p.pciDevice(d.PCIAddress, mode, spec.LayerDevices))
		} else {
			p.res.Devices = append(p.res.Devices, p.pathDevice(d))
		}
	}
	return p.res, errors.Join(errs...)
}

func (p *prep) path(rel string) string { return filepath.Join(p.root, rel) }

func (p *prep) read(rel string) string {
	b, err := os.ReadFile(p.path(rel))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// write performs (or, dry-run, records) one sysfs write.
func (p *prep) write(rel, value, why string) error {
	a := Action{Path: rel, Value: value, Why: why}
	var err error
	if !p.dryRun {
		var f *os.File
		// sysfs attributes exist already; never create files on a real host.
		if f, err = os.OpenFile(p.path(rel), os.O_WRONLY|os.O_TRUNC, 0); err == nil {
			_, err = io.WriteString(f, value)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			a.Err = err.Error()
		}
	}
	p.res.Actions = append(p.res.Actions, a)
	return err
}

func (p *prep) hugepages(target int64) error {
	var errs []error
	for _, n := range p.topo.NUMANodes {
		dir := fmt.Sprintf("sys/devices/system/node/node%d/hugepages/hugepages-1048576kB", n.ID)
		total, err := strconv.ParseInt(p.read(dir+"/nr_hugepages"), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("NUMA node %d: 1 GiB hugepages not supported (no %s)", n.ID, dir))
			p.res.Hugepages = append(p.res.Hugepages, HugepageResult{NUMANode: n.ID, Target: target, Short: true})
			continue
		}
		// Only ever raise the pool: pages above the target may belong to someone else.
		if total < target {
			if err := p.write(dir+"/nr_hugepages", strconv.FormatInt(target, 10), fmt.Sprintf("reserve %d x 1Gi hugepages on NUMA node %d", target, n.ID)); err != nil {
				errs = append(errs, err)
			}
			if !p.dryRun {
				total, _ = strconv.ParseInt(p.read(dir+"/nr_hugepages"), 10, 64)
			}
		}
		free, _ := strconv.ParseInt(p.read(dir+"/free_hugepages"), 10, 64)
		p.res.Hugepages = append(p.res.Hugepages, HugepageResult{NUMANode: n.ID, Target: target, Total: total, Free: free, Short: total < target})
	}
	return errors.Join(errs...)
}

// allowed reports whether bdf is on the allow-list.
func allowed(bdf string, list []v1alpha1.LayerDevice) bool {
	for _, d := range list {
		if d.PCIAddress == bdf {
			return true
		}
	}
	return false
}

func (p *prep) pciDevice(bdf string, mode v1alpha1.DeviceMode, allow []v1alpha1.LayerDevice) v1alpha1.LayerDeviceStatus {
	st := v1alpha1.LayerDeviceStatus{PCIAddress: bdf, NUMANode: -1}
	refuse := func(format string, a ...any) v1alpha1.LayerDeviceStatus {
		st.Ready, st.Reason = false, fmt.Sprintf(format, a...)
		return st
	}
	if !allowed(bdf, allow) { // defensive: callers pass allow-listed devices only
		return refuse("not on the allow-list (spec.layerDevices)")
	}
	dev := "sys/bus/pci/devices/" + bdf
	if _, err := os.Stat(p.path(dev)); err != nil {
		return refuse("no PCI device %s on this node", bdf)
	}
	if class := p.read(dev + "/class"); class != topology.NVMeClass {
		return refuse("%s is not an NVMe controller (PCI class %s)", bdf, class)
	}
	n := p.topo.FindNVMe(bdf)
	if n == nil {
		return refuse("NVMe controller %s was not discovered", bdf)
	}
	st.NUMANode, st.IOMMUGroup = int32(n.NUMA), n.IOMMUGroup
	// Safety checks on every namespace the kernel driver shows.
	var capacity int64
	for _, ns := range n.Namespaces {
		if why := ns.InUse(); why != "" {
			return refuse("%s: %s", ns.Name, why)
		}
		if sig, err := p.signature(ns.Name); err != nil {
			return refuse("%s: %v", ns.Name, err)
		} else if sig != "" {
			return refuse("%s: has a %s signature (wipe it with wipefs -a only if the data is not needed)", ns.Name, sig)
		}
		capacity += ns.CapacityBytes
	}
	if n.Driver == DriverNVMe && len(n.Namespaces) == 0 {
		return refuse("no namespaces visible on the nvme driver")
	}
	st.CapacityBytes = capacity
	switch mode {
	case v1alpha1.DeviceModeVFIO:
		if n.IOMMUGroup == "" {
			return refuse("no IOMMU group: enable the IOMMU (amd_iommu=on or intel_iommu=on iommu=pt) to use vfio-pci")
		}
		if others := p.groupPeers(n.IOMMUGroup, bdf, allow); len(others) > 0 {
			return refuse("IOMMU group %s also holds %s, which are not layer devices; vfio needs the whole group", n.IOMMUGroup, strings.Join(others, ", "))
		}
		if n.Driver != DriverVFIO {
			if err := p.rebind(bdf, n.Driver, DriverVFIO); err != nil {
				return refuse("binding to vfio-pci failed: %v", err)
			}
		}
	default:
		if n.Driver == DriverVFIO || (n.Driver == "" && len(n.Namespaces) == 0) {
			if err := p.rebind(bdf, n.Driver, DriverNVMe); err != nil {
				return refuse("returning to the nvme driver failed: %v", err)
			}
			if !p.dryRun {
				// Namespaces appear asynchronously; the next scan checks them.
				return refuse("returned to the nvme driver; namespaces are checked on the next scan")
			}
		}
		if len(n.Namespaces) > 0 {
			st.Path = "/dev/" + n.Namespaces[0].Name
		}
	}
	if p.dryRun && ((mode == v1alpha1.DeviceModeVFIO && n.Driver != DriverVFIO) || (mode != v1alpha1.DeviceModeVFIO && n.Driver != DriverNVMe)) {
		return refuse("dry run: driver change planned, not made")
	}
	st.Ready = true
	return st
}

// rebind moves bdf from driver from to driver to: driver_override, unbind, drivers_probe.
func (p *prep) rebind(bdf, from, to string) error {
	dev := "sys/bus/pci/devices/" + bdf
	override := to
	if to == DriverNVMe {
		override = "\n" // clear the override; the nvme driver matches by class
	}
	if cur := p.read(dev + "/driver_override"); cur != to || to == DriverNVMe {
		if err := p.write(dev+"/driver_override", override, fmt.Sprintf("set driver_override of %s to %s", bdf, to)); err != nil {
			return err
		}
	}
	if from != "" && from != to {
		if err := p.write("sys/bus/pci/drivers/"+from+"/unbind", bdf, fmt.Sprintf("unbind %s from %s", bdf, from)); err != nil {
			return err
		}
	}
	return p.write("sys/bus/pci/drivers_probe", bdf, fmt.Sprintf("probe %s (binds %s)", bdf, to))
}

// groupPeers lists the other devices of an IOMMU group that are not on the allow-list
// (bridges excluded).
func (p *prep) groupPeers(group, bdf string, allow []v1alpha1.LayerDevice) []string {
	ents, err := os.ReadDir(p.path("sys/kernel/iommu_groups/" + group + "/devices"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		peer := e.Name()
		if peer == bdf || allowed(peer, allow) || strings.HasPrefix(p.read("sys/bus/pci/devices/"+peer+"/class"), "0x0604") {
			continue
		}
		out = append(out, peer)
	}
	return out
}

func (p *prep) pathDevice(d v1alpha1.LayerDevice) v1alpha1.LayerDeviceStatus {
	st := v1alpha1.LayerDeviceStatus{Path: d.Path, NUMANode: -1}
	name := filepath.Base(d.Path)
	// A block device the inventory knows: same safety rules as a controller.
	for _, n := range p.topo.NVMe {
		for _, ns := range n.Namespaces {
			if strings.HasPrefix(d.Path, "/dev/") && ns.Name == name {
				st.NUMANode = int32(n.NUMA)
				if why := ns.InUse(); why != "" {
					st.Reason = ns.Name + ": " + why
					return st
				}
				if sig, err := p.signature(ns.Name); err != nil {
					st.Reason = fmt.Sprintf("%s: %v", ns.Name, err)
					return st
				} else if sig != "" {
					st.Reason = fmt.Sprintf("%s: has a %s signature (wipe it with wipefs -a only if the data is not needed)", ns.Name, sig)
					return st
				}
				st.CapacityBytes, st.Ready = ns.CapacityBytes, true
				return st
			}
		}
	}
	if strings.HasPrefix(d.Path, "/dev/") {
		st.Reason = "not an NVMe namespace this agent discovered"
		return st
	}
	// A regular file (tests, tmpfs): its size, or the capacity it may grow to.
	fi, err := os.Stat(p.path(d.Path))
	switch {
	case err == nil && !fi.Mode().IsRegular():
		st.Reason = "not a regular file or NVMe block device"
	case err == nil:
		st.CapacityBytes, st.Ready = fi.Size(), true
		if d.Capacity != nil && d.Capacity.Value() > fi.Size() {
			st.CapacityBytes = d.Capacity.Value()
		}
	case d.Capacity != nil:
		st.CapacityBytes, st.Ready = d.Capacity.Value(), true
	default:
		st.Reason = "file does not exist and spec gives no capacity"
	}
	return st
}
