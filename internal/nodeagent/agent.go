// Package nodeagent is the node agent's loop: scan the machine, prepare it as the SealerNode
// spec asks, publish SealerNode status by server-side apply (only on change), and export
// hasher-utilisation, hugepage and device metrics.
package nodeagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/cpuset"
	"github.com/sealfleet/sealfleet/internal/layout"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/nodeprep"
	"github.com/sealfleet/sealfleet/internal/topology"
)

// FieldManager is the server-side apply field manager of the agent's writes.
const FieldManager = "sealfleet-node-agent"

const (
	defaultHeartbeat         = 10 * time.Minute
	defaultInterval          = 60 * time.Second
	defaultMetricsInterval   = 15 * time.Second
	metricsIntervalMinimum   = time.Second
	conditionMessageMaxBytes = 1024
)

// Agent publishes one node's SealerNode.
type Agent struct {
	// Client talks to the API server (a plain client: the agent reads few objects).
	Client client.Client
	// NodeName is the Node (and SealerNode) name.
	NodeName string
	// Root holds the host's sys/ and proc/ ("/" or a fixture tree).
	Root string
	// Interval between scans; Heartbeat forces a status write even without change.
	Interval, Heartbeat time.Duration
	// MetricsInterval between /proc/stat samples.
	MetricsInterval time.Duration
	// DryRun never changes the machine, whatever the spec says.
	DryRun bool
	// SealerCapabilities is the file the sealer image's `sealer capabilities --out` wrote on
	// this node ("" = none: the node reports no PC2 engines).
	SealerCapabilities string
	// SectorDataURL is where this node serves sealed sector data ("" = not served).
	SectorDataURL string
	// Metrics, optional.
	Metrics *Metrics
	// Now is the clock (tests).
	Now func() time.Time

	lastHash  string
	lastWrite time.Time
	topo      *topology.Topology
	batches   []RunningBatch // from the last scan; the CPU sampler reuses them
}

// Run scans every Interval and samples CPU metrics every MetricsInterval until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	log := logf.FromContext(ctx)
	a.defaults()
	scan := time.NewTicker(a.Interval)
	defer scan.Stop()
	sample := time.NewTicker(a.MetricsInterval)
	defer sample.Stop()
	for {
		if err := a.Sync(ctx); err != nil {
			log.Error(err, "scan failed")
		}
		for done := false; !done; {
			select {
			case <-ctx.Done():
				return nil
			case <-scan.C:
				done = true
			case <-sample.C:
				if err := a.SampleCPUs(ctx); err != nil {
					log.V(1).Info("sampling CPUs", "error", err.Error())
				}
			}
		}
	}
}

func (a *Agent) defaults() {
	if a.Interval <= 0 {
		a.Interval = defaultInterval
	}
	if a.Heartbeat <= 0 {
		a.Heartbeat = defaultHeartbeat
	}
	if a.MetricsInterval < metricsIntervalMinimum {
		a.MetricsInterval = defaultMetricsInterval
	}
	if a.Now == nil {
		a.Now = time.Now
	}
	if a.Root == "" {
		a.Root = "/"
	}
}

// Sync does one scan: discover, prepare, publish. It returns whether status was written.
func (a *Agent) Sync(ctx context.Context) error {
	_, err := a.SyncOnce(ctx)
	return err
}

// SyncOnce is Sync reporting whether it wrote status.
func (a *Agent) SyncOnce(ctx context.Context) (wrote bool, err error) {
	a.defaults()
	defer func() {
		if a.Metrics != nil {
			a.Metrics.scanned(err)
		}
	}()
	var node corev1.Node
	if err := a.Client.Get(ctx, client.ObjectKey{Name: a.NodeName}, &node); err != nil {
		return false, fmt.Errorf("reading Node %s: %w", a.NodeName, err)
	}
	if err := a.ensureObject(ctx, &node); err != nil {
		return false, err
	}
	var sn sealv1.SealerNode
	if err := a.Client.Get(ctx, client.ObjectKey{Name: a.NodeName}, &sn); err != nil {
		return false, fmt.Errorf("reading SealerNode %s: %w", a.NodeName, err)
	}
	topo, derr := topology.Discover(a.Root)
	if derr != nil {
		return false, fmt.Errorf("discovery: %w", derr)
	}
	a.topo = topo
	prep, perr := nodeprep.Prepare(a.Root, topo, sn.Spec, a.DryRun)
	if len(prep.Actions) > 0 && !prep.DryRun {
		// The machine changed: read it again so status shows the result.
		if t2, err := topology.Discover(a.Root); err == nil {
			topo, a.topo = t2, t2
		}
	}
	batches, held, berr := a.nodeBatches(ctx)
	a.batches = batches
	st := a.buildStatus(&sn, &node, topo, prep, perr, batches)
	geometry := ledger.GeometryOf(&sealv1.SealerNode{Spec: sn.Spec, Status: *st})
	// No slot (no ready layer device) is no slots field at all: an empty object would reach
	// the API server as null, which the schema refuses, and the whole status write with it.
	if geometry.Count > 0 {
		st.Slots = geometry.Status()
	}
	st.FreeSlots = max(geometry.Count-int32(held)-int32(len(sn.Status.DirtySlots)), 0) // dirty: released, not scrubbed yet
	if a.Metrics != nil {
		a.Metrics.ObserveInventory(topo, prep)
	}
	hash := statusHash(st)
	now := a.Now()
	if hash == a.lastHash && now.Sub(a.lastWrite) < a.Heartbeat {
		return false, errors.Join(perr, berr)
	}
	t := metav1.NewTime(now.Truncate(time.Second))
	st.LastScanTime = &t
	if err := a.applyStatus(ctx, st); err != nil {
		return false, err
	}
	a.lastHash, a.lastWrite = hash, now
	return true, errors.Join(perr, berr)
}

// ensureObject creates the SealerNode (or refreshes its owner reference) by server-side
// apply of metadata only: spec stays the administrator's.
func (a *Agent) ensureObject(ctx context.Context, node *corev1.Node) error {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(sealv1.GroupVersion.String())
	u.SetKind("SealerNode")
	u.SetName(a.NodeName)
	u.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
	}})
	u.SetLabels(map[string]string{"sealfleet.io/node": a.NodeName})
	return a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership)
}

// applyStatus writes the agent's status by server-side apply on the status subresource;
// the agent writes every status field but dirtySlots (the operator's), which its apply
// leaves alone.
func (a *Agent) applyStatus(ctx context.Context, st *sealv1.SealerNodeStatus) error {
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	var status map[string]any
	if err := json.Unmarshal(raw, &status); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sealv1.GroupVersion.String(),
		"kind":       "SealerNode",
		"metadata":   map[string]any{"name": a.NodeName},
		"status":     status,
	}}
	return a.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership)
}

// statusHash fingerprints what the agent would write, without times.
func statusHash(st *sealv1.SealerNodeStatus) string {
	c := st.DeepCopy()
	c.LastScanTime = nil
	for i := range c.Conditions {
		c.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	b, _ := json.Marshal(c)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// options turns the spec into calculator options.
func options(spec sealv1.SealerNodeSpec) (layout.Options, error) {
	reserved, err := cpuset.Parse(spec.ReservedCPUs)
	if err != nil {
		return layout.Options{}, fmt.Errorf("spec.reservedCPUs: %w", err)
	}
	return layout.Options{HashersPerCore: int(spec.HashersPerCore), ReservedCPUs: reserved, SharedCores: spec.SharedCores}, nil
}

// buildStatus computes the agent's part of the status.
func (a *Agent) buildStatus(sn *sealv1.SealerNode, node *corev1.Node, topo *topology.Topology, prep *nodeprep.Result, perr error, batches []RunningBatch) *sealv1.SealerNodeStatus {
	st := &sealv1.SealerNodeStatus{ObservedGeneration: sn.Generation}
	topo.ApplyTo(st)
	st.LayerDevices = prep.Devices
	conds := append([]metav1.Condition(nil), sn.Status.Conditions...)
	set := func(typ string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		if len(msg) > conditionMessageMaxBytes {
			msg = msg[:conditionMessageMaxBytes]
		}
		meta.SetStatusCondition(&conds, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: sn.Generation, LastTransitionTime: metav1.NewTime(a.Now().Truncate(time.Second))})
	}

	lt := topo.Layout()
	opts, oerr := options(sn.Spec)
	caps := &sealv1.Capabilities{}
	if oerr == nil {
		caps = layout.Capabilities(lt, opts)
	}
	img := readSealerCapabilities(a.SealerCapabilities)
	caps.PC2Engines, caps.GPUEngine, caps.LayerDeviceModes = img.PC2Engines, img.GPUEngine, img.LayerDeviceModes
	caps.GPUMemoryBytes, caps.GPUMaxAllocBytes = img.GPUMemoryBytes, img.GPUMaxAllocBytes
	if oerr == nil || len(caps.PC2Engines) > 0 {
		st.Capabilities = caps
	}
	st.FreeCores = int32(freeCores(lt, opts.ReservedCPUs, batches))
	st.OutputVolumes = outputVolumes(a.Root, sn.Spec.OutputPaths)
	st.SectorDataURL = a.SectorDataURL
	st.ParentCaches = parentCaches(a.Root, sn.Spec.CachePath())
	cacheDirHidden := parentCacheDirHidden(a.Root, sn.Spec.CachePath())
	kubeletShort := ""
	if oerr == nil {
		kubeletShort = kubeletReservesMore(node, lt, opts.ReservedCPUs)
	}

	// HugepagesShort.
	target := sn.Spec.Hugepages1GiPerNUMANode
	var short []string
	switch target {
	case 0:
		set(sealv1.CondHugepagesShort, false, sealv1.NodeReasonNoTarget, "spec.hugepages1GiPerNUMANode is 0: the hugepage pool is left as it is")
	default:
		for _, h := range prep.Hugepages {
			if h.Short {
				short = append(short, fmt.Sprintf("NUMA node %d has %d of %d", h.NUMANode, h.Total, h.Target))
			}
		}
		if len(short) > 0 {
			set(sealv1.CondHugepagesShort, true, sealv1.NodeReasonBelowTarget, "1Gi hugepages below target: "+strings.Join(short, "; ")+"; reserve them on the kernel command line (hugepagesz=1G hugepages=N) if memory is fragmented")
		} else {
			set(sealv1.CondHugepagesShort, false, sealv1.NodeReasonAtTarget, fmt.Sprintf("%d x 1Gi hugepages on every NUMA node", target))
		}
	}
	// DevicesNotReady.
	bad := prep.DevicesNotReady()
	switch {
	case len(prep.Devices) == 0:
		set(sealv1.CondDevicesNotReady, false, sealv1.NodeReasonNoDevices, "spec.layerDevices is empty")
	case len(bad) > 0:
		var why []string
		for _, d := range bad {
			why = append(why, d.PCIAddress+d.Path+": "+d.Reason)
		}
		reason := sealv1.NodeReasonDeviceRefused
		if prep.DryRun {
			reason = sealv1.NodeReasonDryRun
		}
		set(sealv1.CondDevicesNotReady, true, reason, strings.Join(why, "; "))
	default:
		set(sealv1.CondDevicesNotReady, false, sealv1.NodeReasonAllDevicesReady, fmt.Sprintf("%d layer devices ready", len(prep.Devices)))
	}
	// Degraded.
	switch {
	case oerr != nil:
		set(sealv1.CondDegraded, true, sealv1.NodeReasonInvalidSpec, oerr.Error())
	case perr != nil:
		set(sealv1.CondDegraded, true, sealv1.NodeReasonPrepareFailed, perr.Error())
	case cacheDirHidden != "":
		set(sealv1.CondDegraded, true, sealv1.NodeReasonParentCacheDirNotVisible, cacheDirHidden)
	case kubeletShort != "":
		set(sealv1.CondDegraded, true, sealv1.NodeReasonKubeletReservesCPU, kubeletShort)
	default:
		set(sealv1.CondDegraded, false, sealv1.NodeReasonAsExpected, "scan and preparation succeeded")
	}
	// Ready.
	switch {
	case !topo.CPU.SHANI:
		set(sealv1.CondReady, false, sealv1.NodeReasonNoSHANI, fmt.Sprintf("CPU %q lacks the SHA extensions (sha_ni)", topo.CPU.Model))
	case oerr != nil:
		set(sealv1.CondReady, false, sealv1.NodeReasonInvalidSpec, oerr.Error())
	case len(caps.BatchSizes) == 0:
		why := ""
		if len(caps.Unsupported) > 0 {
			why = caps.Unsupported[0].Reason // batch size 1, the smallest
		}
		set(sealv1.CondReady, false, sealv1.NodeReasonNoBatchSize, "no batch size fits this CPU: "+why)
	case len(bad) > 0:
		set(sealv1.CondReady, false, sealv1.NodeReasonDevicesNotReady, fmt.Sprintf("%d of %d layer devices not ready", len(bad), len(prep.Devices)))
	case len(short) > 0:
		set(sealv1.CondReady, false, sealv1.NodeReasonHugepagesShort, "1Gi hugepages below target")
	default:
		set(sealv1.CondReady, true, sealv1.NodeReasonReady, fmt.Sprintf("batch sizes %v", caps.BatchSizes))
	}
	// Keep only the agent's condition types: others belong to other writers.
	mine := map[string]bool{sealv1.CondReady: true, sealv1.CondDegraded: true, sealv1.CondHugepagesShort: true, sealv1.CondDevicesNotReady: true}
	for _, c := range conds {
		if mine[c.Type] {
			st.Conditions = append(st.Conditions, c)
		}
	}
	sort.Slice(st.Conditions, func(i, j int) bool { return st.Conditions[i].Type < st.Conditions[j].Type })
	return st
}

// kubeletReservesMore says when the kubelet allocates fewer whole CPUs to pods than the
// sealer may use by spec.reservedCPUs: a batch laid out on every usable CPU asks for more
// than the node can admit (kube-scheduler never binds the pod: it stays Pending), so the reservations
// must agree. Empty when they do.
func kubeletReservesMore(node *corev1.Node, t layout.Topology, reserved []int) string {
	alloc, ok := node.Status.Allocatable[corev1.ResourceCPU]
	if !ok {
		return ""
	}
	usable := usableCPUs(t, reserved)
	if whole := alloc.MilliValue() / 1000; int64(usable) > whole {
		return fmt.Sprintf("the kubelet allocates %s CPUs to pods but spec.reservedCPUs leaves the sealer %d: a batch on every usable CPU would never be scheduled (its pod stays Pending); "+
			"add the CPUs the kubelet keeps (its reservedSystemCPUs, or as many low-numbered cores as kubeReserved+systemReserved round up to) to spec.reservedCPUs",
			alloc.String(), usable)
	}
	return ""
}

// usableCPUs counts the logical CPUs of the cores without a reserved CPU.
func usableCPUs(t layout.Topology, reserved []int) int {
	n := 0
	for _, g := range t.Groups {
		for _, core := range g.Cores {
			if !slices.ContainsFunc(core, func(c int) bool { return slices.Contains(reserved, c) }) {
				n += len(core)
			}
		}
	}
	return n
}

// freeCores is the usable physical cores minus those of the running batches.
func freeCores(t layout.Topology, reserved []int, batches []RunningBatch) int {
	busy := map[int]bool{}
	for _, c := range reserved {
		busy[c] = true
	}
	for _, b := range batches {
		if b.Layout != nil {
			for _, c := range b.Layout.CPUs() {
				busy[c] = true
			}
		}
	}
	n := 0
	for _, g := range t.Groups {
		for _, core := range g.Cores {
			free := true
			for _, c := range core {
				if busy[c] {
					free = false
				}
			}
			if free {
				n++
			}
		}
	}
	return n
}

// FieldNode selects the SealBatches placed on a node (a selectable field of the CRD, so the
// API server filters: an agent never lists the whole fleet's batches).
const FieldNode = "status.node"

// nodeBatches lists the SealBatches placed on this node: those running (PC1/PC2) with the
// layout their status records, and how many slots the batches here hold.
func (a *Agent) nodeBatches(ctx context.Context) (running []RunningBatch, heldSlots int, err error) {
	var list sealv1.SealBatchList
	if err := a.Client.List(ctx, &list, client.MatchingFields{FieldNode: a.NodeName}); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, 0, nil
		}
		return nil, 0, fmt.Errorf("listing SealBatches: %w", err)
	}
	for i := range list.Items {
		b := &list.Items[i]
		if b.Status.Node != a.NodeName {
			continue
		}
		if _, held := ledger.ClaimOf(b, nil); held {
			heldSlots++
		}
		if (b.Status.Phase != sealv1.PhasePC1 && b.Status.Phase != sealv1.PhasePC2) || b.Status.Layout == nil {
			continue
		}
		rb := RunningBatch{Name: ledger.BatchKey(b), Layout: layout.FromRecord(b.Status.Layout, len(b.Spec.Sectors))}
		if rc := b.Status.RunningCPUs; rc != nil && len(rc.Moves) > 0 {
			rb.Moved = make(map[int]int, len(rc.Moves))
			for _, m := range rc.Moves {
				rb.Moved[int(m.Layout)] = int(m.Granted)
			}
		}
		running = append(running, rb)
	}
	sort.Slice(running, func(i, j int) bool { return running[i].Name < running[j].Name })
	return running, heldSlots, nil
}

// SampleCPUs refreshes the hasher/coordinator busy ratios for the batches found by the
// last scan (so sampling costs no API calls).
func (a *Agent) SampleCPUs(ctx context.Context) error {
	if a.Metrics == nil {
		return nil
	}
	a.defaults()
	return a.Metrics.ObserveStatFile(a.Root, Assignments(a.batches), a.topo)
}
