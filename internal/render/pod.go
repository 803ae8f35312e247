package render

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/gpubudget"
	"github.com/sealfleet/sealfleet/internal/predict"
)

// Labels and names shared by the operator, the node agent and the monitoring rules.
const (
	LabelBatch          = "sealfleet.io/batch"
	LabelBatchNamespace = "sealfleet.io/batch-namespace"
	LabelBatchUID       = "sealfleet.io/batch-uid"
	LabelComponent      = "app.kubernetes.io/component"
	LabelName           = "app.kubernetes.io/name"
	ComponentSeal       = "sealer"
	ConfigKey           = "config.json"
	ConfigDir           = "/etc/sealer"
	OutputMount         = "/output"
	// DataMount is where spec.dataSource is mounted, read-only: data sectors' staged files.
	DataMount      = "/data"
	HugepagesMount = "/hugepages"
)

// Home is where a batch's sealer and C1 pods, their ConfigMaps and its disruption budget live.
// Namespace "" is the batch's own namespace, and names start with the batch's name. Otherwise
// it is the operator's sealer namespace, shared by every tenant's batches and out of their
// reach (a privileged sealer pod in a tenant's namespace is a root shell for anyone with
// pods/exec there); names then add the first 8 characters of the batch's UID, so batches of one
// name in two namespaces never meet, and labels name the batch (owner references cannot cross
// namespaces).
type Home struct {
	Namespace string
}

// Shared reports whether pods live apart from their batches.
func (h Home) Shared() bool { return h.Namespace != "" }

// NamespaceOf is the namespace of b's pods and ConfigMaps.
func (h Home) NamespaceOf(b *sealv1.SealBatch) string {
	if h.Shared() {
		return h.Namespace
	}
	return b.Namespace
}

func (h Home) base(b *sealv1.SealBatch) string {
	if h.Shared() {
		return b.Name + "-" + string(b.UID)[:min(8, len(b.UID))]
	}
	return b.Name
}

// ConfigMapName is the name of the batch's sealer config ConfigMap.
func (h Home) ConfigMapName(b *sealv1.SealBatch) string { return h.base(b) + "-sealer-config" }

// DisruptionBudgetName is the PodDisruptionBudget that keeps a drain from evicting the batch's
// sealer pod.
func (h Home) DisruptionBudgetName(b *sealv1.SealBatch) string { return h.base(b) + "-sealer" }

// PodName is the sealer pod of one attempt; each retry gets a new pod on the same node and slot.
func (h Home) PodName(b *sealv1.SealBatch, attempt int32) string {
	return fmt.Sprintf("%s-sealer-%d", h.base(b), attempt)
}

// C1PodName is the pod of one C1 attempt (commit1 FromSlot).
func (h Home) C1PodName(b *sealv1.SealBatch, attempt int32) string {
	return fmt.Sprintf("%s-c1-%d", h.base(b), attempt)
}

// SeedsConfigMapName holds the seeds a batch's C1 runs with (fixed when C1 starts).
func (h Home) SeedsConfigMapName(b *sealv1.SealBatch) string { return h.base(b) + "-c1-seeds" }

// UnreachableClaim names the first PersistentVolumeClaim source of b that pods in Home cannot
// mount ("" when none): claims are namespaced, and a tenant's claim is not the operator's.
func (h Home) UnreachableClaim(b *sealv1.SealBatch) string {
	if !h.Shared() || b.Namespace == h.Namespace {
		return ""
	}
	s := &b.Spec
	switch {
	case s.Output != nil && s.Output.PersistentVolumeClaim != nil:
		return "spec.output.persistentVolumeClaim"
	case s.DataSource != nil && s.DataSource.PersistentVolumeClaim != nil:
		return "spec.dataSource.persistentVolumeClaim"
	case s.Update != nil && s.Update.SectorKeys.PersistentVolumeClaim != nil:
		return "spec.update.sectorKeys.persistentVolumeClaim"
	}
	return ""
}

// BatchOf names the batch an object of Home belongs to, from its labels (an object without
// the namespace label lives in its batch's namespace).
func BatchOf(o metav1.Object) (namespace, name string, ok bool) {
	l := o.GetLabels()
	if l[LabelBatch] == "" {
		return "", "", false
	}
	ns := l[LabelBatchNamespace]
	if ns == "" {
		ns = o.GetNamespace()
	}
	return ns, l[LabelBatch], true
}

// Seeds file of the C1 pod.
const (
	SeedsKey = "seeds.json"
	SeedsDir = "/etc/sealer-seeds"
)

// Step is what a sealer pod runs.
type Step string

// Steps: the seal (PC1 and PC2, or an update), or C1 from the slot.
const (
	StepSeal Step = ""
	StepC1   Step = "c1"
)

// PodOptions are operator-wide settings for sealer pods.
type PodOptions struct {
	Image           string
	ImagePullPolicy corev1.PullPolicy
	HostNetwork     bool
	// MemoryBase is the non-hugepage memory every sealer gets; MemoryPerSector is added per sector.
	MemoryBase      resource.Quantity
	MemoryPerSector resource.Quantity
	MetricsPort     int
	// MetricsAddress is the sealer's listen address ("" = all addresses of the pod).
	MetricsAddress string
	// PriorityClassName of sealer pods ("" = the cluster default).
	PriorityClassName string
	// RuntimeClassName of sealer and C1 pods ("" = containerd's default runtime): the NVIDIA
	// container runtime's class where it is not the default, so GPU batches see the driver.
	RuntimeClassName string
	// PullSecrets name the image pull secrets of sealer and scrub pods (they must exist in
	// each batch namespace).
	PullSecrets []string
	// HelperImage has /node-agent: the init container that claims the batch's output
	// directory before the sealer writes (ClaimOutputContainer).
	HelperImage string
	// Home is where the pods and their ConfigMaps live.
	Home Home
}

// ClaimOutputContainer is the init container of every sealer pod: `node-agent claim-output`
// refuses an output directory another batch (another UID) owns, so a batch re-created under a
// completed one's name never writes over its sectors. It exits ExitOutputOwned then.
const ClaimOutputContainer = "claim-output"

// ExitOutputOwned is claim-output's exit code for a directory another batch owns.
const ExitOutputOwned = 3

// pullSecrets is the pod spec's list for secret names.
func pullSecrets(names []string) []corev1.LocalObjectReference {
	if len(names) == 0 {
		return nil
	}
	out := make([]corev1.LocalObjectReference, len(names))
	for i, n := range names {
		out[i].Name = n
	}
	return out
}

// PodInput is what was decided for this attempt.
type PodInput struct {
	Batch      *sealv1.SealBatch
	Node       string
	Attempt    int32
	CPUs       int // logical CPUs of the core layout (whole CPUs, so the pod is Guaranteed)
	Hugepages  int32
	Devices    []sealv1.LayerDeviceStatus
	DeviceMode sealv1.DeviceMode
	// ParentCachePath is the node's parent-cache directory, mounted read-only.
	ParentCachePath string
	// Step is what the pod runs (the seal by default).
	Step Step
}

// OutputDir is where a batch writes inside the pod: <mount>/<namespace>/<name> for host paths
// (shared by many batches), the claim's root for a PVC.
func OutputDir(b *sealv1.SealBatch) string {
	if b.Spec.Output != nil && b.Spec.Output.PersistentVolumeClaim != nil {
		return OutputMount
	}
	return filepath.Join(OutputMount, b.Namespace, b.Name)
}

// LayerPaths lists the device paths the sealer gets, in ledger order; vfio devices are passed
// by PCI address.
func LayerPaths(devs []sealv1.LayerDeviceStatus) []string {
	out := make([]string, 0, len(devs))
	for _, d := range devs {
		if !d.Ready {
			continue
		}
		if d.Path != "" {
			out = append(out, d.Path)
		} else {
			out = append(out, d.PCIAddress)
		}
	}
	return out
}

// SmallSectorMemoryBase caps the base memory of a batch of 2 KiB or 8 MiB sectors: the
// configured base (2 GiB) is sized for sectors whose buffers, parent cache (56 GiB mapped at
// 32 GiB) and trees are large. Peak RSS measured with every buffer on ordinary pages (no
// hugepages), parent cache included: 168 MB for 8 MiB × 2 SyntheticPoRep (PC1, PC2, proofs
// from the slot), 229 MB for 8 MiB × 2 on the GPU engine (pocl's CPU device). 512 MiB keeps the
// configured base: 2.09 GB during PC1 of 512 MiB × 2 (1.11 GB buffers, 0.9 GB parent cache).
const SmallSectorMemoryBase = 1 << 30

// MemoryBaseFor is the non-hugepage memory a sealer pod of `size` sectors starts from before
// the per-sector share: the configured base, at most SmallSectorMemoryBase below 512 MiB.
func MemoryBaseFor(size sealv1.SectorSize, configured resource.Quantity) resource.Quantity {
	if size.Bytes() < 512<<20 && configured.Value() > SmallSectorMemoryBase {
		return *resource.NewQuantity(SmallSectorMemoryBase, resource.BinarySI)
	}
	return configured.DeepCopy()
}

// Pod renders the sealer pod: pinned to its node, Guaranteed QoS with whole CPUs and 1 GiB
// hugepages, exactly the allocated devices, the output volume, and the least privilege the
// device mode allows.
func Pod(in PodInput, o PodOptions) *corev1.Pod {
	b := in.Batch
	cpu := in.CPUs
	if cpu < 1 {
		cpu = 1
	}
	mem := MemoryBaseFor(b.Spec.SectorSize, o.MemoryBase)
	for range b.Spec.Sectors {
		mem.Add(o.MemoryPerSector)
	}
	if b.Spec.ProofTypeOrDefault() == sealv1.ProofTypeSyntheticPoRep && in.Step != StepC1 {
		// The sealer's synthetic proofs writer holds a bounded chunk of one sector's proofs at
		// a time (under 256 MiB at every size).
		mem.Add(*resource.NewQuantity(predict.SynthProofsMemoryBytes(b.Spec.SectorSize), resource.BinarySI))
	}
	// PC2 on the GPU engine: the page-locked layer buffers count against the pod's memory. C1
	// runs on the CPU and takes no GPU.
	gpus := b.GPUsHeld()
	if in.Step == StepC1 {
		gpus = 0
	}
	if gpus > 0 {
		mem.Add(*resource.NewQuantity(int64(gpubudget.HostBytes(b.Spec.SectorSize, len(b.Spec.Sectors))), resource.BinarySI))
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(cpu), resource.DecimalSI),
		corev1.ResourceMemory: mem,
	}
	if in.Hugepages > 0 {
		res[corev1.ResourceName("hugepages-1Gi")] = *resource.NewQuantity(int64(in.Hugepages)<<30, resource.BinarySI)
	}
	if gpus > 0 {
		res[sealv1.GPUResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}

	volumes := []corev1.Volume{{
		Name: "config",
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: o.Home.ConfigMapName(b)},
		}},
	}, outputVolume(b)}
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: ConfigDir, ReadOnly: true},
		{Name: "output", MountPath: OutputMount},
	}
	if v, ok := dataVolume(b); ok {
		volumes = append(volumes, v)
		mounts = append(mounts, corev1.VolumeMount{Name: v.Name, MountPath: DataMount, ReadOnly: true})
	}
	if in.Step == StepC1 {
		volumes = append(volumes, corev1.Volume{Name: "seeds", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: o.Home.SeedsConfigMapName(b)}}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "seeds", MountPath: SeedsDir, ReadOnly: true})
	}
	if v, ok := sectorKeysVolume(b); ok {
		volumes = append(volumes, v)
		mounts = append(mounts, corev1.VolumeMount{Name: v.Name, MountPath: SectorKeysMount, ReadOnly: true})
	}
	if in.ParentCachePath != "" {
		volumes = append(volumes, hostPathVolume("parent-cache", in.ParentCachePath, corev1.HostPathDirectory))
		mounts = append(mounts, corev1.VolumeMount{Name: "parent-cache", MountPath: ParentCacheMount, ReadOnly: true})
	}
	if in.Hugepages > 0 {
		volumes = append(volumes, corev1.Volume{Name: "hugepages", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: "HugePages-1Gi"}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "hugepages", MountPath: HugepagesMount})
	}
	privileged := false
	for i, d := range in.Devices {
		if !d.Ready {
			continue
		}
		name := "layer-" + strconv.Itoa(i)
		switch {
		case in.DeviceMode == sealv1.DeviceModeVFIO:
			privileged = true // SPDK maps BARs and DMA: needs the vfio group device and memlock
			volumes = append(volumes, hostPathVolume(name, "/dev/vfio/"+d.IOMMUGroup, corev1.HostPathCharDev))
			mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: "/dev/vfio/" + d.IOMMUGroup})
		case isDevPath(d.Path):
			privileged = true // the device cgroup admits host block devices only for privileged containers
			volumes = append(volumes, hostPathVolume(name, d.Path, corev1.HostPathBlockDev))
			mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: d.Path})
		default:
			volumes = append(volumes, hostPathVolume(name, d.Path, corev1.HostPathFileOrCreate))
			mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: d.Path})
		}
	}
	if in.DeviceMode == sealv1.DeviceModeVFIO {
		volumes = append(volumes, hostPathVolume("vfio", "/dev/vfio/vfio", corev1.HostPathCharDev))
		mounts = append(mounts, corev1.VolumeMount{Name: "vfio", MountPath: "/dev/vfio/vfio"})
	}
	sc := &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}
	if privileged {
		sc.Privileged = ptr.To(true)
	} else {
		sc.AllowPrivilegeEscalation = ptr.To(false)
		// IPC_LOCK: registered io_uring buffers and hugepage mappings are locked memory.
		sc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"IPC_LOCK"}}
	}

	tolerations := []corev1.Toleration{}
	if b.Spec.Placement != nil {
		tolerations = append(tolerations, b.Spec.Placement.Tolerations...)
	}
	ports := []corev1.ContainerPort{}
	if o.MetricsPort > 0 {
		ports = append(ports, corev1.ContainerPort{Name: "metrics", ContainerPort: int32(o.MetricsPort)})
	}
	name := o.Home.PodName(b, in.Attempt)
	if in.Step == StepC1 {
		name = o.Home.C1PodName(b, in.Attempt)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   o.Home.NamespaceOf(b),
			Labels:      componentLabels(b, ComponentSeal),
			Annotations: map[string]string{"sealfleet.io/attempt": strconv.Itoa(int(in.Attempt))},
		},
		Spec: corev1.PodSpec{
			Affinity:                      OnNode(in.Node),
			RestartPolicy:                 corev1.RestartPolicyNever,
			HostNetwork:                   o.HostNetwork,
			Tolerations:                   tolerations,
			PriorityClassName:             o.PriorityClassName,
			RuntimeClassName:              nonEmpty(o.RuntimeClassName),
			ImagePullSecrets:              pullSecrets(o.PullSecrets),
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			Volumes:                       volumes,
			Containers: []corev1.Container{{
				Name:                     "sealer",
				Image:                    o.Image,
				ImagePullPolicy:          o.ImagePullPolicy,
				Command:                  sealerCommand(b, in.Step),
				Env:                      []corev1.EnvVar{{Name: "SEALER_TERMINATION_LOG", Value: corev1.TerminationMessagePathDefault}},
				Resources:                corev1.ResourceRequirements{Requests: res, Limits: res},
				VolumeMounts:             mounts,
				Ports:                    ports,
				SecurityContext:          sc,
				TerminationMessagePath:   corev1.TerminationMessagePathDefault,
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			InitContainers: claimOutput(b, o),
		},
	}
}

// claimOutput is the pod's ClaimOutputContainer (none without a helper image). It requests as
// much as it limits, so the pod stays Guaranteed.
func claimOutput(b *sealv1.SealBatch, o PodOptions) []corev1.Container {
	if o.HelperImage == "" {
		return nil
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resourceMilli(100), corev1.ResourceMemory: resourceMi(64)}
	return []corev1.Container{{
		Name: ClaimOutputContainer, Image: o.HelperImage, ImagePullPolicy: o.ImagePullPolicy,
		Command:      []string{"/node-agent", "claim-output", "--dir", OutputDir(b), "--batch", b.Namespace + "/" + b.Name, "--uid", string(b.UID)},
		VolumeMounts: []corev1.VolumeMount{{Name: "output", MountPath: OutputMount}},
		Resources:    corev1.ResourceRequirements{Requests: res, Limits: res},
		SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), AllowPrivilegeEscalation: ptr.To(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"DAC_OVERRIDE"}}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}}
}

// BatchLabels are the labels of everything the operator makes for a batch (its config,
// disruption budget and pods).
func BatchLabels(b *sealv1.SealBatch) map[string]string {
	return map[string]string{LabelName: "sealfleet", LabelBatch: b.Name, LabelBatchNamespace: b.Namespace, LabelBatchUID: string(b.UID)}
}

// componentLabels are BatchLabels plus the component (sealer or scrub) of a pod.
func componentLabels(b *sealv1.SealBatch, component string) map[string]string {
	l := BatchLabels(b)
	l[LabelComponent] = component
	return l
}

// SealerPods selects every attempt's sealer pod of the batch (and no scrub pod).
func SealerPods(b *sealv1.SealBatch) map[string]string {
	return map[string]string{LabelComponent: ComponentSeal, LabelBatchUID: string(b.UID)}
}

// DisruptionBudget keeps voluntary disruptions (kubectl drain, the eviction API) from killing
// the batch's sealer pod: a PC1 killed mid-layer loses hours, and its layers cannot move with
// it. It allows no eviction of the one running attempt's pod; a deliberate drain deletes the
// pod instead (kubectl drain --disable-eviction) or deletes the batch. minAvailable 1, not
// maxUnavailable 0: the disruption controller computes maxUnavailable against the pods'
// owner's scale, and a SealBatch has none (CalculateExpectedPodCountFailed, and the budget
// then protects nothing).
func DisruptionBudget(b *sealv1.SealBatch, h Home) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name: h.DisruptionBudgetName(b), Namespace: h.NamespaceOf(b),
			Labels: BatchLabels(b),
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &one,
			Selector:     &metav1.LabelSelector{MatchLabels: SealerPods(b)},
		},
	}
}

func outputVolume(b *sealv1.SealBatch) corev1.Volume {
	v := corev1.Volume{Name: "output"}
	switch {
	case b.Spec.Output != nil && b.Spec.Output.PersistentVolumeClaim != nil:
		v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: b.Spec.Output.PersistentVolumeClaim.ClaimName}
	default:
		v.HostPath = &corev1.HostPathVolumeSource{Path: b.Spec.OutputHostPath(), Type: ptr.To(corev1.HostPathDirectoryOrCreate)}
	}
	return v
}

// sealerCommand runs the batch: `sealer batch` seals (without layer copies when the operator
// runs C1 from the slot, or when SyntheticPoRep's proofs read their labels from it), `sealer
// snap` updates (spec.update), `sealer c1` is C1 from the slot.
func sealerCommand(b *sealv1.SealBatch, step Step) []string {
	config := ConfigDir + "/" + ConfigKey
	switch {
	case step == StepC1:
		return []string{"/sealer", "c1", "--config", config, "--seeds", SeedsDir + "/" + SeedsKey}
	case b.Spec.IsUpdate():
		return []string{"/sealer", "snap", "--config", config}
	case b.Spec.FromSlot() || b.Spec.ProofTypeOrDefault() == sealv1.ProofTypeSyntheticPoRep:
		return []string{"/sealer", "batch", "--quiet", "--no-layer-files", "--config", config}
	}
	return []string{"/sealer", "batch", "--quiet", "--config", config}
}

// sectorKeysVolume is an update's spec.update.sectorKeys as the read-only "sector-keys" volume:
// an existing host directory or a claim.
func sectorKeysVolume(b *sealv1.SealBatch) (corev1.Volume, bool) {
	if b.Spec.Update == nil {
		return corev1.Volume{}, false
	}
	return readOnlySource("sector-keys", b.Spec.Update.SectorKeys.HostPath, b.Spec.Update.SectorKeys.PersistentVolumeClaim)
}

// dataVolume is spec.dataSource as the pod's read-only "data" volume: an existing host
// directory (never created: an empty one would hide a wrong path) or a claim.
func dataVolume(b *sealv1.SealBatch) (corev1.Volume, bool) {
	d := b.Spec.DataSource
	if d == nil {
		return corev1.Volume{}, false
	}
	return readOnlySource("data", d.HostPath, d.PersistentVolumeClaim)
}

// readOnlySource is a volume read from a host directory (never created: an empty one would
// hide a wrong path) or a claim, mounted read-only; ok is false when neither is set.
func readOnlySource(name string, host *sealv1.HostPathData, claim *sealv1.PVCOutput) (corev1.Volume, bool) {
	switch {
	case claim != nil:
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: claim.ClaimName, ReadOnly: true}}}, true
	case host != nil:
		return hostPathVolume(name, host.Path, corev1.HostPathDirectory), true
	}
	return corev1.Volume{}, false
}

func hostPathVolume(name, path string, t corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(t)}}}
}

// isDevPath reports whether a layer path is a host device node rather than a regular file.
func isDevPath(p string) bool { return strings.HasPrefix(p, "/dev/") }

// OnNode confines a pod to one node by a required node affinity on the node's name, and leaves
// the binding to kube-scheduler: it counts every pod's requests on the node (Curio's, the
// monitoring's), so a pod the node cannot hold waits, unscheduled, instead of being rejected by
// the kubelet (OutOfcpu) or overcommitting the node as a pod created with spec.nodeName would.
func OnNode(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
}

// PodNode is the node a pod runs on, or (not bound yet) the one OnNode confines it to.
func PodNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range t.MatchFields {
				if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
					return f.Values[0]
				}
			}
		}
	}
	return ""
}

// Unschedulable is kube-scheduler's word on a pod it has not bound ("" while it has not said
// the pod does not fit).
func Unschedulable(p *corev1.Pod) string {
	if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
		return ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message
		}
	}
	return ""
}

func resourceMilli(m int64) resource.Quantity {
	return *resource.NewMilliQuantity(m, resource.DecimalSI)
}

func resourceMi(mi int64) resource.Quantity { return *resource.NewQuantity(mi<<20, resource.BinarySI) }

// nonEmpty is s as an optional field: nil when empty, so the API server's default applies.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
