package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/controllers"
	"github.com/sealfleet/sealfleet/internal/layout"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/render"
	"github.com/sealfleet/sealfleet/internal/testenv"
	"github.com/sealfleet/sealfleet/internal/testutil"
)

// fakeProgress serves whatever progress the test sets, for any pod.
type fakeProgress struct {
	mu  sync.Mutex
	rep *controllers.ProgressReport
}

func (f *fakeProgress) set(r *controllers.ProgressReport) { f.mu.Lock(); f.rep = r; f.mu.Unlock() }

func (f *fakeProgress) Read(context.Context, *corev1.Pod, int) (*controllers.ProgressReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rep == nil {
		return nil, fmt.Errorf("no progress yet")
	}
	r := *f.rep
	return &r, nil
}

type noResults struct{}

func (noResults) Read(context.Context, *corev1.Pod) ([]byte, error) {
	return nil, fmt.Errorf("no log in envtest")
}

// harness is one control plane plus a running operator that tests can restart.
type harness struct {
	t        *testing.T
	env      *testenv.Env
	c        client.Client
	progress *fakeProgress
	cancel   context.CancelFunc
	done     chan struct{}
	// watch is the operator's --watch-namespaces ("" = all).
	watch string
	// cacheNS is the operator's --parent-cache-namespace ("" = no node caches).
	cacheNS string
	// sealerNS is the operator's --sealer-namespace ("" = each batch's own).
	sealerNS string
	// remote is the operator's remote-seal provider (Listen "" = off).
	remote controllers.RemoteSealOptions
}

// scrubNS is the operator's --scrub-namespace in every harness.
const scrubNS = "sealfleet-scrub"

func newHarness(t *testing.T) *harness { return newHarnessWatching(t, "") }

// newHarnessWatching runs the operator with --watch-namespaces=watch.
func newHarnessWatching(t *testing.T, watch string) *harness {
	return newHarnessWith(t, func(h *harness) { h.watch = watch })
}

// newHarnessWith runs the operator with the options set sets.
func newHarnessWith(t *testing.T, set func(*harness)) *harness {
	env := testenv.Start(t)
	h := &harness{t: t, env: env, c: env.Client, progress: &fakeProgress{}}
	set(h)
	h.namespace(scrubNS)
	if h.sealerNS != "" {
		h.namespace(h.sealerNS)
	}
	h.startOperator()
	t.Cleanup(h.stopOperator)
	return h
}

func (h *harness) startOperator() {
	opts := controllers.Options{
		Progress: h.progress, Results: noResults{}, ProgressInterval: 200 * time.Millisecond,
		ReleaseTimeout: time.Hour, WatchNamespaces: h.watch, ParentCacheNamespace: h.cacheNS, ScrubNamespace: scrubNS, SealerNamespace: h.sealerNS,
		RemoteSeal: h.remote,
	}
	mgr, err := ctrl.NewManager(h.env.Config, ctrl.Options{
		Scheme: h.env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: configSkipNameValidation(), Cache: opts.CacheOptions(),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := controllers.Setup(mgr, opts); err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		if err := mgr.Start(ctx); err != nil {
			h.t.Errorf("manager: %v", err)
		}
	}()
}

func (h *harness) stopOperator() {
	if h.cancel != nil {
		h.cancel()
		<-h.done
		h.cancel = nil
	}
}

// eventually polls cond until it holds or 20 s pass.
func (h *harness) eventually(what string, cond func() (bool, string)) {
	h.t.Helper()
	h.eventuallyWithin(20*time.Second, what, cond)
}

// eventuallyWithin polls cond until it holds or d passes.
func (h *harness) eventuallyWithin(d time.Duration, what string, cond func() (bool, string)) {
	h.t.Helper()
	deadline := time.Now().Add(d)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(100 * time.Millisecond)
	}
	h.t.Fatalf("timed out waiting for %s (last: %s)", what, last)
}

func (h *harness) batch(ns, name string) *sealv1.SealBatch {
	var b sealv1.SealBatch
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		h.t.Fatal(err)
	}
	return &b
}

func (h *harness) waitPhase(ns, name string, p sealv1.SealBatchPhase) *sealv1.SealBatch {
	h.t.Helper()
	var got *sealv1.SealBatch
	h.eventually(fmt.Sprintf("%s/%s phase %s", ns, name, p), func() (bool, string) {
		got = h.batch(ns, name)
		if got == nil {
			return false, "not found"
		}
		return got.Status.Phase == p, fmt.Sprintf("phase %q: %s", got.Status.Phase, got.Status.Message)
	})
	return got
}

// addNode creates a Node and a Ready SealerNode with one layer file and `slots` slots.
func (h *harness) addNode(name string, slots int32, hugepages int64, labels map[string]string) {
	h.t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := h.c.Create(ctx, node); err != nil {
		h.t.Fatal(err)
	}
	// Play the node-lifecycle controller: admission taints new nodes not-ready.
	node.Spec.Taints = nil
	if err := h.c.Update(ctx, node); err != nil {
		h.t.Fatal(err)
	}
	// Play the kubelet: it offers the node's 1 GiB hugepages to pods.
	node.Status.Capacity = corev1.ResourceList{"hugepages-1Gi": *resource.NewQuantity(hugepages<<30, resource.BinarySI)}
	node.Status.Allocatable = node.Status.Capacity
	if err := h.c.Status().Update(ctx, node); err != nil {
		h.t.Fatal(err)
	}
	sn := &sealv1.SealerNode{ObjectMeta: metav1.ObjectMeta{Name: name},
		// OnRequest: no kubelet runs a qualification pod here, unless a test asks for one.
		Spec: sealv1.SealerNodeSpec{Pipelines: slots, Qualify: sealv1.QualifyOnRequest, LayerDevices: []sealv1.LayerDevice{{Path: "/var/lib/sealfleet/layers.img"}}}}
	if err := h.c.Create(ctx, sn); err != nil {
		h.t.Fatal(err)
	}
	cpu := testutil.CPU(4, 4, true) // 16 cores in 4 CCX, SMT on
	caps := layout.Capabilities(layout.FromStatus(cpu), layout.Options{})
	status := sealv1.SealerNodeStatus{
		CPU:           cpu,
		Capabilities:  caps,
		NUMANodes:     []sealv1.NUMANode{{ID: 0, CPUs: "0-31", Hugepages: []sealv1.Hugepages{{PageSize: "1Gi", Total: hugepages, Free: hugepages}}}},
		LayerDevices:  []sealv1.LayerDeviceStatus{{Path: "/var/lib/sealfleet/layers.img", CapacityBytes: int64(slots) * 64 << 20, Ready: true, NUMANode: 0}},
		OutputVolumes: []sealv1.OutputVolume{{Path: sealv1.DefaultOutputHostPath, CapacityBytes: 1 << 40, AvailableBytes: 1 << 40}},
		ParentCaches:  testutil.VerifiedCaches(),
		Conditions:    []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Discovered", Message: "ok", LastTransitionTime: metav1.Now()}},
	}
	// Play the node agent, the status's only writer.
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(sn), sn); err != nil {
		h.t.Fatal(err)
	}
	sn.Status = status
	g := ledger.GeometryOf(sn)
	if g.Count != slots {
		h.t.Fatalf("%s: geometry %+v, want %d slots", name, g, slots)
	}
	sn.Status.Slots, sn.Status.FreeSlots = g.Status(), g.Count
	if err := h.c.Status().Update(ctx, sn); err != nil {
		h.t.Fatal(err)
	}
}

// serveSectorData plays the node agent publishing where the node serves sector data.
func (h *harness) serveSectorData(node, url string) {
	h.t.Helper()
	var sn sealv1.SealerNode
	if err := h.c.Get(context.Background(), client.ObjectKey{Name: node}, &sn); err != nil {
		h.t.Fatal(err)
	}
	sn.Status.SectorDataURL = url
	if err := h.c.Status().Update(context.Background(), &sn); err != nil {
		h.t.Fatal(err)
	}
}

// setCordon marks a Node unschedulable or schedulable, as kubectl cordon / uncordon do.
func (h *harness) setCordon(name string, cordoned bool) {
	h.t.Helper()
	var n corev1.Node
	if err := h.c.Get(context.Background(), client.ObjectKey{Name: name}, &n); err != nil {
		h.t.Fatal(err)
	}
	n.Spec.Unschedulable = cordoned
	if err := h.c.Update(context.Background(), &n); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) newBatch(ns, name string, sectors int, mutate func(*sealv1.SealBatch)) *sealv1.SealBatch {
	h.t.Helper()
	b := testutil.Batch(ns, name, sealv1.SectorSize8MiB, sectors, func(b *sealv1.SealBatch) { b.UID = "" })
	if mutate != nil {
		mutate(b)
	}
	if err := h.c.Create(context.Background(), b); err != nil {
		h.t.Fatal(err)
	}
	return b
}

func (h *harness) pod(ns, name string) *corev1.Pod {
	var p corev1.Pod
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		h.t.Fatal(err)
	}
	return &p
}

func (h *harness) waitPod(ns, name string) *corev1.Pod {
	h.t.Helper()
	var p *corev1.Pod
	h.eventually("pod "+name, func() (bool, string) { p = h.pod(ns, name); return p != nil, "absent" })
	return p
}

// setPod plays the kubelet: it sets a pod's phase and container state.
func (h *harness) setPod(p *corev1.Pod, phase corev1.PodPhase, exit int32, message string) {
	h.t.Helper()
	if !h.trySetPod(p, phase, exit, message) {
		h.t.Fatalf("pod %s/%s is gone", p.Namespace, p.Name)
	}
}

// trySetPod is setPod for a pod the operator may delete meanwhile (as a kubelet finds a pod
// gone): false when it is.
func (h *harness) trySetPod(p *corev1.Pod, phase corev1.PodPhase, exit int32, message string) bool {
	h.t.Helper()
	if p = h.pod(p.Namespace, p.Name); p == nil {
		return false
	}
	if p.Spec.NodeName == "" && phase != corev1.PodPending {
		// Play kube-scheduler first: a kubelet runs only pods bound to its node.
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
			Target: corev1.ObjectReference{Kind: "Node", Name: render.PodNode(p)}}
		if err := h.c.SubResource("binding").Create(context.Background(), p, binding); err != nil {
			if apierrors.IsNotFound(err) {
				return false
			}
			h.t.Fatal(err)
		}
		if p = h.pod(p.Namespace, p.Name); p == nil {
			return false
		}
	}
	p.Status.Phase = phase
	p.Status.PodIP = "127.0.0.1"
	cs := corev1.ContainerStatus{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image}
	switch phase {
	case corev1.PodRunning:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
	case corev1.PodSucceeded, corev1.PodFailed:
		cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: exit, Message: message, Reason: "Completed"}
		if exit != 0 {
			cs.State.Terminated.Reason = "Error"
		}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	if err := h.c.Status().Update(context.Background(), p); err != nil {
		if apierrors.IsNotFound(err) {
			return false
		}
		h.t.Fatal(err)
	}
	return true
}

// reapPods plays the kubelet for deletions: pods marked for deletion go away.
func (h *harness) reapPods(ns string) {
	var pods corev1.PodList
	if err := h.c.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		h.t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp != nil {
			_ = h.c.Delete(context.Background(), &pods.Items[i], client.GracePeriodSeconds(0))
		}
	}
}

// scrubbed plays the kubelet for the node's scrub pods (each one succeeds) and reports
// whether the node has no dirty slot left.
func (h *harness) scrubbed(node string) (bool, string) {
	h.t.Helper()
	h.reapPods(scrubNS)
	var pods corev1.PodList
	if err := h.c.List(context.Background(), &pods, client.InNamespace(scrubNS)); err != nil {
		h.t.Fatal(err)
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; render.PodNode(p) == node && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded {
			h.trySetPod(p, corev1.PodSucceeded, 0, "") // one the operator deleted meanwhile needs nothing
		}
	}
	d := h.sealerNode(node).Status.DirtySlots
	return len(d) == 0, fmt.Sprintf("dirty slots %+v", d)
}

// succeedScrubs waits until every dirty slot of the node is scrubbed.
func (h *harness) succeedScrubs(node string) {
	h.t.Helper()
	h.eventually("scrubs on "+node, func() (bool, string) { return h.scrubbed(node) })
}

func (h *harness) sealerNode(name string) *sealv1.SealerNode {
	h.t.Helper()
	var sn sealv1.SealerNode
	if err := h.c.Get(context.Background(), client.ObjectKey{Name: name}, &sn); err != nil {
		h.t.Fatal(err)
	}
	return &sn
}

// held lists the claims on a node, derived as placement derives them: from the batches'
// status, plus the dirty slots that wait for their scrub.
func (h *harness) held(node string) []ledger.Claim {
	h.t.Helper()
	var list sealv1.SealBatchList
	if err := h.c.List(context.Background(), &list); err != nil {
		h.t.Fatal(err)
	}
	var nodes sealv1.SealerNodeList
	if err := h.c.List(context.Background(), &nodes); err != nil {
		h.t.Fatal(err)
	}
	book := ledger.BookOf(list.Items, nil, nil)
	book.AddDirty(nodes.Items)
	if c := book.Conflicts(); len(c) > 0 {
		h.t.Errorf("double booking: %v", c)
	}
	return book.Of(node).Claims
}

func (h *harness) namespace(name string) string {
	if err := h.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		h.t.Fatal(err)
	}
	return name
}

func results(b *sealv1.SealBatch) string {
	var parts []string
	for _, s := range b.Spec.Sectors {
		parts = append(parts, fmt.Sprintf(`{"sector_id":%d,"replica_id":"%064x","comm_d":"%064x","comm_c":"%064x","comm_r_last":"%064x","comm_r":"%064x"}`,
			s.Number, s.Number, 1, 2, 3, s.Number+7))
	}
	return `{"sectors":[` + strings.Join(parts, ",") + `]}`
}

func condition(b *sealv1.SealBatch, t string) *metav1.Condition {
	return meta.FindStatusCondition(b.Status.Conditions, t)
}

// changeBatch applies change to the batch as the API server has it now, again on a conflict:
// the operator writes the batch's status while a test edits its spec.
func (h *harness) changeBatch(ns, name string, change func(*sealv1.SealBatch)) error {
	h.t.Helper()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b := h.batch(ns, name)
		change(b)
		return h.c.Update(context.Background(), b)
	})
}

// hasEvent reports whether an event about the named object in ns has the reason and a note
// containing text. Events reach the API server asynchronously (the recorder's broadcaster),
// after the status change that caused them, so it waits up to 20 s for one.
func (h *harness) hasEvent(ns, name, reason, text string) bool {
	h.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var events corev1.EventList
		if err := h.c.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			h.t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && strings.Contains(e.Message, text) {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
