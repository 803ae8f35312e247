package controllers_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/controllers"
	"github.com/sealfleet/sealfleet/internal/commcid"
	"github.com/sealfleet/sealfleet/internal/render"
)

func configSkipNameValidation() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}

// TestBatchLifecycle walks one batch through every phase and checks what the operator
// renders and records on the way, and that completion releases exactly its slot.
func TestBatchLifecycle(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ns := h.namespace("lifecycle")
	h.addNode("node-a", 1, 4, map[string]string{"pool": "a"})

	b := h.newBatch(ns, "b1", 4, nil)
	placed := h.waitPhase(ns, "b1", sealv1.PhasePlaced)
	if placed.Status.Node != "node-a" || placed.Status.Slot == nil || *placed.Status.Slot != 0 {
		t.Fatalf("placement: node %q slot %v", placed.Status.Node, placed.Status.Slot)
	}
	if c := condition(placed, sealv1.CondPlaced); c == nil || c.Status != "True" || c.ObservedGeneration != placed.Generation {
		t.Errorf("Placed condition: %+v", c)
	}
	if l := h.held("node-a"); len(l) != 1 || l[0].UID != b.UID || l[0].Hugepages != 1 || l[0].Range.LengthBytes != 64<<20 {
		t.Errorf("held on node-a: %+v", l)
	}
	if placed.Status.Layout == nil || len(placed.Status.Layout.Coordinators) == 0 || placed.Status.CPUs == "" {
		t.Errorf("layout not decided at placement: %+v cpus %q", placed.Status.Layout, placed.Status.CPUs)
	}

	pod := h.waitPod(ns, "b1-sealer-1")
	c := pod.Spec.Containers[0]
	if render.PodNode(pod) != "node-a" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod not pinned / restartable: %+v", pod.Spec)
	}
	if !equalLists(c.Resources.Requests, c.Resources.Limits) {
		t.Errorf("requests != limits (not Guaranteed): %v vs %v", c.Resources.Requests, c.Resources.Limits)
	}
	hp := c.Resources.Limits[corev1.ResourceName("hugepages-1Gi")]
	if hp.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("hugepages-1Gi = %s", hp.String())
	}
	cpu := c.Resources.Limits[corev1.ResourceCPU]
	if cpu.MilliValue()%1000 != 0 || cpu.Value() < 2 {
		t.Errorf("cpu must be whole CPUs of the layout, got %s", cpu.String())
	}
	if sc := c.SecurityContext; sc.Privileged != nil && *sc.Privileged {
		t.Errorf("file-backed layers must not need a privileged pod")
	}
	if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("termination message policy %s", c.TerminationMessagePolicy)
	}
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != b.UID {
		t.Errorf("pod not owned by the batch: %+v", pod.OwnerReferences)
	}
	var cm corev1.ConfigMap
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b1-sealer-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"registered_proof": "StackedDrg8MiBV1_1"`,
		`"/var/lib/sealfleet/layers.img"`, fmt.Sprintf(`"sector_id": %d`, b.Spec.Sectors[3].Number), `"coordinators"`, `"output_dir": "/output/lifecycle/b1"`} {
		if !strings.Contains(cm.Data[render.ConfigKey], want) {
			t.Errorf("sealer config lacks %s:\n%s", want, cm.Data[render.ConfigKey])
		}
	}

	// The kubelet granted other CPUs than the layout's (CPU manager static): the sealer's
	// report of where it runs reaches the status, moves in layout-CPU order.
	h.progress.set(&controllers.ProgressReport{Phase: "pc1", Layer: 1, Layers: 2, Percent: 25, Rate: 1e6, ETASeconds: 30,
		CPUs: &controllers.CPUReport{Granted: "0,1,2,3", L3Groups: []string{"0,1"}, Moved: map[string]int{"5": 1, "4": 0}}})
	h.setPod(pod, corev1.PodRunning, 0, "")
	got := h.waitPhase(ns, "b1", sealv1.PhasePC1)
	h.eventually("progress", func() (bool, string) {
		got = h.batch(ns, "b1")
		p := got.Status.Progress
		return p != nil && p.Layer == 1 && p.Percent == "25.0" && p.ETASeconds == 30, fmt.Sprintf("%+v", p)
	})
	if rc := got.Status.RunningCPUs; rc == nil || rc.Granted != "0,1,2,3" || len(rc.Moves) != 2 ||
		rc.Moves[0] != (sealv1.CPUMove{Layout: 4, Granted: 0}) || rc.Moves[1] != (sealv1.CPUMove{Layout: 5, Granted: 1}) {
		t.Errorf("runningCPUs %+v", rc)
	}
	if got.Status.CPUs == "" || got.Status.CoreLayout == "" {
		t.Errorf("core layout not recorded: %q %q", got.Status.CPUs, got.Status.CoreLayout)
	}
	h.progress.set(&controllers.ProgressReport{Phase: "pc2", Layer: 2, Layers: 2, Percent: 80})
	h.waitPhase(ns, "b1", sealv1.PhasePC2)

	h.setPod(pod, corev1.PodSucceeded, 0, results(b))
	h.eventually("completed and released", func() (bool, string) {
		got = h.batch(ns, "b1")
		r := condition(got, sealv1.CondReleased)
		return got.Status.Phase == sealv1.PhaseCompleted && r != nil && r.Status == "True", got.Status.Message
	})
	if len(got.Status.Sectors) != 4 || got.Status.Sectors[0].CommR == "" || got.Status.Sectors[0].State != "Sealed" {
		t.Errorf("sector results: %+v", got.Status.Sectors)
	}
	for _, s := range got.Status.Sectors {
		if r, err := commcid.ParseSealedCID(s.CommRCID); err != nil || hex.EncodeToString(r[:]) != s.CommR {
			t.Errorf("sector %d: commRCID %q does not hold commR %s (%v)", s.Number, s.CommRCID, s.CommR, err)
		}
		if d, err := commcid.ParsePieceCID(s.CommDCID); err != nil || hex.EncodeToString(d[:]) != s.CommD {
			t.Errorf("sector %d: commDCID %q does not hold commD %s (%v)", s.Number, s.CommDCID, s.CommD, err)
		}
	}
	// Released, the slot is dirty until its scrub pod (in the operator's namespace, not the
	// batch's) succeeds; then the record, and the pod, go.
	if l := h.held("node-a"); len(l) != 1 || !l[0].Dirty || l[0].UID != b.UID || l[0].Slot != *got.Status.Slot {
		t.Errorf("released slot not recorded dirty: %+v", l)
	}
	scrub := h.waitPod(scrubNS, "scrub-node-a-slot-0-"+string(b.UID[:8]))
	if args := strings.Join(scrub.Spec.Containers[0].Args, " "); render.PodNode(scrub) != "node-a" || !strings.HasSuffix(args, " /var/lib/sealfleet/layers.img") {
		t.Errorf("scrub pod on %s runs %q", render.PodNode(scrub), args)
	}
	h.succeedScrubs("node-a")
	if l := h.held("node-a"); len(l) != 0 {
		t.Errorf("slot not released: %+v", l)
	}
	h.eventually("scrub pod removed", func() (bool, string) {
		p := h.pod(scrubNS, scrub.Name)
		return p == nil || p.DeletionTimestamp != nil, "still there"
	})
}

// TestOneSectorOneBatch: a batch naming a sector (miner, number) that another batch in another
// namespace already seals stays Pending with a reason naming that batch, though a node is free;
// once the other is deleted it is placed.
func TestOneSectorOneBatch(t *testing.T) {
	h := newHarness(t)
	ns1, ns2 := h.namespace("team-a"), h.namespace("team-b")
	h.addNode("node-s1", 2, 8, nil)
	first := h.newBatch(ns1, "first", 2, nil)
	h.waitPhase(ns1, "first", sealv1.PhasePlaced)
	h.newBatch(ns2, "again", 1, func(b *sealv1.SealBatch) { b.Spec.Sectors[0].Number = first.Spec.Sectors[1].Number })
	want := fmt.Sprintf("batch %s/first (", ns1)
	h.eventually("the duplicate explained", func() (bool, string) {
		b := h.batch(ns2, "again")
		c := condition(b, sealv1.CondPlaced)
		if b.Status.Node != "" {
			t.Fatalf("a second batch sealing sector %d was placed on %s", first.Spec.Sectors[1].Number, b.Status.Node)
		}
		return c != nil && strings.Contains(c.Message, want) && strings.Contains(c.Message, "one batch seals a sector at a time"), fmt.Sprintf("%+v", c)
	})
	if err := h.c.Delete(context.Background(), h.batch(ns1, "first")); err != nil {
		t.Fatal(err)
	}
	h.waitPhase(ns2, "again", sealv1.PhasePlaced)
}

// TestOneSlotTwoBatches: two batches race for one slot; exactly one wins, the other stays
// Pending with a reason naming the slot, and gets the slot once the first is deleted.
func TestOneSlotTwoBatches(t *testing.T) {
	h := newHarness(t)
	ns := h.namespace("race")
	h.addNode("node-r", 1, 8, nil)
	h.newBatch(ns, "first", 2, nil)
	h.newBatch(ns, "second", 2, nil)

	var winner, loser string
	h.eventually("one placed, one unschedulable", func() (bool, string) {
		a, b := h.batch(ns, "first"), h.batch(ns, "second")
		switch {
		case a.Status.Node != "" && b.Status.Phase == sealv1.PhasePending && condition(b, sealv1.CondPlaced) != nil:
			winner, loser = "first", "second"
		case b.Status.Node != "" && a.Status.Phase == sealv1.PhasePending && condition(a, sealv1.CondPlaced) != nil:
			winner, loser = "second", "first"
		default:
			return false, fmt.Sprintf("first=%s/%s second=%s/%s", a.Status.Phase, a.Status.Node, b.Status.Phase, b.Status.Node)
		}
		return true, ""
	})
	if winner != "first" {
		t.Errorf("the older batch must win, got %s", winner)
	}
	c := condition(h.batch(ns, loser), sealv1.CondPlaced)
	if c.Reason != string(sealv1.ReasonUnschedulable) || !strings.Contains(c.Message, "1 node:") ||
		!(strings.Contains(c.Message, "pipelines busy") || strings.Contains(c.Message, "no free slot")) {
		t.Errorf("unschedulable reason: %+v", c)
	}
	if l := h.held("node-r"); len(l) != 1 {
		t.Fatalf("double booking: %+v", l)
	}

	// Deleting the winner releases its slot; the loser is placed there.
	if err := h.c.Delete(context.Background(), h.batch(ns, winner)); err != nil {
		t.Fatal(err)
	}
	h.eventually("winner gone", func() (bool, string) {
		h.reapPods(ns)
		return h.batch(ns, winner) == nil, "still there"
	})
	// Its slot is dirty: the loser waits for the scrub, with a reason that says so.
	h.eventually("the loser waits for the scrub", func() (bool, string) {
		c := condition(h.batch(ns, loser), sealv1.CondPlaced)
		return c != nil && strings.Contains(c.Message, "waiting for their scrub"), fmt.Sprintf("%+v", c)
	})
	if b := h.batch(ns, loser); b.Status.Node != "" {
		t.Fatalf("placed on a dirty slot: %+v", b.Status)
	}
	h.succeedScrubs("node-r")
	got := h.waitPhase(ns, loser, sealv1.PhasePlaced)
	if got.Status.Node != "node-r" {
		t.Errorf("loser placed on %q", got.Status.Node)
	}
}

// TestRestartMidPC1: an operator restart while a batch runs rebuilds state from the API: no
// second pod, no second slot.
func TestRestartMidPC1(t *testing.T) {
	h := newHarness(t)
	ns := h.namespace("restart")
	h.addNode("node-s", 2, 8, nil)
	h.newBatch(ns, "b", 2, nil)
	pod := h.waitPod(ns, "b-sealer-1")
	h.progress.set(&controllers.ProgressReport{Phase: "pc1", Layer: 1, Layers: 2, Percent: 10})
	h.setPod(pod, corev1.PodRunning, 0, "")
	h.waitPhase(ns, "b", sealv1.PhasePC1)

	h.stopOperator()
	h.startOperator()
	h.progress.set(&controllers.ProgressReport{Phase: "pc1", Layer: 2, Layers: 2, Percent: 40})
	h.eventually("progress after restart", func() (bool, string) {
		b := h.batch(ns, "b")
		return b.Status.Progress != nil && b.Status.Progress.Layer == 2, "old progress"
	})
	var pods corev1.PodList
	if err := h.c.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Errorf("restart created pods: %d", len(pods.Items))
	}
	if l := h.held("node-s"); len(l) != 1 {
		t.Errorf("restart changed what is held: %+v", l)
	}
	if b := h.batch(ns, "b"); b.Status.Attempts != 1 {
		t.Errorf("attempts %d", b.Status.Attempts)
	}
}

// TestSealerFailureRetriesThenFails: a failing sealer is retried on the same node and slot as
// often as the spec allows (never while its node is cordoned for a drain), under a disruption
// budget that refuses evictions; a failure that would repeat is final at once.
func TestSealerFailureRetriesThenFails(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ns := h.namespace("retry")
	h.addNode("node-f", 1, 8, nil)
	h.newBatch(ns, "b", 2, func(b *sealv1.SealBatch) { b.Spec.ReleasePolicy = sealv1.ReleaseOnOutputsTaken })
	if got := h.batch(ns, "b").Spec.MaxRetries; got == nil || *got != sealv1.DefaultMaxRetries {
		t.Errorf("maxRetries default: %v", got)
	}
	first := h.waitPod(ns, "b-sealer-1")
	var pdb policyv1.PodDisruptionBudget
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b-sealer"}, &pdb); err != nil {
		t.Fatalf("no disruption budget for the sealer pod: %v", err)
	}
	if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !sel.Matches(labels.Set(first.Labels)) ||
		pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil || !metav1.IsControlledBy(&pdb, h.batch(ns, "b")) {
		t.Errorf("disruption budget does not pin the sealer pod: %+v (pod labels %v)", pdb.Spec, first.Labels)
	}
	h.setPod(first, corev1.PodFailed, 3, "layer device /var/lib/sealfleet/layers.img: I/O error")
	second := h.waitPod(ns, "b-sealer-2")
	if render.PodNode(second) != "node-f" {
		t.Errorf("retry moved to %s", render.PodNode(second))
	}
	b := h.batch(ns, "b")
	if b.Status.Slot == nil || *b.Status.Slot != 0 || b.Status.Attempts != 2 {
		t.Errorf("retry changed slot/attempts: %v %d", b.Status.Slot, b.Status.Attempts)
	}

	// A forced drain: the node is cordoned and the pod deleted. The next attempt waits for
	// the uncordon instead of landing on the node being emptied.
	h.setCordon("node-f", true)
	if err := h.c.Delete(ctx, second, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	h.eventually("batch waits for uncordon", func() (bool, string) {
		m := h.batch(ns, "b").Status.Message
		return strings.Contains(m, "cordoned") && strings.Contains(m, "attempt 3 waits"), m
	})
	if p := h.pod(ns, "b-sealer-3"); p != nil {
		t.Fatalf("attempt 3 started on a cordoned node")
	}
	h.setCordon("node-f", false)
	third := h.waitPod(ns, "b-sealer-3")

	// Bad input fails the same way every time: no retry although two remain.
	h.setPod(third, corev1.PodFailed, 2, "config: sectors[0].ticket is not 32 bytes")
	got := h.waitPhase(ns, "b", sealv1.PhaseFailed)
	c := condition(got, sealv1.CondFailed)
	if c == nil || c.Reason != string(sealv1.ReasonSealerFailed) || !strings.Contains(c.Message, "exited 2 (bad input)") ||
		!strings.Contains(c.Message, "ticket is not 32 bytes") || !strings.Contains(c.Message, "not retried") {
		t.Errorf("failure condition: %+v", c)
	}
	if got.Status.Attempts != 3 || h.pod(ns, "b-sealer-4") != nil {
		t.Errorf("attempts %d after a bad-input exit", got.Status.Attempts)
	}
	// OnOutputsTaken keeps the failed batch's slot (its layers) until it is deleted.
	if l := h.held("node-f"); len(l) != 1 {
		t.Errorf("failed batch released its slot early: %+v", l)
	}
}

// TestDataBatchMountsItsDataAndFailsOnAMismatch: a data sector's batch mounts its data source
// read-only and hands the sealer the file and pieces; the sealer's data-mismatch exit fails
// the batch with DataMismatch at once (the same data would fail every retry).
func TestDataBatchMountsItsDataAndFailsOnAMismatch(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ns := h.namespace("data")
	h.addNode("node-d", 1, 8, nil)
	h.newBatch(ns, "d", 2, func(b *sealv1.SealBatch) {
		b.Spec.DataSource = &sealv1.DataSource{HostPath: &sealv1.HostPathData{Path: "/var/lib/sealfleet/deals"}}
		b.Spec.Sectors[1].Data = &sealv1.SectorData{File: "staged/s-2", Pieces: []sealv1.Piece{
			{CID: "baga6ea4seaqao7s73y24kcutaosvacpdjgfe5pw76ooefnyqw4ynr3d2y6x2mpq", Size: 8 << 20}}}
	})
	pod := h.waitPod(ns, "d-sealer-1")
	var mount *corev1.VolumeMount
	for i, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.Name == "data" {
			mount = &pod.Spec.Containers[0].VolumeMounts[i]
		}
	}
	if mount == nil || !mount.ReadOnly || mount.MountPath != "/data" {
		t.Errorf("data mount: %+v", mount)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == "data" && (v.HostPath == nil || v.HostPath.Path != "/var/lib/sealfleet/deals") {
			t.Errorf("data volume: %+v", v.VolumeSource)
		}
	}
	var cm corev1.ConfigMap
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "d-sealer-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	var cfg render.SealerConfig
	if err := json.Unmarshal([]byte(cm.Data[render.ConfigKey]), &cfg); err != nil {
		t.Fatal(err)
	}
	if d := cfg.Sectors[1].Data; cfg.Sectors[0].Data != nil || d == nil || d.Path != "/data/staged/s-2" ||
		len(d.Pieces) != 1 || !strings.HasPrefix(d.Pieces[0].CommP, "077e5fde") || d.Pieces[0].Size != 8<<20 {
		t.Errorf("sealer config sectors: %+v", cfg.Sectors)
	}

	h.setPod(pod, corev1.PodFailed, 7, "sealer: data mismatch: sector 2: its data /data/staged/s-2 has comm_d 11… (tree-d root) but its pieces make 077e…")
	got := h.waitPhase(ns, "d", sealv1.PhaseFailed)
	c := condition(got, sealv1.CondFailed)
	if c == nil || c.Reason != string(sealv1.ReasonDataMismatch) || !strings.Contains(c.Message, "sector 2") ||
		!strings.Contains(c.Message, "does not match its pieces") || !strings.Contains(c.Message, "not retried") {
		t.Errorf("failure condition: %+v", c)
	}
	if h.pod(ns, "d-sealer-2") != nil {
		t.Error("a data mismatch was retried")
	}
}

// TestSectorLeftOutTheRestComplete: a sealer that left a sector out (its own check failed
// before PC1) completes the batch with that sector Failed and its reason, the SectorsFailed
// condition naming it, an event and the failure counter; a FromSlot batch does not wait for
// the left-out sector's seed, and its slot goes back once the others have their C1.
func TestSectorLeftOutTheRestComplete(t *testing.T) {
	h := newHarness(t)
	ns := h.namespace("leftout")
	h.addNode("node-lo", 2, 8, nil)
	failures := func() float64 {
		families, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if f.GetName() == "sealfleet_sector_failures_total" && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "data-mismatch" {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	before := failures()
	leftOut := func(b *sealv1.SealBatch) string {
		r := strings.TrimSuffix(results(b), "]}")
		bad := b.Spec.Sectors[len(b.Spec.Sectors)-1].Number
		// The sealer reports a left-out sector after the sealed ones, without commitments.
		i := strings.LastIndex(r, `,{"sector_id":`)
		return r[:i] + fmt.Sprintf(`,{"sector_id":%d,"failed":"sector %d: node 0 of its data /data/d/s-%d is not a field element: give the fr32-padded staged file","failure_class":"data-mismatch"}]}`, bad, bad, bad)
	}
	b := h.newBatch(ns, "lo", 2, nil)
	h.setPod(h.waitPod(ns, "lo-sealer-1"), corev1.PodSucceeded, 0, leftOut(b))
	got := h.waitPhase(ns, "lo", sealv1.PhaseCompleted)
	bad := b.Spec.Sectors[1].Number
	if st := got.Status.Sectors[1]; st.State != "Failed" || st.CommR != "" || !strings.Contains(st.Reason, fmt.Sprintf("/data/d/s-%d", bad)) {
		t.Errorf("left-out sector status %+v", st)
	}
	if got.Status.Sectors[0].State != "Sealed" || got.Status.Sectors[0].CommR == "" {
		t.Errorf("sealed sector status %+v", got.Status.Sectors[0])
	}
	c := condition(got, sealv1.CondSectorsFailed)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(sealv1.ReasonSectorChecksFailed) || !strings.Contains(c.Message, fmt.Sprintf("1 of 2 sectors failed and were left out, the others sealed: %d (data-mismatch)", bad)) {
		t.Errorf("SectorsFailed condition %+v", c)
	}
	if !strings.Contains(got.Status.Message, "1 sectors sealed") || condition(got, sealv1.CondFailed) != nil {
		t.Errorf("message %q, conditions %+v", got.Status.Message, got.Status.Conditions)
	}
	h.eventually("a SectorChecksFailed event naming the file", func() (bool, string) {
		return h.hasEvent(ns, "lo", string(sealv1.ReasonSectorChecksFailed), fmt.Sprintf("sector %d left out of the batch: sector %d: node 0 of its data /data/d/s-%d", bad, bad, bad)), ""
	})
	if n := failures() - before; n < 1 {
		t.Errorf("sealfleet_sector_failures_total{reason=data-mismatch} grew by %v", n)
	}

	// FromSlot: the left-out sector needs no seed; one seed for the other completes the batch.
	fs := h.newBatch(ns, "lofs", 2, func(b *sealv1.SealBatch) {
		b.Spec.Commit1 = sealv1.Commit1FromSlot
		b.Spec.SeedTimeout = &metav1.Duration{Duration: time.Hour}
	})
	h.setPod(h.waitPod(ns, "lofs-sealer-1"), corev1.PodSucceeded, 0, leftOut(fs))
	h.waitPhase(ns, "lofs", sealv1.PhaseWaitingForSeeds)
	if err := h.changeBatch(ns, "lofs", func(b *sealv1.SealBatch) {
		b.Spec.Seeds = []sealv1.SectorSeed{{Number: fs.Spec.Sectors[0].Number, Randomness: strings.Repeat("44", 32)}}
	}); err != nil {
		t.Fatal(err)
	}
	c1 := h.waitPod(ns, "lofs-c1-1")
	if s := c1.Annotations["sealfleet.io/c1-sectors"]; s != strconv.FormatInt(fs.Spec.Sectors[0].Number, 10) {
		t.Errorf("C1 run for %q", s)
	}
	h.setPod(c1, corev1.PodSucceeded, 0, c1Results(fs.Spec.Sectors[0].Number))
	h.eventually("completed and released without the left-out sector's seed", func() (bool, string) {
		got = h.batch(ns, "lofs")
		r := condition(got, sealv1.CondReleased)
		return got.Status.Phase == sealv1.PhaseCompleted && r != nil && r.Status == "True", got.Status.Message
	})
	if got.Status.Sectors[1].State != "Failed" || condition(got, sealv1.CondSeedsMissing) != nil {
		t.Errorf("after C1: %+v, %+v", got.Status.Sectors, got.Status.Conditions)
	}
}

// TestNodeDeletedWhileRunning fails the batch with NodeLost.
func TestNodeDeletedWhileRunning(t *testing.T) {
	h := newHarness(t)
	ns := h.namespace("nodelost")
	h.addNode("node-l", 1, 8, nil)
	h.newBatch(ns, "b", 2, nil)
	pod := h.waitPod(ns, "b-sealer-1")
	h.setPod(pod, corev1.PodRunning, 0, "")
	h.waitPhase(ns, "b", sealv1.PhasePC1)
	if err := h.c.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-l"}}); err != nil {
		t.Fatal(err)
	}
	got := h.waitPhase(ns, "b", sealv1.PhaseFailed)
	if c := condition(got, sealv1.CondFailed); c == nil || c.Reason != string(sealv1.ReasonNodeLost) {
		t.Errorf("want NodeLost, got %+v", c)
	}
}

// TestDeleteInEveryPhase: deleting a batch in any phase removes its pod, frees exactly its
// slot and lets the object go.
func TestDeleteInEveryPhase(t *testing.T) {
	h := newHarness(t)
	ns := h.namespace("delete")
	h.addNode("node-d", 2, 8, nil)
	// A neighbour holds the other slot throughout; its claim must survive.
	h.newBatch(ns, "neighbour", 2, nil)
	h.waitPhase(ns, "neighbour", sealv1.PhasePlaced)

	steps := map[string]func(name string){
		"Pending": func(name string) {
			h.newBatch(ns, name, 2, func(b *sealv1.SealBatch) { b.Spec.Placement = &sealv1.Placement{NodeName: "no-such-node"} })
			h.waitPhase(ns, name, sealv1.PhasePending)
		},
		"Placed": func(name string) { h.newBatch(ns, name, 2, nil); h.waitPod(ns, name+"-sealer-1") },
		"PC1": func(name string) {
			h.newBatch(ns, name, 2, nil)
			h.setPod(h.waitPod(ns, name+"-sealer-1"), corev1.PodRunning, 0, "")
			h.waitPhase(ns, name, sealv1.PhasePC1)
		},
		"Failed": func(name string) {
			h.newBatch(ns, name, 2, func(b *sealv1.SealBatch) { b.Spec.ReleasePolicy = sealv1.ReleaseOnOutputsTaken })
			h.setPod(h.waitPod(ns, name+"-sealer-1"), corev1.PodFailed, 4, "boom")
			h.waitPhase(ns, name, sealv1.PhaseFailed)
		},
		"Completed": func(name string) {
			b := h.newBatch(ns, name, 2, func(b *sealv1.SealBatch) { b.Spec.ReleasePolicy = sealv1.ReleaseOnOutputsTaken })
			h.setPod(h.waitPod(ns, name+"-sealer-1"), corev1.PodSucceeded, 0, results(b))
			h.waitPhase(ns, name, sealv1.PhaseCompleted)
		},
	}
	for _, phase := range []string{"Pending", "Placed", "PC1", "Failed", "Completed"} {
		name := "del-" + strings.ToLower(phase)
		steps[phase](name)
		b := h.batch(ns, name)
		if err := h.c.Delete(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		h.eventually(name+" deleted and its slot scrubbed", func() (bool, string) {
			h.reapPods(ns)
			if cur := h.batch(ns, name); cur != nil {
				return false, cur.Status.Message
			}
			return h.scrubbed("node-d")
		})
		var pods corev1.PodList
		if err := h.c.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{render.LabelBatchUID: string(b.UID), render.LabelComponent: render.ComponentSeal}); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				t.Errorf("%s: sealer pod %s still running after delete", phase, p.Name)
			}
		}
		l := h.held("node-d")
		for _, r := range l {
			if r.UID == b.UID {
				t.Errorf("%s: slot %d still held by the deleted batch", phase, r.Slot)
			}
		}
		if len(l) != 1 || !strings.HasSuffix(l[0].Batch, "/neighbour") {
			t.Errorf("%s: neighbour's claim disturbed: %+v", phase, l)
		}
	}
}

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// TestStuckReleaseIsVisibleAndForceable: a deleted batch whose pod never terminates (a lost
// kubelet) shows why deletion is blocked. The force annotation does not free a slot a sealer
// may still write (it only skips the scrub): the slot goes once the admin marks the node shut
// down with the out-of-service taint, and the pod is deleted at once.
func TestStuckReleaseIsVisibleAndForceable(t *testing.T) {
	h := newHarness(t)
	ns := h.namespace("stuck")
	h.addNode("node-k", 1, 8, nil)
	h.newBatch(ns, "b", 2, nil)
	h.setPod(h.waitPod(ns, "b-sealer-1"), corev1.PodRunning, 0, "")
	h.waitPhase(ns, "b", sealv1.PhasePC1)
	if err := h.c.Delete(context.Background(), h.batch(ns, "b")); err != nil {
		t.Fatal(err)
	}
	blocked := func(what string) {
		h.eventually(what, func() (bool, string) {
			b := h.batch(ns, "b")
			c := condition(b, sealv1.CondDeletionIsBlocked)
			return c != nil && c.Reason == string(sealv1.ReasonWaitingForPod) &&
				strings.Contains(c.Message, "waiting for sealer pod b-sealer-1 on node node-k") &&
				strings.Contains(c.Message, "node.kubernetes.io/out-of-service"), fmt.Sprintf("%+v", b.Status.Conditions)
		})
		if l := h.held("node-k"); len(l) != 1 {
			t.Fatalf("%s: slot released while the sealer may still write: %+v", what, l)
		}
	}
	blocked("deletion blocked")
	b := h.batch(ns, "b")
	b.Annotations = map[string]string{controllers.AnnotationForceRelease: "true"}
	if err := h.c.Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the operator has seen the annotation
	blocked("forced, pod still running on a live node")

	var node corev1.Node
	if err := h.c.Get(context.Background(), client.ObjectKey{Name: "node-k"}, &node); err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	if err := h.c.Update(context.Background(), &node); err != nil {
		t.Fatal(err)
	}
	h.eventually("released once the node is out of service", func() (bool, string) { return h.batch(ns, "b") == nil, "still there" })
	if l := h.held("node-k"); len(l) != 0 {
		t.Errorf("release left the slot held: %+v", l)
	}
	var pod corev1.Pod
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "b-sealer-1"}, &pod); !apierrors.IsNotFound(err) {
		t.Errorf("the sealer pod on the out-of-service node is still there: %v", err)
	}
}

// TestWatchNamespacesConfinesTheOperator: with --watch-namespaces the operator places and runs
// batches there only; a batch elsewhere is never touched (no placement, finalizer or pod), and
// the slot stays free for the batches it serves.
func TestWatchNamespacesConfinesTheOperator(t *testing.T) {
	h := newHarnessWatching(t, "served,"+scrubNS)
	served, other := h.namespace("served"), h.namespace("elsewhere")
	h.addNode("node-w", 1, 8, nil)
	h.newBatch(other, "outside", 2, nil)
	h.newBatch(served, "inside", 2, nil)
	h.waitPod(served, "inside-sealer-1")
	time.Sleep(2 * time.Second) // several cycles: the outside batch must still be untouched
	b := h.batch(other, "outside")
	if b.Status.Node != "" || len(b.Finalizers) != 0 || len(b.Status.Conditions) != 0 || h.pod(other, "outside-sealer-1") != nil {
		t.Errorf("batch outside --watch-namespaces was handled: node %q finalizers %v conditions %v", b.Status.Node, b.Finalizers, b.Status.Conditions)
	}
	if l := h.held("node-w"); len(l) != 1 || l[0].Batch != served+"/inside" {
		t.Errorf("claims on node-w: %+v", l)
	}
}

// TestSnapUpdateRunsBesideASealWithoutASlot: an update placed on a node whose only slot a
// seal holds runs `sealer snap` with its sector keys and data mounted read-only and no layer
// device, hugepages or parent cache; its results (comm_r_new, comm_d_new, comm_r_old) become
// the sectors' status, and it releases its cores and output bytes when it completes.
func TestSnapUpdateRunsBesideASealWithoutASlot(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ns := h.namespace("snap")
	h.addNode("node-u", 1, 8, nil)
	h.newBatch(ns, "cc", 1, nil)
	h.waitPod(ns, "cc-sealer-1")
	b := h.newBatch(ns, "up", 2, func(b *sealv1.SealBatch) {
		b.Spec.Update = &sealv1.SnapUpdate{SectorKeys: sealv1.SectorKeySource{
			HostPath: &sealv1.HostPathData{Path: "/var/lib/sealfleet/output/snap/cc"}, Layout: sealv1.OutputLayoutLotus}}
		b.Spec.Placement = &sealv1.Placement{NodeName: "node-u"}
		b.Spec.DataSource = &sealv1.DataSource{HostPath: &sealv1.HostPathData{Path: "/var/lib/sealfleet/deals"}}
		for i := range b.Spec.Sectors {
			b.Spec.Sectors[i].Ticket = ""
			b.Spec.Sectors[i].Data = &sealv1.SectorData{File: fmt.Sprintf("staged/s-%d", i), Pieces: []sealv1.Piece{
				{CID: "baga6ea4seaqao7s73y24kcutaosvacpdjgfe5pw76ooefnyqw4ynr3d2y6x2mpq", Size: 8 << 20}}}
		}
	})
	pod := h.waitPod(ns, "up-sealer-1")
	got := h.batch(ns, "up")
	if got.Status.Slot != nil || got.Status.SlotRange != nil || got.Status.Hugepages1Gi != 0 || got.Status.CPUs == "" || got.Status.OutputBytes == 0 {
		t.Errorf("update placement: slot %v range %v hugepages %d cpus %q output %d", got.Status.Slot, got.Status.SlotRange,
			got.Status.Hugepages1Gi, got.Status.CPUs, got.Status.OutputBytes)
	}
	c := pod.Spec.Containers[0]
	if strings.Join(c.Command, " ") != "/sealer snap --config /etc/sealer/config.json" {
		t.Errorf("command %v", c.Command)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	for _, name := range []string{"sector-keys", "data"} {
		if m, ok := mounts[name]; !ok || !m.ReadOnly {
			t.Errorf("%s not mounted read-only: %+v", name, c.VolumeMounts)
		}
	}
	for name := range mounts {
		if strings.HasPrefix(name, "layer-") || name == "hugepages" || name == "parent-cache" {
			t.Errorf("an update mounts %s", name)
		}
	}
	var cm corev1.ConfigMap
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "up-sealer-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	var cfg render.SnapConfig
	if err := json.Unmarshal([]byte(cm.Data[render.ConfigKey]), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sectors) != 2 || cfg.Sectors[1].SectorKey != fmt.Sprintf("/sector-keys/sealed/s-t01000-%d", b.Spec.Sectors[1].Number) ||
		cfg.Sectors[1].Data == nil || cfg.Sectors[1].Data.Path != "/data/staged/s-1" || cfg.OutputDir != "/output/snap/up" {
		t.Errorf("update config: %+v", cfg)
	}

	h.setPod(pod, corev1.PodRunning, 0, "")
	h.waitPhase(ns, "up", sealv1.PhaseUpdating)
	var parts []string
	for _, s := range b.Spec.Sectors {
		parts = append(parts, fmt.Sprintf(`{"sector_id":%d,"comm_d_new":"%064x","comm_r_old":"%064x","comm_r_last_new":"%064x","comm_r_new":"%064x"}`,
			s.Number, 1, 2, 3, s.Number))
	}
	h.setPod(pod, corev1.PodSucceeded, 0, `{"sectors":[`+strings.Join(parts, ",")+`]}`)
	h.eventually("update completed and released", func() (bool, string) {
		got = h.batch(ns, "up")
		r := condition(got, sealv1.CondReleased)
		return got.Status.Phase == sealv1.PhaseCompleted && r != nil && r.Status == "True", got.Status.Message
	})
	s := got.Status.Sectors[0]
	if s.State != "Updated" || s.CommR != fmt.Sprintf("%064x", s.Number) || s.CommROld != fmt.Sprintf("%064x", 2) ||
		s.CommD != fmt.Sprintf("%064x", 1) || s.CommRLast != fmt.Sprintf("%064x", 3) || s.CommRCID == "" {
		t.Errorf("updated sector: %+v", s)
	}
	if u := condition(got, sealv1.CondUpdated); u == nil || u.Status != "True" || u.Reason != string(sealv1.ReasonEncoded) {
		t.Errorf("Updated condition: %+v", u)
	}
	for _, d := range h.sealerNode("node-u").Status.DirtySlots {
		if d.BatchUID == string(got.UID) {
			t.Errorf("an update (no slot) left a slot to scrub: %+v", d)
		}
	}
	// The seal still holds the slot; the update holds nothing.
	if l := h.held("node-u"); len(l) != 1 || l[0].Batch != ns+"/cc" {
		t.Errorf("claims on the node: %+v", l)
	}
}

// c1Results is what `sealer c1` reports for the given sectors.
func c1Results(numbers ...int64) string {
	var parts []string
	for _, n := range numbers {
		parts = append(parts, fmt.Sprintf(`{"sector_id":%d,"c1_output":"/output/x/cache/%d/commit-phase1-output"}`, n, n))
	}
	return `{"sectors":[` + strings.Join(parts, ",") + `]}`
}

// TestC1FromSlot: a commit1 FromSlot batch seals without layer copies and holds its slot (and
// nothing else) after PC2; each seed starts a C1 pod for its sector at once (the other sector
// still waiting), a failed C1 pod is run again, and the batch completes and releases once
// every sector has its output.
func TestC1FromSlot(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ns := h.namespace("c1")
	h.addNode("node-c", 1, 8, nil)
	b := h.newBatch(ns, "c", 2, func(b *sealv1.SealBatch) {
		b.Spec.Commit1 = sealv1.Commit1FromSlot
		b.Spec.SeedTimeout = &metav1.Duration{Duration: time.Hour}
	})
	first, second := b.Spec.Sectors[0].Number, b.Spec.Sectors[1].Number
	pod := h.waitPod(ns, "c-sealer-1")
	if !slices.Contains(pod.Spec.Containers[0].Command, "--no-layer-files") {
		t.Errorf("seal command %v copies the layers", pod.Spec.Containers[0].Command)
	}
	h.setPod(pod, corev1.PodSucceeded, 0, results(b))
	got := h.waitPhase(ns, "c", sealv1.PhaseWaitingForSeeds)
	if got.Status.SeedDeadline == nil || len(got.Status.Sectors) != 2 || got.Status.Sectors[0].CommR == "" {
		t.Errorf("waiting for seeds: %+v", got.Status)
	}
	if l := h.held("node-c"); len(l) != 1 || l[0].Running || len(l[0].CPUs) != 0 || l[0].Hugepages != 0 {
		t.Errorf("claims while waiting for seeds (want the slot alone): %+v", l)
	}
	if c := condition(got, sealv1.CondC1Complete); c == nil || c.Reason != string(sealv1.ReasonWaitingForSeeds) || !strings.Contains(c.Message, "0/2") {
		t.Errorf("C1Complete while waiting: %+v", c)
	}

	// The first seed starts C1 for its sector alone, while the second sector waits.
	if err := h.changeBatch(ns, "c", func(b *sealv1.SealBatch) {
		b.Spec.Seeds = []sealv1.SectorSeed{{Number: first, Randomness: strings.Repeat("5e", 32), Epoch: 1000}}
	}); err != nil {
		t.Fatal(err)
	}
	c1 := h.waitPod(ns, "c-c1-1")
	if cmd := strings.Join(c1.Spec.Containers[0].Command, " "); cmd != "/sealer c1 --config /etc/sealer/config.json --seeds /etc/sealer-seeds/seeds.json" {
		t.Errorf("C1 command %q", cmd)
	}
	mounts := map[string]bool{}
	for _, m := range c1.Spec.Containers[0].VolumeMounts {
		mounts[m.Name] = true
	}
	if !mounts["seeds"] || !mounts["config"] || !mounts["output"] || !mounts["layer-0"] || mounts["hugepages"] {
		t.Errorf("C1 pod mounts %v", mounts)
	}
	seeds := func() string {
		var cm corev1.ConfigMap
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-c1-seeds"}, &cm); err != nil {
			t.Fatal(err)
		}
		return cm.Data[render.SeedsKey]
	}
	if want := fmt.Sprintf(`{"sectors":[{"sector_id":%d,"seed":"%s"}]}`, first, strings.Repeat("5e", 32)); seeds() != want {
		t.Errorf("seeds file of run 1 %s\nwant %s", seeds(), want)
	}
	h.waitPhase(ns, "c", sealv1.PhaseC1)
	h.setPod(c1, corev1.PodSucceeded, 0, c1Results(first))
	h.eventually("first sector's C1 written, second waiting with the slot held", func() (bool, string) {
		got = h.batch(ns, "c")
		return got.Status.Phase == sealv1.PhaseWaitingForSeeds && got.Status.Sectors[0].State == "C1Written", fmt.Sprintf("%s %+v", got.Status.Phase, got.Status.Sectors)
	})
	if got.Status.Sectors[1].State == "C1Written" || h.pod(ns, "c-c1-2") != nil || condition(got, sealv1.CondReleased) != nil && condition(got, sealv1.CondReleased).Status == "True" {
		t.Fatalf("after the first run: %+v, conditions %+v", got.Status.Sectors, got.Status.Conditions)
	}
	if l := h.held("node-c"); len(l) != 1 {
		t.Errorf("slot given back while sector %d waits: %+v", second, l)
	}

	// The second seed arrives (in base64): its own run, which fails once and is run again.
	if err := h.changeBatch(ns, "c", func(b *sealv1.SealBatch) {
		b.Spec.Seeds = append(b.Spec.Seeds, sealv1.SectorSeed{Number: second, Randomness: "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=", Epoch: 1001})
	}); err != nil {
		t.Fatal(err)
	}
	c1 = h.waitPod(ns, "c-c1-2")
	if want := fmt.Sprintf(`{"sectors":[{"sector_id":%d,"seed":"0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"}]}`, second); seeds() != want {
		t.Errorf("seeds file of run 2 %s\nwant %s", seeds(), want)
	}
	h.setPod(c1, corev1.PodFailed, 3, "sealer: reading layer pages: I/O error")
	c1 = h.waitPod(ns, "c-c1-3")
	h.setPod(c1, corev1.PodSucceeded, 0, c1Results(second))
	h.eventually("completed and released", func() (bool, string) {
		got = h.batch(ns, "c")
		r := condition(got, sealv1.CondReleased)
		return got.Status.Phase == sealv1.PhaseCompleted && r != nil && r.Status == "True", got.Status.Message
	})
	for _, s := range got.Status.Sectors {
		if s.State != "C1Written" {
			t.Errorf("sector %d state %s", s.Number, s.State)
		}
	}
	if c := condition(got, sealv1.CondC1Complete); c == nil || c.Status != "True" || condition(got, sealv1.CondSeedsMissing) != nil {
		t.Errorf("conditions: %+v", got.Status.Conditions)
	}
}

// TestC1AbandonedAndFailedSectors: a sector its owner abandons is no longer waited for, a
// sector whose C1 fails for good is C1Failed with the reason, and neither stops the other
// sectors' C1; the slot goes back once the last waiting sector is done.
func TestC1AbandonedAndFailedSectors(t *testing.T) {
	h := newHarness(t)
	ns := h.namespace("c1ab")
	h.addNode("node-ab", 1, 8, nil)
	b := h.newBatch(ns, "ab", 4, func(b *sealv1.SealBatch) {
		b.Spec.Commit1 = sealv1.Commit1FromSlot
		b.Spec.SeedTimeout = &metav1.Duration{Duration: time.Hour}
	})
	n := func(i int) int64 { return b.Spec.Sectors[i].Number }
	h.setPod(h.waitPod(ns, "ab-sealer-1"), corev1.PodSucceeded, 0, results(b))
	got := h.waitPhase(ns, "ab", sealv1.PhaseWaitingForSeeds)

	// Sector 0 fails deterministically; sector 1 is abandoned with no seed.
	if err := h.changeBatch(ns, "ab", func(b *sealv1.SealBatch) {
		b.Spec.Seeds = []sealv1.SectorSeed{{Number: n(0), Randomness: strings.Repeat("11", 32)}}
		b.Spec.AbandonedSectors = []int64{n(1)}
	}); err != nil {
		t.Fatal(err)
	}
	h.setPod(h.waitPod(ns, "ab-c1-1"), corev1.PodFailed, 2, "sector "+strconv.FormatInt(n(0), 10)+": challenge labels do not match comm_r")
	h.eventually("sector 0 C1Failed, sector 1 Abandoned, others waiting", func() (bool, string) {
		got = h.batch(ns, "ab")
		st := got.Status.Sectors
		return got.Status.Phase == sealv1.PhaseWaitingForSeeds && st[0].State == "C1Failed" && st[1].State == "Abandoned", fmt.Sprintf("%+v", st)
	})
	if r := got.Status.Sectors[0].Reason; !strings.Contains(r, "run 1") || !strings.Contains(r, "not retried") {
		t.Errorf("C1Failed reason %q", r)
	}
	// An abandoned sector cannot be taken back.
	if err := h.changeBatch(ns, "ab", func(b *sealv1.SealBatch) { b.Spec.AbandonedSectors = nil }); err == nil || !strings.Contains(err.Error(), "cannot be taken back") {
		t.Errorf("removing an abandoned sector: %v", err)
	}
	// Sectors 2 and 3 seeded together share one run; then the batch completes and releases.
	if err := h.changeBatch(ns, "ab", func(b *sealv1.SealBatch) {
		b.Spec.Seeds = append(b.Spec.Seeds,
			sealv1.SectorSeed{Number: n(2), Randomness: strings.Repeat("22", 32)}, sealv1.SectorSeed{Number: n(3), Randomness: strings.Repeat("33", 32)})
	}); err != nil {
		t.Fatal(err)
	}
	c1 := h.waitPod(ns, "ab-c1-2")
	if s := c1.Annotations["sealfleet.io/c1-sectors"]; s != fmt.Sprintf("%d,%d", n(2), n(3)) {
		t.Errorf("run 2 sectors %q", s)
	}
	h.setPod(c1, corev1.PodSucceeded, 0, c1Results(n(2), n(3)))
	h.eventually("completed and released", func() (bool, string) {
		got = h.batch(ns, "ab")
		r := condition(got, sealv1.CondReleased)
		return got.Status.Phase == sealv1.PhaseCompleted && r != nil && r.Status == "True", got.Status.Message
	})
	want := []string{"C1Failed", "Abandoned", "C1Written", "C1Written"}
	for i, s := range got.Status.Sectors {
		if s.State != want[i] {
			t.Errorf("sector %d state %s, want %s", s.Number, s.State, want[i])
		}
	}
	if !strings.Contains(got.Status.Message, "2 of 4") || !strings.Contains(got.Status.Message, "1 C1Failed") || !strings.Contains(got.Status.Message, "1 Abandoned") {
		t.Errorf("message %q", got.Status.Message)
	}
	if condition(got, sealv1.CondSeedsMissing) != nil {
		t.Errorf("SeedsMissing with every sector settled: %+v", got.Status.Conditions)
	}
}

// TestSeedsThatNeverCome: at spec.seedTimeout C1 runs for the seeded sectors only, and the
// batch completes naming the sectors that lost their layers; with no seed at all it completes
// without a C1 pod.
func TestSeedsThatNeverCome(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ns := h.namespace("seedless")
	h.addNode("node-s", 2, 8, nil)
	mk := func(name string) *sealv1.SealBatch {
		b := h.newBatch(ns, name, 2, func(b *sealv1.SealBatch) {
			b.Spec.Commit1 = sealv1.Commit1FromSlot
			b.Spec.SeedTimeout = &metav1.Duration{Duration: 3 * time.Second}
		})
		pod := h.waitPod(ns, name+"-sealer-1")
		h.setPod(pod, corev1.PodSucceeded, 0, results(b))
		h.waitPhase(ns, name, sealv1.PhaseWaitingForSeeds)
		return b
	}
	half := mk("half")
	got := h.batch(ns, "half")
	got.Spec.Seeds = []sealv1.SectorSeed{{Number: half.Spec.Sectors[1].Number, Randomness: strings.Repeat("77", 32), Epoch: 5}}
	if err := h.c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	c1 := h.waitPod(ns, "half-c1-1")
	h.setPod(c1, corev1.PodSucceeded, 0, c1Results(half.Spec.Sectors[1].Number))
	got = h.waitPhase(ns, "half", sealv1.PhaseCompleted)
	lost := condition(got, sealv1.CondSeedsMissing)
	if lost == nil || lost.Reason != string(sealv1.ReasonSeedTimeout) || !strings.Contains(lost.Message, strconv.FormatInt(half.Spec.Sectors[0].Number, 10)) ||
		strings.Contains(lost.Message, strconv.FormatInt(half.Spec.Sectors[1].Number, 10)) {
		t.Errorf("SeedsMissing: %+v", lost)
	}
	if got.Status.Sectors[0].State != "SeedMissing" || got.Status.Sectors[1].State != "C1Written" {
		t.Errorf("sector states: %+v", got.Status.Sectors)
	}

	none := mk("none")
	got = h.waitPhase(ns, "none", sealv1.PhaseCompleted)
	if h.pod(ns, "none-c1-1") != nil {
		t.Error("a C1 pod ran with no seeds")
	}
	if c := condition(got, sealv1.CondSeedsMissing); c == nil || !strings.Contains(c.Message, strconv.FormatInt(none.Spec.Sectors[1].Number, 10)) {
		t.Errorf("SeedsMissing: %+v", c)
	}
	if c := condition(got, sealv1.CondC1Complete); c == nil || c.Status != "False" || c.Reason != string(sealv1.ReasonSeedTimeout) {
		t.Errorf("C1Complete with no C1 run: %+v", c)
	}
}
