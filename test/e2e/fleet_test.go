package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/placement"
	"github.com/sealfleet/sealfleet/internal/render"
)

const fleetNS = "e2e-fleet"

// fleetScrubNS holds the scrub pods of the fleet's released slots (kwok completes them).
const fleetScrubNS = "e2e-fleet-scrub"

// operatorArgs runs the local operator for the fleet: sealer pods in the batches' namespace
// (the operator's default), scrubs in their own.
var operatorArgs = []string{"operator", "--scrub-namespace=" + fleetScrubNS}

// maxTimeToPlaceP99 is what the fleet burst must meet (issue 12): decisions against an
// in-memory view, one write each.
const maxTimeToPlaceP99 = 10.0

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// fleetBatches is a deterministic mix of sizes, batch sizes, PC2 engines and selectors; every
// batch tolerates the simulated nodes' taint. Some ask for what few or no nodes have (zone +
// pool + 64 sectors on CPU-only machines) so that explanations are exercised too.
func fleetBatches(n int) []*sealv1.SealBatch {
	r := rand.New(rand.NewSource(42))
	sizes := []sealv1.SectorSize{"32GiB", "32GiB", "32GiB", "32GiB", "32GiB", "32GiB", "64GiB", "64GiB", "512MiB", "8MiB"}
	counts := []int{1, 2, 4, 8, 16, 32, 64}
	zones := []string{"zone-a", "zone-b", "zone-c", "zone-d"}
	var out []*sealv1.SealBatch
	for i := 0; i < n; i++ {
		gpu := r.Intn(2) == 0
		pool, engine := "pc1-cpu", sealv1.PC2Engine("cpu")
		if gpu {
			pool, engine = "pc1-gpu", "gpu"
		}
		sel := map[string]string{"sealfleet.io/pool": pool}
		if r.Intn(5) == 0 {
			sel["topology.kubernetes.io/zone"] = zones[r.Intn(len(zones))]
		}
		k := counts[r.Intn(len(counts))]
		b := &sealv1.SealBatch{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("f%04d", i), Namespace: fleetNS},
			Spec: sealv1.SealBatchSpec{
				SectorSize: sizes[r.Intn(len(sizes))], MinerID: "f01000", PC2Engine: engine,
				Placement: &sealv1.Placement{NodeSelector: sel, Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
			},
		}
		for j := 0; j < k; j++ {
			b.Spec.Sectors = append(b.Spec.Sectors, sealv1.SectorSpec{Number: int64(i*1000 + j), Ticket: fmt.Sprintf("%064x", i*1000+j+1)})
		}
		out = append(out, b)
	}
	return out
}

func createAll(t *testing.T, bs []*sealv1.SealBatch) {
	t.Helper()
	inParallel(t, bs, func(ctx context.Context, b *sealv1.SealBatch) error { return k8s.Create(ctx, b) })
}

// deleteAll deletes the batches one request each, as a user's scripts would, unplaced ones
// first so that no slot a placed one frees is taken by a batch about to go too (a collection
// delete of a thousand batches runs one by one in the API server and can outlast its request
// timeout, placing much of the backlog on the way).
func deleteAll(t *testing.T, bs []sealv1.SealBatch) {
	t.Helper()
	var unplaced, placed []*sealv1.SealBatch
	for i := range bs {
		switch b := &bs[i]; {
		case b.DeletionTimestamp != nil:
		case b.Status.Node == "":
			unplaced = append(unplaced, b)
		default:
			placed = append(placed, b)
		}
	}
	del := func(ctx context.Context, b *sealv1.SealBatch) error {
		return client.IgnoreNotFound(k8s.Delete(ctx, b))
	}
	inParallel(t, unplaced, del)
	inParallel(t, placed, del)
}

// inParallel applies op to every batch from 16 workers (the API server's client-side limit
// here is what bounds it) and fails the test with every error.
func inParallel(t *testing.T, bs []*sealv1.SealBatch, op func(context.Context, *sealv1.SealBatch) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(bs))
	next := make(chan *sealv1.SealBatch)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range next {
				if err := op(context.Background(), b); err != nil {
					errs <- fmt.Errorf("%s: %w", b.Name, err)
				}
			}
		}()
	}
	for _, b := range bs {
		next <- b
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// settled: every batch is running on a node (PC1 with its pod) or Pending with a reason.
func settled(ctx context.Context) (bool, string) {
	var list sealv1.SealBatchList
	if err := k8s.List(ctx, &list, client.InNamespace(fleetNS)); err != nil {
		return false, err.Error()
	}
	counts := map[string]int{}
	unsettled := 0
	for _, b := range list.Items {
		c := meta.FindStatusCondition(b.Status.Conditions, sealv1.CondPlaced)
		switch {
		case b.Status.Phase == sealv1.PhasePC1 && b.Status.Node != "" && b.Status.PodName != "":
			counts["running"]++
		case b.Status.Phase == sealv1.PhasePending && c != nil && c.Status == metav1.ConditionFalse && c.Message != "":
			counts["explained"]++
		default:
			counts[string(b.Status.Phase)+"?"]++
			unsettled++
		}
	}
	return unsettled == 0, fmt.Sprintf("%d batches: %v", len(list.Items), counts)
}

// checkLedger asserts what the batches hold, derived from their status (the only record) as
// placement derives it: no slot range or CPU held twice on a node, every slot inside its
// node's geometry at the range placement recorded, hugepages within the node's total.
func checkLedger(t *testing.T, ctx context.Context) (placed int) {
	t.Helper()
	var list sealv1.SealBatchList
	if err := k8s.List(ctx, &list, client.InNamespace(fleetNS)); err != nil {
		t.Fatal(err)
	}
	var sns sealv1.SealerNodeList
	if err := k8s.List(ctx, &sns); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*sealv1.SealerNode{}
	for i := range sns.Items {
		nodes[sns.Items[i].Name] = &sns.Items[i]
	}
	geometry := func(n string) ledger.Geometry {
		if sn := nodes[n]; sn != nil {
			return ledger.GeometryOf(sn)
		}
		return ledger.Geometry{}
	}
	for i := range list.Items {
		b := &list.Items[i]
		if b.Status.Node == "" {
			continue
		}
		placed++
		if b.Status.Slot == nil || b.Status.SlotRange == nil || b.Status.Layout == nil {
			t.Errorf("%s: on %s without slot, slot range or layout", b.Name, b.Status.Node)
		}
	}
	book := ledger.BookOf(list.Items, nil, geometry)
	for _, c := range book.Conflicts() {
		t.Errorf("double booking: %s", c)
	}
	for node, u := range book {
		g := geometry(node)
		cpus := map[int]string{}
		for _, c := range u.Claims {
			if c.Slot < 0 || c.Slot >= g.Count || c.Range != g.Range(c.Slot) {
				t.Errorf("%s on %s: slot %d range %+v, geometry %+v", c.Batch, node, c.Slot, c.Range, g)
			}
			for _, cpu := range c.CPUs {
				if other, dup := cpus[cpu]; dup {
					t.Errorf("%s: CPU %d held by %s and %s", node, cpu, other, c.Batch)
				}
				cpus[cpu] = c.Batch
			}
		}
		var total int64
		if sn := nodes[node]; sn != nil {
			for _, n := range sn.Status.NUMANodes {
				for _, h := range n.Hugepages {
					if h.PageSize == "1Gi" {
						total += h.Total
					}
				}
			}
		}
		if u.Hugepages() > total {
			t.Errorf("%s: batches hold %d hugepages of %d", node, u.Hugepages(), total)
		}
	}
	return placed
}

// operatorSlots reads the operator's own view of held slots (sealfleet_node_slots{state="used"}
// summed over nodes): it must agree with what the batches record.
func operatorSlots() (float64, error) {
	resp, err := http.Get("http://127.0.0.1:18080/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "sealfleet_node_slots{") && strings.Contains(line, `state="used"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return 0, fmt.Errorf("%q: %w", line, err)
			}
			sum += v
		}
	}
	return sum, nil
}

// heldByBatches counts the slots batches hold, in every namespace: a cluster the demo ran on
// keeps its backlog's batches on the same simulated nodes.
func heldByBatches(ctx context.Context) (int, error) {
	var list sealv1.SealBatchList
	if err := k8s.List(ctx, &list); err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if _, held := ledger.ClaimOf(&list.Items[i], nil); held {
			n++
		}
	}
	return n, nil
}

// checkPods asserts each running batch's pod is on its node with the resources it needs.
func checkPods(t *testing.T, ctx context.Context) {
	t.Helper()
	var list sealv1.SealBatchList
	if err := k8s.List(ctx, &list, client.InNamespace(fleetNS)); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(fleetNS), client.MatchingLabels{render.LabelComponent: render.ComponentSeal}); err != nil {
		t.Fatal(err)
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	for _, b := range list.Items {
		if b.Status.PodName == "" {
			continue
		}
		p := byName[b.Status.PodName]
		if p == nil {
			t.Errorf("%s: pod %s missing", b.Name, b.Status.PodName)
			continue
		}
		if render.PodNode(p) != b.Status.Node || (p.Spec.NodeName != "" && p.Spec.NodeName != b.Status.Node) {
			t.Errorf("%s: pod on %q (bound to %q), batch on %q", b.Name, render.PodNode(p), p.Spec.NodeName, b.Status.Node)
		}
		var c *corev1.Container
		for i := range p.Spec.Containers {
			if p.Spec.Containers[i].Name == "sealer" || c == nil {
				c = &p.Spec.Containers[i]
			}
		}
		lim, req := c.Resources.Limits, c.Resources.Requests
		wantHP := resource.NewQuantity(int64(placement.HugepagesFor(b.Spec.SectorSize, len(b.Spec.Sectors)))<<30, resource.BinarySI)
		if q := lim["hugepages-1Gi"]; q.Cmp(*wantHP) != 0 {
			t.Errorf("%s: hugepages-1Gi limit %s, want %s", b.Name, q.String(), wantHP.String())
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			l, q := lim[r], req[r]
			if l.IsZero() || l.Cmp(q) != 0 {
				t.Errorf("%s: %s request %s != limit %s (want Guaranteed QoS)", b.Name, r, q.String(), l.String())
			}
		}
		if cpu := lim[corev1.ResourceCPU]; cpu.MilliValue()%1000 != 0 {
			t.Errorf("%s: cpu %s is not whole cores", b.Name, cpu.String())
		}
		g := lim["nvidia.com/gpu"]
		if want := b.Spec.PC2Engine == "gpu"; want != (g.Value() == 1) {
			t.Errorf("%s: pc2Engine %s, nvidia.com/gpu %s", b.Name, b.Spec.PC2Engine, g.String())
		}
	}
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[int(p*float64(len(v)-1))]
}

// removeBusiestNode deletes the Node running the most batches, as a decommission or a dead
// machine would: each of its running batches must fail with NodeLost, its pods must go (the
// pod garbage collector), and no batch may be placed there afterwards.
func removeBusiestNode(t *testing.T, ctx context.Context) string {
	t.Helper()
	var list sealv1.SealBatchList
	if err := k8s.List(ctx, &list, client.InNamespace(fleetNS)); err != nil {
		t.Fatal(err)
	}
	running := map[string][]string{}
	victim := ""
	for _, b := range list.Items {
		switch b.Status.Phase {
		case sealv1.PhasePlaced, sealv1.PhasePC1, sealv1.PhasePC2:
			running[b.Status.Node] = append(running[b.Status.Node], b.Name)
			if victim == "" || len(running[b.Status.Node]) > len(running[victim]) {
				victim = b.Status.Node
			}
		}
	}
	if victim == "" {
		t.Fatal("no running batch to strand")
	}
	t0 := time.Now()
	if err := k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: victim}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "batches of the removed node "+victim+" failed with NodeLost", func(ctx context.Context) (bool, string) {
		for _, name := range running[victim] {
			var b sealv1.SealBatch
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: fleetNS, Name: name}, &b); err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(b.Status.Conditions, sealv1.CondFailed)
			if b.Status.Phase != sealv1.PhaseFailed || c == nil || c.Reason != string(sealv1.ReasonNodeLost) {
				return false, fmt.Sprintf("%s: phase %s, Failed condition %+v", name, b.Status.Phase, c)
			}
		}
		return true, ""
	})
	failedIn := time.Since(t0)
	eventually(t, 3*time.Minute, "pods of the removed node "+victim+" gone", func(ctx context.Context) (bool, string) {
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(fleetNS)); err != nil {
			return false, err.Error()
		}
		var left []string
		for _, p := range pods.Items {
			if p.Spec.NodeName == victim {
				left = append(left, p.Name)
			}
		}
		return len(left) == 0, fmt.Sprint(left)
	})
	if err := k8s.List(ctx, &list, client.InNamespace(fleetNS)); err != nil {
		t.Fatal(err)
	}
	stranded := map[string]bool{}
	for _, name := range running[victim] {
		stranded[name] = true
	}
	for _, b := range list.Items {
		if b.Status.Node == victim && !stranded[b.Name] && b.Status.Phase != sealv1.PhasePending {
			t.Errorf("%s placed on the removed node %s (phase %s)", b.Name, victim, b.Status.Phase)
		}
	}
	t.Logf("BENCH node removed: %s with %d running batches; all failed NodeLost after %.1f s, pods gone after %.1f s",
		victim, len(running[victim]), failedIn.Seconds(), time.Since(t0).Seconds())
	return victim
}

// dirtySlots counts each SealerNode's dirty slots (released, not scrubbed yet).
func dirtySlots(ctx context.Context) (map[string]int, error) {
	var list sealv1.SealerNodeList
	if err := k8s.List(ctx, &list); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, sn := range list.Items {
		if n := len(sn.Status.DirtySlots); n > 0 {
			out[sn.Name] = n
		}
	}
	return out, nil
}

// TestFleet: hundreds of simulated nodes, a thousand batches, the operator restarted halfway;
// every batch placed or explained, no slot double-booked, pods shaped right, the busiest node
// removed while its batches run, everything released on delete.
func TestFleet(t *testing.T) {
	ctx := context.Background()
	nodes := envInt("SEALFLEET_E2E_NODES", 300)
	n := envInt("SEALFLEET_E2E_BATCHES", 1000)
	if out, err := clusterEnv([]string{"FLEET_TOTAL=" + strconv.Itoa(nodes)}, "fleet"); err != nil {
		t.Fatalf("fleet: %v\n%s", err, out)
	}
	for _, name := range []string{fleetNS, fleetScrubNS} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := k8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	stopChartOperator(t)
	if out, err := cluster(operatorArgs...); err != nil {
		t.Fatalf("operator: %v\n%s", err, out)
	}
	// Deleting a thousand batches (each placed one stopping its pod and recording its slot
	// dirty) takes about a minute on a 2-vCPU machine; the limit leaves room for a slower one.
	cleanup := func() {
		var list sealv1.SealBatchList
		if err := k8s.List(ctx, &list, client.InNamespace(fleetNS)); err != nil {
			t.Fatal(err)
		}
		deleteAll(t, list.Items)
		eventually(t, 10*time.Minute, "all batches released and gone", func(ctx context.Context) (bool, string) {
			var list sealv1.SealBatchList
			if err := k8s.List(ctx, &list, client.InNamespace(fleetNS)); err != nil {
				return false, err.Error()
			}
			return len(list.Items) == 0, fmt.Sprintf("%d batches left", len(list.Items))
		})
	}
	cleanup() // leftovers of an interrupted run

	bs := fleetBatches(n)
	pid := operatorPID(t)
	u0, _ := usage(pid)
	start := time.Now()
	createAll(t, bs[:n/2])
	// Operator restart mid-scenario: a new process must adopt, not re-book, what the old one did.
	time.Sleep(5 * time.Second)
	if out, err := cluster(operatorArgs...); err != nil {
		t.Fatalf("operator restart: %v\n%s", err, out)
	}
	pid = operatorPID(t)
	u0, _ = usage(pid)
	restartedAt := time.Now()
	createAll(t, bs[n/2:])
	eventually(t, 10*time.Minute, "every batch placed or explained", settled)
	settleTime := time.Since(start)
	u1, _ := usage(pid)
	placed := checkLedger(t, ctx)
	checkPods(t, ctx)
	eventually(t, time.Minute, "the operator's view of held slots matches the batches", func(ctx context.Context) (bool, string) {
		v, err := operatorSlots()
		if err != nil {
			return false, err.Error()
		}
		n, err := heldByBatches(ctx)
		if err != nil {
			return false, err.Error()
		}
		dirty, err := dirtySlots(ctx) // an earlier run's, waiting for their node's scrub
		if err != nil {
			return false, err.Error()
		}
		for _, d := range dirty {
			n += d
		}
		return v == float64(n), fmt.Sprintf("operator %v, batches and dirty slots %d", v, n)
	})

	var list sealv1.SealBatchList
	if err := k8s.List(ctx, &list, client.InNamespace(fleetNS)); err != nil {
		t.Fatal(err)
	}
	var ttp []float64
	for _, b := range list.Items {
		if b.Status.PlacedTime != nil {
			ttp = append(ttp, b.Status.PlacedTime.Sub(b.CreationTimestamp.Time).Seconds())
		}
	}
	if p99 := percentile(ttp, .99); p99 > maxTimeToPlaceP99 {
		t.Errorf("time-to-place p99 %.0f s > %.0f s for the burst", p99, maxTimeToPlaceP99)
	}
	cpu := u1.CPUSeconds - u0.CPUSeconds
	t.Logf("BENCH fleet: %d nodes, %d batches, %d placed, %d explained, settled in %.1f s", nodes, n, placed, n-placed, settleTime.Seconds())
	t.Logf("BENCH time-to-place (s, 1 s resolution): p50 %.0f  p90 %.0f  p99 %.0f  max %.0f (%d placed)",
		percentile(ttp, .5), percentile(ttp, .9), percentile(ttp, .99), percentile(ttp, 1), len(ttp))
	t.Logf("BENCH operator since restart: %.1f CPU s over %.1f s wall (%.0f%% of a core), RSS %d MiB",
		cpu, time.Since(restartedAt).Seconds(), 100*cpu/time.Since(restartedAt).Seconds(), u1.RSSBytes>>20)

	victim := removeBusiestNode(t, ctx)

	// Delete everything: finalizers release the slots, each recorded dirty on its SealerNode
	// until the node's scrub pod (which kwok completes) has run. The removed node's slots stay
	// dirty, waiting for the node to come back; every other slot is scrubbed and free, and the
	// operator's own view must agree.
	deleteStart := time.Now()
	cleanup()
	t.Logf("BENCH deleted %d batches: all gone after %.1f s", n, time.Since(deleteStart).Seconds())
	eventually(t, 2*time.Minute, "every slot free but the removed node's dirty ones", func(ctx context.Context) (bool, string) {
		v, err := operatorSlots()
		if err != nil {
			return false, err.Error()
		}
		dirty, err := dirtySlots(ctx)
		if err != nil {
			return false, err.Error()
		}
		others := len(dirty)
		if dirty[victim] > 0 {
			others--
		}
		held, err := heldByBatches(ctx) // other namespaces' batches only, now
		if err != nil {
			return false, err.Error()
		}
		return v == float64(held+dirty[victim]) && others == 0,
			fmt.Sprintf("sealfleet_node_slots used = %v; held by other namespaces' batches %d; dirty slots %v (removed node %s)", v, held, dirty, victim)
	})
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(fleetNS)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("%d pods left in %s after every batch was deleted", len(pods.Items), fleetNS)
	}
}

// stopChartOperator scales the chart's operator (left by an earlier run on a kept cluster) to
// zero, deletes its pods of fleet batches, and waits for its pods to go: two operators acting on one fleet would each place
// batches. TestRealNode's install brings it back (helm sets its replicas again).
func stopChartOperator(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var d appsv1.Deployment
	key := client.ObjectKey{Namespace: "sealfleet-system", Name: "sealfleet-operator"}
	if err := k8s.Get(ctx, key, &d); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To[int32](0)
		if err := k8s.Patch(ctx, &d, patch); err != nil {
			t.Fatal(err)
		}
		t.Log("scaled the chart's operator (an earlier run's) to 0 for the fleet's local operator")
	}
	// Its sealer pods of fleet batches (an interrupted run's) live in its namespace, where the
	// local operator never looks: they would hold the simulated nodes' CPUs and GPUs.
	if err := k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("sealfleet-system"),
		client.MatchingLabels{render.LabelBatchNamespace: fleetNS}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the chart's operator pods gone", func(ctx context.Context) (bool, string) {
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace("sealfleet-system"), client.MatchingLabels{"app.kubernetes.io/component": "operator"}); err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d operator pods", len(pods.Items))
	})
}
