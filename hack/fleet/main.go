// Command fleet creates a simulated sealing fleet on the local cluster from a fleet description:
// kwok-managed Nodes (annotation kwok.x-k8s.io/node=fake) with realistic capacity, and for each
// one the SealerNode a node agent would publish, its CPU topology read from one of the fixture
// machines in internal/topology/testdata (real sysfs trees), capabilities from internal/layout.
//
//	fleet apply  -f hack/fleet/fleet.yaml [--total N] [--kubeconfig F]   create/update, prune extras
//	fleet delete -f hack/fleet/fleet.yaml [--kubeconfig F]                 delete the fleet's objects
//
// Idempotent: a second apply changes nothing but heartbeats; a smaller description (or --total)
// deletes the Nodes and SealerNodes it no longer names.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/kube"
	"github.com/sealfleet/sealfleet/internal/layout"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/topology"
)

// Labels and annotations of simulated nodes.
const (
	FleetLabel      = "sealfleet.io/fleet"
	MachineLabel    = "sealfleet.io/machine-type"
	SealerLabel     = "sealfleet.io/sealer"
	KwokAnnotation  = "kwok.x-k8s.io/node"
	KwokTaintKey    = "kwok.x-k8s.io/node"
	simulatedDevice = "/dev/nvme%dn1"
)

// Fleet is a fleet description.
type Fleet struct {
	// Name labels every object (sealfleet.io/fleet) and prefixes node names.
	Name string `json:"name"`
	// Zones are assigned round-robin (topology.kubernetes.io/zone).
	Zones []string `json:"zones,omitempty"`
	// Taint adds kwok.x-k8s.io/node=fake:NoSchedule to every node (default true): only pods that
	// tolerate it (sealer pods of batches with that toleration) land on simulated nodes.
	Taint        *bool         `json:"taint,omitempty"`
	MachineTypes []MachineType `json:"machineTypes"`
}

// MachineType is one kind of sealing machine and how many of it the fleet has.
type MachineType struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
	// Topology is a fixture machine under internal/topology/testdata (its sysfs tree).
	Topology string            `json:"topology"`
	Memory   resource.Quantity `json:"memory"`
	// Hugepages1Gi is the number of 1 GiB hugepages, spread evenly over the NUMA nodes.
	Hugepages1Gi int64  `json:"hugepages1Gi"`
	GPUs         int    `json:"gpus,omitempty"`
	GPUModel     string `json:"gpuModel,omitempty"`
	// GPUMemory is each GPU's memory, as the image's `sealer capabilities` would report it
	// (default: none reported, so placement does not check it).
	GPUMemory *resource.Quantity `json:"gpuMemory,omitempty"`
	// LayerDevices NVMe drives of DeviceCapacity each are dedicated to layers.
	LayerDevices   int               `json:"layerDevices"`
	DeviceCapacity resource.Quantity `json:"deviceCapacity"`
	Pipelines      int32             `json:"pipelines,omitempty"`
	// OutputCapacity is the size of the output volume (default 1Pi: outputs never bind).
	OutputCapacity *resource.Quantity `json:"outputCapacity,omitempty"`
	Labels         map[string]string  `json:"labels,omitempty"`
	Taints         []corev1.Taint     `json:"taints,omitempty"`
	// NotReady publishes the SealerNode with Ready=False (e.g. to exercise explanations).
	NotReady string `json:"notReady,omitempty"`
}

type machine struct {
	typ   *MachineType
	index int // within the fleet (addresses, zones)
	name  string
	topo  *topology.Topology
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "apply" && os.Args[1] != "delete") {
		fmt.Fprintln(os.Stderr, "usage: fleet apply|delete -f FLEET.yaml [--total N] [--kubeconfig F] [--root REPO]")
		os.Exit(2)
	}
	// controller-runtime's client logs API warnings; errors only, and no warning about a
	// missing logger.
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	file := fs.String("f", "hack/fleet/fleet.yaml", "fleet description")
	total := fs.Int("total", 0, "scale the machine counts so they add up to about N (0: as written)")
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	root := fs.String("root", ".", "repository root (for internal/topology/testdata)")
	workers := fs.Int("workers", 16, "parallel API writers")
	_ = fs.Parse(os.Args[2:])
	if err := run(context.Background(), os.Args[1], *file, *total, *kubeconfig, *root, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// Load reads and checks a fleet description.
func Load(file string) (*Fleet, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var f Fleet
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if f.Name == "" {
		f.Name = "sim"
	}
	for i := range f.MachineTypes {
		t := &f.MachineTypes[i]
		if t.Name == "" || t.Topology == "" {
			return nil, fmt.Errorf("%s: machineTypes[%d] needs name and topology", file, i)
		}
		if t.Pipelines == 0 {
			t.Pipelines = 1
		}
	}
	return &f, nil
}

// Scale changes the counts so they sum to about total, keeping the proportions.
func (f *Fleet) Scale(total int) {
	sum := 0
	for _, t := range f.MachineTypes {
		sum += t.Count
	}
	if total <= 0 || sum == 0 {
		return
	}
	left := total
	for i := range f.MachineTypes {
		n := f.MachineTypes[i].Count * total / sum
		if i == len(f.MachineTypes)-1 {
			n = left
		}
		f.MachineTypes[i].Count, left = n, left-n
	}
}

func (f *Fleet) machines(root string) ([]machine, error) {
	var out []machine
	topos := map[string]*topology.Topology{}
	for i := range f.MachineTypes {
		t := &f.MachineTypes[i]
		topo := topos[t.Topology]
		if topo == nil {
			var err error
			if topo, err = topology.Discover(filepath.Join(root, "internal", "topology", "testdata", t.Topology)); err != nil {
				return nil, fmt.Errorf("machine type %s: topology %s: %w", t.Name, t.Topology, err)
			}
			topos[t.Topology] = topo
		}
		for j := 0; j < t.Count; j++ {
			out = append(out, machine{typ: t, index: len(out), name: fmt.Sprintf("%s-%s-%03d", f.Name, t.Name, j), topo: topo})
		}
	}
	return out, nil
}

func run(ctx context.Context, verb, file string, total int, kubeconfig, root string, workers int) error {
	f, err := Load(file)
	if err != nil {
		return err
	}
	f.Scale(total)
	ms, err := f.machines(root)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 400, 800
	c, err := client.New(cfg, client.Options{Scheme: kube.Scheme()})
	if err != nil {
		return err
	}
	start := time.Now()
	want := map[string]bool{}
	if verb == "apply" {
		for _, m := range ms {
			want[m.name] = true
		}
		if err := parallel(workers, len(ms), func(i int) error { return apply(ctx, c, f, ms[i]) }); err != nil {
			return err
		}
	}
	pruned, err := prune(ctx, c, f.Name, want, workers)
	if err != nil {
		return err
	}
	if verb == "apply" {
		n, err := waitReady(ctx, c, f.Name, len(ms), 120*time.Second)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "fleet %s: %d simulated nodes (%s) Ready with SealerNodes, %d pruned, in %.1f s\n",
			f.Name, n, summary(f), pruned, time.Since(start).Seconds())
	} else {
		fmt.Fprintf(os.Stderr, "fleet %s: deleted %d nodes in %.1f s\n", f.Name, pruned, time.Since(start).Seconds())
	}
	return nil
}

func summary(f *Fleet) string {
	s := ""
	for i, t := range f.MachineTypes {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d %s", t.Count, t.Name)
	}
	return s
}

func parallel(workers, n int, fn func(int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// Node returns the simulated Node for m.
func Node(f *Fleet, m machine) *corev1.Node {
	t := m.typ
	labels := map[string]string{
		"type":                             "kwok",
		"kubernetes.io/hostname":           m.name,
		"kubernetes.io/os":                 "linux",
		"kubernetes.io/arch":               "amd64",
		"node.kubernetes.io/instance-type": t.Name,
		FleetLabel:                         f.Name,
		MachineLabel:                       t.Name,
		SealerLabel:                        "true",
	}
	if len(f.Zones) > 0 {
		labels["topology.kubernetes.io/zone"] = f.Zones[m.index%len(f.Zones)]
	}
	for k, v := range t.Labels {
		labels[k] = v
	}
	var taints []corev1.Taint
	if f.Taint == nil || *f.Taint {
		taints = append(taints, corev1.Taint{Key: KwokTaintKey, Value: "fake", Effect: corev1.TaintEffectNoSchedule})
	}
	taints = append(taints, t.Taints...)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(m.topo.Logical), resource.DecimalSI),
		corev1.ResourceMemory:           t.Memory,
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
		"hugepages-1Gi":                 *resource.NewQuantity(t.Hugepages1Gi<<30, resource.BinarySI),
	}
	if t.GPUs > 0 {
		capacity["nvidia.com/gpu"] = *resource.NewQuantity(int64(t.GPUs), resource.DecimalSI)
	}
	// A distinct loopback address per node: anything that dials a simulated node or its
	// host-network pods stays on this machine (and is refused).
	ip := fmt.Sprintf("127.1.%d.%d", m.index/250, m.index%250+1)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: m.name, Labels: labels, Annotations: map[string]string{KwokAnnotation: "fake"}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity.DeepCopy(),
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: m.name}},
		},
	}
}

// SealerNode returns the SealerNode (spec and status) a node agent would publish for m.
func SealerNode(f *Fleet, m machine, now time.Time) *sealv1.SealerNode {
	t := m.typ
	numa := len(m.topo.NUMANodes)
	if numa == 0 {
		numa = 1
	}
	perNUMA := t.Hugepages1Gi / int64(numa)
	sn := &sealv1.SealerNode{ObjectMeta: metav1.ObjectMeta{Name: m.name, Labels: map[string]string{FleetLabel: f.Name, MachineLabel: t.Name}}}
	// Simulated nodes have nothing to measure: qualified only when a test asks.
	sn.Spec = sealv1.SealerNodeSpec{DeviceMode: sealv1.DeviceModeKernel, Pipelines: t.Pipelines, Hugepages1GiPerNUMANode: int32(perNUMA), Qualify: sealv1.QualifyOnRequest}
	st := &sn.Status
	m.topo.ApplyTo(st)
	// Hugepages: the description's count, spread over NUMA nodes (the fixture's own pool is
	// whatever the machine it was taken from had).
	for i := range st.NUMANodes {
		st.NUMANodes[i].Hugepages = []sealv1.Hugepages{{PageSize: "1Gi", Total: perNUMA, Free: perNUMA}}
	}
	if len(st.NUMANodes) == 0 {
		st.NUMANodes = []sealv1.NUMANode{{ID: 0, Hugepages: []sealv1.Hugepages{{PageSize: "1Gi", Total: t.Hugepages1Gi, Free: t.Hugepages1Gi}}}}
	}
	st.Hugepages1GiFree = int32(perNUMA * int64(len(st.NUMANodes)))
	numaOf := func(i, n int) int32 { return int32(i * len(st.NUMANodes) / max(n, 1)) }
	st.NVMe, st.LayerDevices = nil, nil
	for i := 0; i < t.LayerDevices; i++ {
		bdf := fmt.Sprintf("0000:%02x:00.0", 0x41+i)
		path := fmt.Sprintf(simulatedDevice, i)
		capBytes := t.DeviceCapacity.Value()
		sn.Spec.LayerDevices = append(sn.Spec.LayerDevices, sealv1.LayerDevice{Path: path})
		st.NVMe = append(st.NVMe, sealv1.NVMeDevice{PCIAddress: bdf, Vendor: "0x144d", Model: "simulated NVMe", Serial: fmt.Sprintf("SIM%06d%02d", m.index, i),
			Driver: "nvme", NUMANode: numaOf(i, t.LayerDevices),
			Namespaces: []sealv1.NVMeNamespace{{Name: fmt.Sprintf("nvme%dn1", i), CapacityBytes: capBytes, LBABytes: 4096}}})
		st.LayerDevices = append(st.LayerDevices, sealv1.LayerDeviceStatus{Path: path, CapacityBytes: capBytes, NUMANode: numaOf(i, t.LayerDevices), Ready: true})
	}
	out := int64(1) << 50
	if t.OutputCapacity != nil {
		out = t.OutputCapacity.Value()
	}
	st.OutputVolumes = []sealv1.OutputVolume{{Path: sealv1.DefaultOutputHostPath, CapacityBytes: out, AvailableBytes: out}}
	// Simulated nodes run no builder: every graph's cache is there.
	st.ParentCaches = nil
	for _, p := range sealv1.AllRegisteredProofs() {
		st.ParentCaches = append(st.ParentCaches, sealv1.ParentCacheStatus{Proof: p, Verified: true})
	}
	st.GPUs = nil
	for i := 0; i < t.GPUs; i++ {
		model := t.GPUModel
		if model == "" {
			model = "NVIDIA (simulated)"
		}
		st.GPUs = append(st.GPUs, sealv1.GPU{PCIAddress: fmt.Sprintf("0000:%02x:00.0", 0xc1+i), Vendor: "0x10de", Model: model, NUMANode: numaOf(i, t.GPUs)})
	}
	lt := m.topo.Layout()
	st.Capabilities = layout.Capabilities(lt, layout.Options{})
	// What a GPU image's `sealer capabilities` reports there (kwok runs no image): the GPU
	// engine where the node has a GPU, cpu only elsewhere.
	st.Capabilities.PC2Engines = []sealv1.PC2Engine{sealv1.PC2EngineCPU}
	st.Capabilities.GPUEngine = "unavailable: no usable OpenCL device: no OpenCL GPU on this machine (simulated)"
	if t.GPUs > 0 {
		st.Capabilities.PC2Engines = append(st.Capabilities.PC2Engines, sealv1.PC2EngineGPU)
		st.Capabilities.GPUEngine = fmt.Sprintf("OpenCL device 0: %s (gpu, simulated)", st.GPUs[0].Model)
		if t.GPUMemory != nil {
			// OpenCL's usual largest allocation: a quarter of the memory.
			st.Capabilities.GPUMemoryBytes, st.Capabilities.GPUMaxAllocBytes = t.GPUMemory.Value(), t.GPUMemory.Value()/4
		}
	}
	st.FreeCores = int32(m.topo.Cores)
	ts := metav1.NewTime(now.Truncate(time.Second))
	st.LastScanTime = &ts
	ready, reason, msg := metav1.ConditionTrue, "Ready", fmt.Sprintf("simulated %s, batch sizes %v", t.Name, st.Capabilities.BatchSizes)
	switch {
	case t.NotReady != "":
		ready, reason, msg = metav1.ConditionFalse, "Simulated", t.NotReady
	case !m.topo.CPU.SHANI:
		ready, reason, msg = metav1.ConditionFalse, "NoSHANI", "CPU lacks the SHA extensions (sha_ni)"
	case len(st.Capabilities.BatchSizes) == 0:
		ready, reason, msg = metav1.ConditionFalse, "NoSupportedBatchSize", "no batch size fits this CPU"
	}
	st.Conditions = []metav1.Condition{
		{Type: "Degraded", Status: metav1.ConditionFalse, Reason: "AsExpected", Message: "simulated node", LastTransitionTime: ts},
		{Type: "DevicesNotReady", Status: metav1.ConditionFalse, Reason: "AllDevicesReady", Message: fmt.Sprintf("%d layer devices ready", t.LayerDevices), LastTransitionTime: ts},
		{Type: "HugepagesShort", Status: metav1.ConditionFalse, Reason: "AtTarget", Message: fmt.Sprintf("%d x 1Gi hugepages on every NUMA node", perNUMA), LastTransitionTime: ts},
		{Type: "Ready", Status: ready, Reason: reason, Message: msg, LastTransitionTime: ts},
	}
	return sn
}

func apply(ctx context.Context, c client.Client, f *Fleet, m machine) error {
	node := Node(f, m)
	var got corev1.Node
	switch err := c.Get(ctx, client.ObjectKey{Name: m.name}, &got); {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, node.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("node %s: %w", m.name, err)
		}
	case err != nil:
		return err
	default:
		got.Labels, got.Spec.Taints = node.Labels, node.Spec.Taints
		if err := c.Update(ctx, &got); err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("node %s: %w", m.name, err)
		}
	}
	// Capacity must be in status; kwok keeps what is there.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: m.name}, &n); err != nil {
			return err
		}
		if equalResources(n.Status.Capacity, node.Status.Capacity) && len(n.Status.Addresses) > 0 {
			return nil
		}
		n.Status.Capacity, n.Status.Allocatable, n.Status.Addresses = node.Status.Capacity, node.Status.Allocatable, node.Status.Addresses
		return c.Status().Update(ctx, &n)
	}); err != nil {
		return fmt.Errorf("node %s status: %w", m.name, err)
	}

	want := SealerNode(f, m, time.Now())
	var sn sealv1.SealerNode
	// Retried: another writer can change an existing SealerNode between the read and the write.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		switch err := c.Get(ctx, client.ObjectKey{Name: m.name}, &sn); {
		case apierrors.IsNotFound(err):
			sn = *want.DeepCopy()
			sn.Status = sealv1.SealerNodeStatus{}
			return c.Create(ctx, &sn)
		case err != nil:
			return err
		default:
			sn.Labels, sn.Spec = want.Labels, want.Spec
			return c.Update(ctx, &sn)
		}
	}); err != nil {
		return fmt.Errorf("sealernode %s: %w", m.name, err)
	}
	// Play the node agent (the status's only writer): its inventory, slot geometry and free
	// slots as of now (batches already placed here hold theirs).
	held, err := heldSlots(ctx, c, m.name)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: m.name}, &sn); err != nil {
			return err
		}
		st := *want.Status.DeepCopy()
		st.ObservedGeneration = sn.Generation
		g := ledger.GeometryOf(&sealv1.SealerNode{Spec: sn.Spec, Status: st})
		st.Slots, st.FreeSlots = g.Status(), max(g.Count-int32(held)-int32(len(sn.Status.DirtySlots)), 0)
		st.DirtySlots = sn.Status.DirtySlots // the operator's field: kept as it is
		sn.Status = st
		return c.Status().Update(ctx, &sn)
	})
}

// heldSlots counts the slots batches placed on a node hold.
func heldSlots(ctx context.Context, c client.Client, node string) (int, error) {
	var list sealv1.SealBatchList
	if err := c.List(ctx, &list, client.MatchingFields{"status.node": node}); err != nil {
		return 0, fmt.Errorf("listing the batches on %s: %w", node, err)
	}
	n := 0
	for i := range list.Items {
		if _, held := ledger.ClaimOf(&list.Items[i], nil); held {
			n++
		}
	}
	return n, nil
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if w, ok := a[k]; !ok || w.Cmp(v) != 0 {
			return false
		}
	}
	return true
}

// prune deletes this fleet's Nodes and SealerNodes that want does not name.
func prune(ctx context.Context, c client.Client, fleet string, want map[string]bool, workers int) (int, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingLabels{FleetLabel: fleet}); err != nil {
		return 0, err
	}
	var sns sealv1.SealerNodeList
	if err := c.List(ctx, &sns, client.MatchingLabels{FleetLabel: fleet}); err != nil {
		return 0, err
	}
	var gone []client.Object
	for i := range nodes.Items {
		if !want[nodes.Items[i].Name] {
			gone = append(gone, &nodes.Items[i])
		}
	}
	for i := range sns.Items {
		if !want[sns.Items[i].Name] {
			gone = append(gone, &sns.Items[i])
		}
	}
	err := parallel(workers, len(gone), func(i int) error {
		return client.IgnoreNotFound(c.Delete(ctx, gone[i]))
	})
	n := 0
	for _, o := range gone {
		if _, ok := o.(*corev1.Node); ok {
			n++
		}
	}
	return n, err
}

// waitReady waits until the fleet's n Nodes are Ready and untainted by the node lifecycle
// controller (node.kubernetes.io/not-ready), so they take pods.
func waitReady(ctx context.Context, c client.Client, fleet string, n int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes, client.MatchingLabels{FleetLabel: fleet}); err != nil {
			return 0, err
		}
		ready := 0
		for _, nd := range nodes.Items {
			ok := false
			for _, cond := range nd.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ok = true
				}
			}
			for _, t := range nd.Spec.Taints {
				if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
					ok = false
				}
			}
			if ok {
				ready++
			}
		}
		if ready >= n {
			return ready, nil
		}
		if time.Now().After(deadline) {
			return ready, fmt.Errorf("%d of %d simulated nodes Ready after %s (is kwok running? see _out/cluster/logs/kwok.log)", ready, n, timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
