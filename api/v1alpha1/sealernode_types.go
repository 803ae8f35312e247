package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SealerNodeSpec is the administrator's intent for one node; the node agent changes the
// machine only as far as this spec asks.
// +kubebuilder:validation:XValidation:rule="!has(self.outputPaths) || self.outputPaths.all(p, self.hostPathRoots.exists(r, p == r || p.startsWith(r + '/')))",fieldPath=".outputPaths",message="spec.outputPaths: every output path must lie under one of spec.hostPathRoots; add its directory there or choose a path under a root"
// +kubebuilder:validation:XValidation:rule="(has(self.parentCache) && has(self.parentCache.path) ? [self.parentCache.path] : ['/var/lib/sealfleet/parent-cache']).all(p, self.hostPathRoots.exists(r, p == r || p.startsWith(r + '/')))",fieldPath=".parentCache",message="spec.parentCache.path: the parent-cache directory (default /var/lib/sealfleet/parent-cache) must lie under one of spec.hostPathRoots; add it there or set parentCache.path under a root"
// +kubebuilder:validation:XValidation:rule="!has(self.layerDevices) || self.layerDevices.all(d, !has(d.path) || d.path.startsWith('/dev/') || self.hostPathRoots.exists(r, d.path == r || d.path.startsWith(r + '/')))",fieldPath=".layerDevices",message="spec.layerDevices: a file-backed layer device must lie under one of spec.hostPathRoots (block devices under /dev/ are named one by one instead)"
// +kubebuilder:validation:XValidation:rule="self.deviceMode != 'vfio' || self.layerDevices.all(d, has(d.pciAddress))",message="spec.layerDevices: deviceMode vfio needs every device given by pciAddress (SPDK addresses controllers, not block devices)"
type SealerNodeSpec struct {
	// layerDevices are the NVMe devices (or, for tests, files) dedicated to PC1 layers. Only
	// these are ever bound or written; everything else on the node is left alone.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	LayerDevices []LayerDevice `json:"layerDevices,omitempty"`

	// deviceMode is how the sealer reaches the layer devices: kernel (the NVMe driver stays
	// bound; the sealer uses io_uring with O_DIRECT) or vfio (bound to vfio-pci for SPDK; not
	// tested in this project's CI).
	// +kubebuilder:validation:Enum=kernel;vfio
	// +kubebuilder:default=kernel
	// +optional
	DeviceMode DeviceMode `json:"deviceMode,omitempty"`

	// hugepages1GiPerNUMANode is the number of 1 GiB hugepages the agent reserves on each
	// NUMA node. 0 (the default) leaves the hugepage pool as it is.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4096
	// +optional
	Hugepages1GiPerNUMANode int32 `json:"hugepages1GiPerNUMANode,omitempty"`

	// pipelines is how many batches may run PC1 on this node at once (each needs its own slot).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2
	// +kubebuilder:default=1
	// +optional
	Pipelines int32 `json:"pipelines,omitempty"`

	// hashersPerCore overrides the detected number of hasher threads per physical core
	// (1 for Zen2 and older, 2 where SMT siblings hash well). 0 means detect.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2
	// +optional
	HashersPerCore int32 `json:"hashersPerCore,omitempty"`

	// sharedCores lets a node too small for a dedicated core layout run batches with the
	// coordinator, hashers and every sealer role on one physical core. For development
	// machines and test sector sizes only (the local cluster's real node); throughput is not
	// representative. Ignored where a dedicated layout fits.
	// +optional
	SharedCores bool `json:"sharedCores,omitempty"`

	// reservedCPUs is a Linux cpulist (e.g. "0-1,64-65") the sealer must never use.
	// +kubebuilder:validation:Pattern=`^$|^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	ReservedCPUs string `json:"reservedCPUs,omitempty"`

	// slotBytes is the size of one layer slot summed over the layer devices. Unset: the
	// devices' capacity divided by pipelines.
	// +optional
	SlotBytes *resource.Quantity `json:"slotBytes,omitempty"`

	// hostPathRoots are the host directories sealfleet may touch on this node: every
	// file-backed layer device, output path and the parent-cache directory must lie under one
	// (checked here), and so must every batch's host paths (data source, sector keys: placement
	// keeps a batch whose paths lie elsewhere off the node). Block devices under /dev/ are named
	// one by one in layerDevices instead. The scrub re-checks each layer file on the node: its
	// real path, symlinks resolved, must stay under its root.
	// +kubebuilder:default={"/var/lib/sealfleet"}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^(/[^/\x00]+)+$`
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.all(r, !r.matches('/[.][.]?(/|$)'))",message="spec.hostPathRoots: absolute directories without . or .. segments, e.g. /var/lib/sealfleet or /srv/deals"
	// +listType=set
	// +optional
	HostPathRoots []string `json:"hostPathRoots,omitempty"`

	// outputPaths are the host directories sealer pods write outputs to (a batch's
	// spec.output.hostPath, or the operator's default /var/lib/sealfleet/output). The agent
	// reports each one's file system, and placement books every batch's output bytes against
	// it; a batch writing to a host path not listed here is not placed on this node.
	// +kubebuilder:default={"/var/lib/sealfleet/output"}
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^/[^\x00]*$`
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=set
	// +optional
	OutputPaths []string `json:"outputPaths,omitempty"`

	// parentCache is where the node keeps the stacked-DRG parent caches its sealers read (one
	// file per graph, built once per node by a builder pod, verified by digest) and which ones
	// are built before any batch asks; the others are built when a batch needs them.
	// +optional
	ParentCache *ParentCacheSpec `json:"parentCache,omitempty"`

	// cordon stops new batches from being placed here; running batches finish.
	// +optional
	Cordon bool `json:"cordon,omitempty"`

	// dryRun makes the agent report what it would change without changing it.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// qualify says when the operator measures what this node can do (status.qualification):
	// OnJoin (the default) when the node becomes Ready, when its layer devices change and on
	// request; OnRequest only when the sealfleet.io/qualify annotation changes (for nodes
	// that must not run a qualification pod unasked, e.g. simulated ones).
	// +kubebuilder:validation:Enum=OnJoin;OnRequest
	// +kubebuilder:default=OnJoin
	// +optional
	Qualify QualifyPolicy `json:"qualify,omitempty"`
}

// QualifyPolicy is when a node is qualified.
type QualifyPolicy string

// Qualification policies.
const (
	QualifyOnJoin    QualifyPolicy = "OnJoin"
	QualifyOnRequest QualifyPolicy = "OnRequest"
)

// AnnotationQualify on a SealerNode asks for a new qualification: any new value (kubectl
// sealfleet qualify writes the time) starts one; status.qualification.request echoes the
// value it answered.
const AnnotationQualify = "sealfleet.io/qualify"

// LayerDevice names one device dedicated to layers.
// +kubebuilder:validation:XValidation:rule="[has(self.pciAddress), has(self.path)].exists_one(x, x)",message="each spec.layerDevices entry needs exactly one of pciAddress or path"
type LayerDevice struct {
	// pciAddress is an NVMe controller's PCI address (BDF), e.g. 0000:41:00.0.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{4}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$`
	// +optional
	PCIAddress string `json:"pciAddress,omitempty"`

	// path is a block device (/dev/nvme1n1) or a regular file (tests, tmpfs).
	// +kubebuilder:validation:Pattern=`^/[^\x00]*$`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Path string `json:"path,omitempty"`

	// capacity is required for a regular file path that does not exist yet: the size the
	// sealer may grow it to.
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`
}

// DeviceMode is how layer devices are accessed.
type DeviceMode string

// Device modes.
const (
	DeviceModeKernel DeviceMode = "kernel"
	DeviceModeVFIO   DeviceMode = "vfio"
)

// SealerNodeStatus is what the node agent found. The node agent writes all of it except
// dirtySlots, which the operator owns: who holds which slot is recorded in each SealBatch's
// status, and only a slot no batch holds any more but that still needs its scrub is
// recorded here.
type SealerNodeStatus struct {
	// observedGeneration is the spec generation the agent last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Degraded, HugepagesShort, DevicesNotReady.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// cpu is the processor topology.
	// +optional
	CPU *CPUTopology `json:"cpu,omitempty"`

	// numaNodes lists NUMA nodes with their CPUs and hugepages.
	// +listType=atomic
	// +optional
	NUMANodes []NUMANode `json:"numaNodes,omitempty"`

	// nvme lists NVMe controllers.
	// +listType=atomic
	// +optional
	NVMe []NVMeDevice `json:"nvme,omitempty"`

	// gpus lists GPUs.
	// +listType=atomic
	// +optional
	GPUs []GPU `json:"gpus,omitempty"`

	// layerDevices are the devices from spec.layerDevices as the agent found them.
	// +listType=atomic
	// +optional
	LayerDevices []LayerDeviceStatus `json:"layerDevices,omitempty"`

	// capabilities: what this node can seal.
	// +optional
	Capabilities *Capabilities `json:"capabilities,omitempty"`

	// slots is how the layer space divides into slots (from the ready layer devices and
	// spec.pipelines / spec.slotBytes), as the operator computes it too.
	// +optional
	Slots *SlotGeometry `json:"slots,omitempty"`

	// freeCores is the number of physical cores the sealer may use (shown by kubectl get).
	// +optional
	FreeCores int32 `json:"freeCores"`
	// freeSlots is the number of layer slots no batch placed here holds (as of the agent's
	// last scan; placement derives its own view from the batches).
	// +optional
	FreeSlots int32 `json:"freeSlots"`
	// hugepages1GiFree sums free 1 GiB hugepages over NUMA nodes.
	// +optional
	Hugepages1GiFree int32 `json:"hugepages1GiFree"`

	// parentCaches are the caches in the node's parent-cache directory, as their manifests
	// and files say.
	// +listType=map
	// +listMapKey=proof
	// +optional
	ParentCaches []ParentCacheStatus `json:"parentCaches,omitempty"`

	// outputVolumes is the file system under each spec.outputPaths entry: what it holds and
	// what is still free (placement subtracts what running batches booked).
	// +listType=map
	// +listMapKey=path
	// +optional
	OutputVolumes []OutputVolume `json:"outputVolumes,omitempty"`

	// sectorDataURL is where this node's agent serves sealed sector data to remote-seal
	// partners (signed, short-lived URLs the operator hands out); empty: not served.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	SectorDataURL string `json:"sectorDataURL,omitempty"`

	// lastScanTime is when the agent last read the machine.
	// +optional
	LastScanTime *metav1.Time `json:"lastScanTime,omitempty"`

	// dirtySlots are layer ranges released batches left behind that are not scrubbed yet
	// (written by the operator, not the agent). A dirty range is booked like a held slot:
	// no batch is placed on it until the operator's scrub pod has discarded it.
	// +listType=map
	// +listMapKey=slot
	// +kubebuilder:validation:MaxItems=64
	// +optional
	DirtySlots []DirtySlot `json:"dirtySlots,omitempty"`

	// qualification is what the node measured it can do, by the operator's qualification
	// pod (written by the operator, not the agent): placement predicts batch times from it.
	// +optional
	Qualification *Qualification `json:"qualification,omitempty"`
}

// Qualification is one measurement of a node by `sealer qualify` in a qualification pod.
// Reads go anywhere on the layer devices; writes only inside a slot no batch held, booked for
// the test and scrubbed after it.
type Qualification struct {
	// measuredTime is when the measurement ended.
	// +optional
	MeasuredTime *metav1.Time `json:"measuredTime,omitempty"`
	// durationMilliseconds is how long it ran.
	// +optional
	DurationMilliseconds int64 `json:"durationMilliseconds,omitempty"`
	// tool is the program and version that measured (sealer 0.1.0).
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Tool string `json:"tool,omitempty"`
	// request is the sealfleet.io/qualify annotation value this qualification answered.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Request string `json:"request,omitempty"`
	// devicesKey names the layer devices measured; a different set starts a new qualification.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	DevicesKey string `json:"devicesKey,omitempty"`
	// layerDevices are the rates of each layer device.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	LayerDevices []DeviceQualification `json:"layerDevices,omitempty"`
	// hashKernel is the SHA-256 kernel measured (sha-ni, or portable without SHA-NI), and
	// labelsPerSecondPerThread one hasher thread's SDR labelling bound with it (the sealer's
	// own kernel, two sectors per call, parents in memory).
	// +optional
	HashKernel string `json:"hashKernel,omitempty"`
	// +optional
	LabelsPerSecondPerThread int64 `json:"labelsPerSecondPerThread,omitempty"`
	// hugepages1GiFree is the free 1 GiB hugepages; hugepages1GiMapped how many of those the
	// probe mapped and touched (it maps at most one), and hugepagesError why a map failed.
	// +optional
	Hugepages1GiFree int32 `json:"hugepages1GiFree"`
	// +optional
	Hugepages1GiMapped int32 `json:"hugepages1GiMapped"`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	HugepagesError string `json:"hugepagesError,omitempty"`
	// memoryCopyBytesPerSecond is the memory copy bandwidth over the probe's threads.
	// +optional
	MemoryCopyBytesPerSecond int64 `json:"memoryCopyBytesPerSecond,omitempty"`
	// gpu is the GPU the sealer image opens here (its speed is not measured), or empty.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	GPU string `json:"gpu,omitempty"`
	// message says why the qualification failed, or what it could not measure.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// DeviceQualification is one layer device's measured rates (0: not measured, see error).
type DeviceQualification struct {
	// path is the device as the sealer sees it.
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path"`
	// randomReadIOPS is 4 KiB random reads per second with O_DIRECT at queueDepth.
	// +optional
	RandomReadIOPS int64 `json:"randomReadIOPS"`
	// +optional
	QueueDepth int32 `json:"queueDepth,omitempty"`
	// seqReadBytesPerSecond and seqWriteBytesPerSecond are 1 MiB sequential transfers.
	// +optional
	SeqReadBytesPerSecond int64 `json:"seqReadBytesPerSecond"`
	// +optional
	SeqWriteBytesPerSecond int64 `json:"seqWriteBytesPerSecond"`
	// writeSkipped says why the write was not measured.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	WriteSkipped string `json:"writeSkipped,omitempty"`
	// direct is false where O_DIRECT was refused (tmpfs): the rates are the page cache's.
	// +optional
	Direct bool `json:"direct"`
	// error says why the device could not be measured.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Error string `json:"error,omitempty"`
}

// ReadIOPS sums the measured random-read rates of the devices (0 when none was measured).
func (q *Qualification) ReadIOPS() int64 {
	var n int64
	for _, d := range q.LayerDevices {
		n += d.RandomReadIOPS
	}
	return n
}

// DirtySlot is a slot's layer range that a released batch wrote and nobody has scrubbed yet.
type DirtySlot struct {
	// slot is the slot index the batch held.
	Slot int32 `json:"slot"`
	// offsetBytes and lengthBytes are the range on every layer device.
	OffsetBytes int64 `json:"offsetBytes"`
	LengthBytes int64 `json:"lengthBytes"`
	// batch is <namespace>/<name> of the batch that left it, and batchUID its UID.
	// +kubebuilder:validation:MaxLength=317
	Batch string `json:"batch"`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	BatchUID string `json:"batchUID,omitempty"`
	// since is when the batch released it.
	Since metav1.Time `json:"since"`
	// attempts counts scrub pods that failed or could not be created; lastAttemptTime is
	// when the last one ended.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// +optional
	LastAttemptTime *metav1.Time `json:"lastAttemptTime,omitempty"`
	// message says what the scrub waits for, or why the last attempt failed.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// DefaultHostPathRoot is a node's host path root when its spec names none.
const DefaultHostPathRoot = "/var/lib/sealfleet"

// Roots are the node's host path roots (the default when the spec names none).
func (s *SealerNodeSpec) Roots() []string {
	if len(s.HostPathRoots) == 0 {
		return []string{DefaultHostPathRoot}
	}
	return s.HostPathRoots
}

// RootOf is the root p lies under ("" when none): p must be absolute and clean.
func (s *SealerNodeSpec) RootOf(p string) string {
	for _, r := range s.Roots() {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return r
		}
	}
	return ""
}

// UsableLayerDevices are the ready layer devices of the status that the spec names: by path,
// or by PCI address with a block device under /dev/ (kernel mode) or none (vfio). The status is
// the node agent's word, the spec the administrator's: a device only the status lists is never
// given to a sealer or scrubbed.
func (sn *SealerNode) UsableLayerDevices() []LayerDeviceStatus {
	var out []LayerDeviceStatus
	for _, d := range sn.Status.LayerDevices {
		if !d.Ready {
			continue
		}
		for _, s := range sn.Spec.LayerDevices {
			byPath := s.Path != "" && s.Path == d.Path
			byPCI := s.PCIAddress != "" && s.PCIAddress == d.PCIAddress && (d.Path == "" || strings.HasPrefix(d.Path, "/dev/"))
			if byPath || byPCI {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// ParentCacheSpec is the node's parent-cache directory.
type ParentCacheSpec struct {
	// path is the host directory (default /var/lib/sealfleet/parent-cache). A 32 GiB graph's
	// cache is 56 GiB, a 64 GiB one 112 GiB.
	// +kubebuilder:validation:Pattern=`^/[^\x00]*$`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Path string `json:"path,omitempty"`

	// proofs are registered proofs (e.g. StackedDrg32GiBV1_1) whose caches are built as soon
	// as the node is Ready, so the first batch does not wait for one.
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:Pattern=`^StackedDrg(2KiB|8MiB|512MiB|32GiB|64GiB)(V1|V1_1|V1_1_Feat_SyntheticPoRep|V1_2_Feat_NonInteractivePoRep)$`
	// +listType=set
	// +optional
	Proofs []string `json:"proofs,omitempty"`
}

// DefaultParentCachePath is a node's parent-cache directory when its spec names none.
const DefaultParentCachePath = "/var/lib/sealfleet/parent-cache"

// CachePath is the node's parent-cache directory.
func (s *SealerNodeSpec) CachePath() string {
	if s.ParentCache == nil || s.ParentCache.Path == "" {
		return DefaultParentCachePath
	}
	return s.ParentCache.Path
}

// ParentCacheStatus is one cache in the node's parent-cache directory.
type ParentCacheStatus struct {
	// proof is the registered proof whose graph it is.
	Proof string `json:"proof"`
	// bytes is the cache file's size.
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
	// verified is true when the file was built and its digest recorded, and it still has the
	// recorded size (sealers check the digest itself before use).
	Verified bool `json:"verified"`
	// building is true while a builder writes it; percent is how far it got.
	// +optional
	Building bool `json:"building,omitempty"`
	// +optional
	Percent int32 `json:"percent,omitempty"`
	// reason says why an unverified cache cannot be used.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// OutputVolume is the file system holding one output path.
type OutputVolume struct {
	// path is the spec.outputPaths entry.
	Path string `json:"path"`
	// capacityBytes is the file system's size.
	CapacityBytes int64 `json:"capacityBytes"`
	// availableBytes is what unprivileged writers may still use.
	AvailableBytes int64 `json:"availableBytes"`
	// reason says why the path could not be measured (then both sizes are 0).
	// +optional
	Reason string `json:"reason,omitempty"`
}

// CPUTopology describes the processors.
type CPUTopology struct {
	// model is the CPU model name.
	Model string `json:"model,omitempty"`
	// vendor is the CPU vendor id (AuthenticAMD, GenuineIntel).
	// +optional
	Vendor string `json:"vendor,omitempty"`
	// family is the x86 CPU family (25 = Zen3/Zen4, 23 = Zen/Zen2).
	// +optional
	Family int32 `json:"family,omitempty"`
	// shaNI, avx2 and avx512 are the hashing-relevant CPU flags.
	// +optional
	SHANI bool `json:"shaNI,omitempty"`
	// +optional
	AVX2 bool `json:"avx2,omitempty"`
	// +optional
	AVX512 bool `json:"avx512,omitempty"`
	// sockets, physicalCores and logicalCPUs count the whole machine.
	// +optional
	Sockets int32 `json:"sockets,omitempty"`
	// +optional
	PhysicalCores int32 `json:"physicalCores,omitempty"`
	// +optional
	LogicalCPUs int32 `json:"logicalCPUs,omitempty"`
	// threadsPerCore is 2 with SMT on, 1 with it off.
	// +optional
	ThreadsPerCore int32 `json:"threadsPerCore,omitempty"`
	// l3Groups are the core complexes that share an L3 cache.
	// +listType=atomic
	// +optional
	L3Groups []L3Group `json:"l3Groups,omitempty"`
}

// L3Group is a set of cores sharing an L3 cache (an AMD CCX, or an Intel socket's L3).
type L3Group struct {
	// id numbers groups in order of their lowest CPU.
	ID int32 `json:"id"`
	// socket is the package id.
	// +optional
	Socket int32 `json:"socket"`
	// numaNode is the NUMA node of the group's CPUs.
	// +optional
	NUMANode int32 `json:"numaNode"`
	// cores are the physical cores, each with its logical CPUs (SMT siblings).
	// +listType=atomic
	Cores []Core `json:"cores"`
}

// Core is one physical core.
type Core struct {
	// cpus are the logical CPU ids of the core, lowest first.
	// +listType=atomic
	CPUs []int32 `json:"cpus"`
}

// NUMANode is one NUMA node.
type NUMANode struct {
	// id is the NUMA node number.
	ID int32 `json:"id"`
	// cpus is the node's cpulist.
	// +optional
	CPUs string `json:"cpus,omitempty"`
	// hugepages per page size.
	// +listType=atomic
	// +optional
	Hugepages []Hugepages `json:"hugepages,omitempty"`
}

// Hugepages counts hugepages of one size.
type Hugepages struct {
	// pageSize, e.g. 1Gi or 2Mi.
	PageSize string `json:"pageSize"`
	// total and free page counts.
	Total int64 `json:"total"`
	Free  int64 `json:"free"`
}

// NVMeDevice is one NVMe controller.
type NVMeDevice struct {
	// pciAddress is the BDF.
	PCIAddress string `json:"pciAddress"`
	// +optional
	Vendor string `json:"vendor,omitempty"`
	// +optional
	Device string `json:"device,omitempty"`
	// +optional
	Model string `json:"model,omitempty"`
	// +optional
	Serial string `json:"serial,omitempty"`
	// driver bound now (nvme, vfio-pci, or empty).
	// +optional
	Driver string `json:"driver,omitempty"`
	// +optional
	IOMMUGroup string `json:"iommuGroup,omitempty"`
	// numaNode is -1 when the platform does not say.
	// +optional
	NUMANode int32 `json:"numaNode"`
	// namespaces visible while on the kernel driver.
	// +listType=atomic
	// +optional
	Namespaces []NVMeNamespace `json:"namespaces,omitempty"`
}

// NVMeNamespace is a block device of an NVMe controller.
type NVMeNamespace struct {
	// name is the block device name (nvme0n1).
	Name string `json:"name"`
	// capacityBytes and lbaBytes describe its size and format.
	// +optional
	CapacityBytes int64 `json:"capacityBytes,omitempty"`
	// +optional
	LBABytes int32 `json:"lbaBytes,omitempty"`
	// inUse explains why the namespace is not free (mounted, holders, partitions), or is empty.
	// +optional
	InUse string `json:"inUse,omitempty"`
}

// GPU is one GPU PCI function.
type GPU struct {
	PCIAddress string `json:"pciAddress"`
	// +optional
	Vendor string `json:"vendor,omitempty"`
	// +optional
	Model string `json:"model,omitempty"`
	// +optional
	NUMANode int32 `json:"numaNode"`
}

// LayerDeviceStatus is one layer device as the agent found and prepared it.
type LayerDeviceStatus struct {
	// pciAddress or path, as in spec.
	// +optional
	PCIAddress string `json:"pciAddress,omitempty"`
	// +optional
	Path string `json:"path,omitempty"`
	// capacityBytes usable for layers.
	// +optional
	CapacityBytes int64 `json:"capacityBytes,omitempty"`
	// numaNode of the device (-1 unknown).
	// +optional
	NUMANode int32 `json:"numaNode"`
	// iommuGroup, for vfio mode.
	// +optional
	IOMMUGroup string `json:"iommuGroup,omitempty"`
	// ready is true when the device can be handed to a sealer.
	Ready bool `json:"ready"`
	// reason says why it is not ready (mounted, has partitions, not on the allow-list …).
	// +optional
	Reason string `json:"reason,omitempty"`
}

// Capabilities is what the node can seal.
type Capabilities struct {
	// batchSizes this node's CPUs can run.
	// +listType=atomic
	// +optional
	BatchSizes []int32 `json:"batchSizes,omitempty"`
	// unsupported explains, per batch size, why it cannot run here.
	// +listType=atomic
	// +optional
	Unsupported []UnsupportedBatchSize `json:"unsupported,omitempty"`
	// hashersPerCore in use (1 or 2).
	// +optional
	HashersPerCore int32 `json:"hashersPerCore,omitempty"`
	// pc2Engines are the PC2 engines the node's sealer image runs on this node, as the image
	// itself reported them (`sealer capabilities`, run by the node agent's init container):
	// gpu only where an OpenCL device opens. Empty: not reported, and placement counts on cpu
	// only.
	// +listType=atomic
	// +optional
	PC2Engines []PC2Engine `json:"pc2Engines,omitempty"`
	// gpuEngine names the device the GPU engine uses on this node, or why it has none.
	// +optional
	GPUEngine string `json:"gpuEngine,omitempty"`
	// gpuMemoryBytes is the memory of the GPU engine's device as the image reported it (0:
	// none reported). Placement keeps a pc2Engine gpu batch off a node whose GPU cannot hold
	// one page of the batch's rows (the sealer sizes its ranges to the rest).
	// +optional
	GPUMemoryBytes int64 `json:"gpuMemoryBytes,omitempty"`
	// gpuMaxAllocBytes is the largest single allocation that device allows.
	// +optional
	GPUMaxAllocBytes int64 `json:"gpuMaxAllocBytes,omitempty"`
	// layerDeviceModes are the spec.deviceMode values the node's sealer image can read layer
	// devices in, as it reported them (kernel: io_uring on block devices and files; vfio only
	// for an image with an SPDK backend). Placement keeps batches off a node whose deviceMode
	// is not listed.
	// +listType=atomic
	// +optional
	LayerDeviceModes []DeviceMode `json:"layerDeviceModes,omitempty"`
}

// UnsupportedBatchSize says why a batch size cannot run.
type UnsupportedBatchSize struct {
	BatchSize int32  `json:"batchSize"`
	Reason    string `json:"reason"`
}

// SlotGeometry divides a node's layer space into equal slots: slot i is the range
// [i × slotBytes/devices, (i+1) × slotBytes/devices) of every ready layer device.
type SlotGeometry struct {
	// slotBytes is the size of one slot over all layer devices.
	// +optional
	SlotBytes int64 `json:"slotBytes,omitempty"`
	// count is the number of slots.
	// +optional
	Count int32 `json:"count,omitempty"`
}

// SealerNode is one opted-in node's sealing inventory (named after the Node).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=sn;snode,categories=sealfleet
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=`.status.cpu.model`
// +kubebuilder:printcolumn:name="Free Cores",type=integer,JSONPath=`.status.freeCores`
// +kubebuilder:printcolumn:name="Free Slots",type=integer,JSONPath=`.status.freeSlots`
// +kubebuilder:printcolumn:name="Hugepages Free",type=integer,JSONPath=`.status.hugepages1GiFree`,description="free 1 GiB hugepages"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SealerNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the administrator's intent.
	// +optional
	Spec SealerNodeSpec `json:"spec,omitempty"`
	// status is written by the node agent (all but dirtySlots, which the operator owns).
	// +optional
	Status SealerNodeStatus `json:"status,omitempty"`
}

// SealerNodeList is a list of SealerNodes.
// +kubebuilder:object:root=true
type SealerNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SealerNode `json:"items"`
}
