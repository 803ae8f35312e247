package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/placement"
	"github.com/sealfleet/sealfleet/internal/plugin"
	"github.com/sealfleet/sealfleet/internal/predict"
	"github.com/sealfleet/sealfleet/internal/render"
)

// demo runs one hack/demo.sh step (the same steps `make demo` runs) and returns its output.
func demo(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repo, "hack", "demo.sh"), args...)
	cmd.Env = append(append(os.Environ(), "CLUSTER_DIR="+clusterDir), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// promQuery returns (labels, value) pairs of an instant query against the demo's Prometheus.
func promQuery(q string) ([]map[string]string, []float64, error) {
	resp, err := http.Get(promURL + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, nil, fmt.Errorf("%v: %s", err, body)
	}
	var ls []map[string]string
	var vs []float64
	for _, s := range r.Data.Result {
		v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		ls, vs = append(ls, s.Metric), append(vs, v)
	}
	return ls, vs, nil
}

// corruptCacheRun flips one byte of the node's parent cache (same size: the agent's cheap
// check still says verified): the next batch's sealer refuses it (exit 6) before touching its
// slot, the operator has it rebuilt, and the second attempt seals.
func corruptCacheRun(t *testing.T, step func(env []string, args ...string) string, manifest string) {
	var m struct {
		File   string `json:"file"`
		Digest string `json:"digest"`
	}
	raw, err := os.ReadFile(manifest)
	if err != nil || json.Unmarshal(raw, &m) != nil || m.File == "" {
		t.Fatalf("manifest %s: %v %s", manifest, err, raw)
	}
	file := filepath.Join(filepath.Dir(manifest), m.File)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	const batch = "e2e-cache"
	step(nil, "seal", batch, "2")
	var b sealv1.SealBatch
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "sealfleet-batches", Name: batch}, &b); err != nil {
		t.Fatal(err)
	}
	if b.Status.Phase != sealv1.PhaseCompleted || b.Status.Attempts != 2 {
		t.Errorf("batch %s: phase %s after %d attempts, want Completed after 2 (the first refusing the corrupt cache)", batch, b.Status.Phase, b.Status.Attempts)
	}
	raw, _ = os.ReadFile(manifest)
	var after struct {
		Digest   string `json:"digest"`
		Verified bool   `json:"verified"`
	}
	if json.Unmarshal(raw, &after) != nil || !after.Verified || after.Digest != m.Digest {
		t.Errorf("rebuilt cache manifest %s, want verified with digest %s", raw, m.Digest)
	}
	step(nil, "release", batch)
}

// checkCPUManager: under the kubelet's static CPU manager (hack/cluster.sh's default) the
// kubelet grants the sealer another CPU than the layout's, and the sealer reports its move;
// under none the layout runs as placed.
func checkCPUManager(t *testing.T, batch string) {
	t.Helper()
	var b sealv1.SealBatch
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "sealfleet-batches", Name: batch}, &b); err != nil {
		t.Fatal(err)
	}
	rc := b.Status.RunningCPUs
	if rc == nil || rc.Granted == "" || len(rc.L3Groups) == 0 {
		t.Fatalf("batch status has no runningCPUs: %+v", rc)
	}
	cfg, _ := os.ReadFile(filepath.Join(clusterDir, "config", "kubelet.yaml"))
	static := strings.Contains(string(cfg), "cpuManagerPolicy: static")
	if static != (len(rc.Moves) > 0) {
		t.Errorf("kubelet CPU manager static=%v but the sealer moved %v (layout CPUs %s, granted %s)", static, rc.Moves, b.Status.CPUs, rc.Granted)
	}
	t.Logf("CPU manager static=%v: layout CPUs %s, granted %s, L3 groups %v, moves %v", static, b.Status.CPUs, rc.Granted, rc.L3Groups, rc.Moves)
}

// checkDataSector: the demo's batches hold deal data in their first sector (hack/demo.sh
// DATA_SECTORS), so its commD is its pieces' (a piece CID in the status), not the CC one, and
// the other sectors are CC; `compare` has already matched every CommR with rust-fil-proofs.
func checkDataSector(t *testing.T, batch string) {
	t.Helper()
	var b sealv1.SealBatch
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "sealfleet-batches", Name: batch}, &b); err != nil {
		t.Fatal(err)
	}
	const cc8MiB = "65f29e5d98d246c38b388cfc06db1f6b021303c5a289000bdce832a9c3ec421c"
	if b.Spec.DataSource == nil || len(b.Spec.Sectors) < 2 || b.Spec.Sectors[0].Data == nil || b.Spec.Sectors[1].Data != nil {
		t.Fatalf("the demo batch is not one data sector beside CC ones: %+v", b.Spec)
	}
	for _, s := range b.Status.Sectors {
		if s.State == "Failed" {
			continue // checkLeftOut's
		}
		data := s.Number == b.Spec.Sectors[0].Number
		if data == (s.CommD == cc8MiB) || !strings.HasPrefix(s.CommDCID, "baga6ea4seaq") {
			t.Errorf("sector %d (data %v): commD %s %s", s.Number, data, s.CommD, s.CommDCID)
		}
	}
	t.Logf("data sector %d: commD %s", b.Spec.Sectors[0].Number, b.Status.Sectors[0].CommDCID)
}

// checkLeftOut: the batch sealed with its spoiled sector left out: Completed with the
// SectorsFailed condition naming it, the sector Failed with a reason naming its file, the
// verify step saying so, and the operator's counter of left-out sectors up.
func checkLeftOut(t *testing.T, batch, verify string) {
	t.Helper()
	var b sealv1.SealBatch
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "sealfleet-batches", Name: batch}, &b); err != nil {
		t.Fatal(err)
	}
	bad := b.Spec.Sectors[3]
	var st sealv1.SectorStatus
	for _, s := range b.Status.Sectors {
		if s.Number == bad.Number {
			st = s
		}
	}
	if b.Status.Phase != sealv1.PhaseCompleted || st.State != "Failed" || bad.Data == nil ||
		!strings.Contains(st.Reason, "not a field element") || !strings.Contains(st.Reason, filepath.Base(bad.Data.File)) {
		t.Errorf("the spoiled sector %d: batch %s, status %+v", bad.Number, b.Status.Phase, st)
	}
	c := meta.FindStatusCondition(b.Status.Conditions, sealv1.CondSectorsFailed)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, fmt.Sprintf("%d (data-mismatch)", bad.Number)) {
		t.Errorf("SectorsFailed condition %+v", c)
	}
	if !strings.Contains(verify, fmt.Sprintf("sector %d  left out of the batch", bad.Number)) {
		t.Errorf("verify does not say sector %d was left out:\n%s", bad.Number, verify)
	}
	if out, err := sealfleetPlugin("batch", batch, "-n", "sealfleet-batches"); err != nil || !strings.Contains(string(out), "not a field element") {
		t.Errorf("kubectl sealfleet batch does not say why sector %d failed: %v\n%s", bad.Number, err, out)
	}
	t.Logf("sector %d left out: %s", bad.Number, st.Reason)
}

// checkLotusStore: the demo's batches write a lotus/Curio storage path; each sector is where
// lotus-miner and Curio look for it, and sectorstore.json names the path by the batch UID.
func checkLotusStore(t *testing.T, batch string) {
	t.Helper()
	var b sealv1.SealBatch
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "sealfleet-batches", Name: batch}, &b); err != nil {
		t.Fatal(err)
	}
	if want := placement.OutputBytesFor(b.Spec.SectorSize, len(b.Spec.Sectors)); b.Status.OutputBytes != want {
		t.Errorf("batch booked %d output bytes, want %d", b.Status.OutputBytes, want)
	}
	var sn sealv1.SealerNode
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: b.Status.Node}, &sn); err != nil || len(sn.Status.OutputVolumes) != 1 ||
		sn.Status.OutputVolumes[0].CapacityBytes <= 0 || sn.Status.OutputVolumes[0].Reason != "" {
		t.Errorf("SealerNode %s output volumes: %+v %v", b.Status.Node, sn.Status.OutputVolumes, err)
	}
	dir := filepath.Join("/var/lib/sealfleet/output", b.Namespace, b.Name)
	var store struct {
		ID       string
		CanStore bool
	}
	raw, err := os.ReadFile(filepath.Join(dir, "sectorstore.json"))
	if err != nil || json.Unmarshal(raw, &store) != nil || store.ID != string(b.UID) || !store.CanStore {
		t.Errorf("sectorstore.json in %s: %v %s", dir, err, raw)
	}
	failed := map[int64]bool{}
	for _, s := range b.Status.Sectors {
		failed[s.Number] = s.State == "Failed"
	}
	for _, s := range b.Spec.Sectors {
		name := fmt.Sprintf("s-t01000-%d", s.Number)
		if failed[s.Number] {
			for _, p := range []string{filepath.Join(dir, "sealed", name), filepath.Join(dir, "cache", name), filepath.Join(dir, ".filler")} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s: outputs of a sector left out of the batch", p)
				}
			}
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, "sealed", name))
		if err != nil || fi.Size() != 8<<20 {
			t.Errorf("sealed/%s: %v", name, err)
		}
		for _, f := range []string{"p_aux", "t_aux", "sc-02-data-tree-r-last.dat"} {
			if _, err := os.Stat(filepath.Join(dir, "cache", name, f)); err != nil {
				t.Errorf("cache/%s/%s: %v", name, f, err)
			}
		}
	}
}

// TestRealNode installs the chart, seals 4 8 MiB sectors (one holding deal data, three CC)
// with the real sealer on node
// 127.0.0.1, checks every CommR against rust-fil-proofs (`sealer oracle`), that the slot is
// released and scrubbed, and, through a Prometheus scraping the run, that hasher busy-ratio
// series exist with values in [0,1] and the hasher-utilisation alert does not fire; then the
// StarvedHashersAlert subtest throttles a second batch's storage until that alert fires.
// removeStaleOutputs removes the batch outputs under dir (one directory per batch of the
// namespace) that an earlier cluster left on this host (a run killed before its release step)
// and that no batch of this cluster owns: the operator rightly refuses to seal over another
// batch's outputs.
func removeStaleOutputs(t *testing.T, dir, ns string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var batches sealv1.SealBatchList
	if err := k8s.List(context.Background(), &batches, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing the batches of %s: %v", ns, err)
	}
	owned := map[string]bool{}
	for _, b := range batches.Items {
		owned[b.Name] = true
	}
	for _, e := range entries {
		if owned[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatalf("removing the stale outputs %s: %v", e.Name(), err)
		}
		t.Logf("removed stale outputs %s (no batch of this cluster owns them)", filepath.Join(dir, e.Name()))
	}
}

func TestRealNode(t *testing.T) {
	if out, _ := cluster("status"); !strings.Contains(out, "kubelet running") {
		t.Skip("no real node in this cluster (needs root; SEALFLEET_E2E_NODE=1 when the suite starts the cluster)")
	}
	if cpu, _ := os.ReadFile("/proc/cpuinfo"); !strings.Contains(string(cpu), " sha_ni") {
		t.Skip("this CPU has no SHA-NI: the sealer cannot run")
	}
	start := time.Now()
	step := func(env []string, args ...string) string {
		t0 := time.Now()
		out, err := demo(t, env, args...)
		t.Logf("hack/demo.sh %s (%.1f s)\n%s", strings.Join(args, " "), time.Since(t0).Seconds(), out)
		if err != nil {
			t.Fatalf("hack/demo.sh %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	removeStaleOutputs(t, "/var/lib/sealfleet/output/sealfleet-batches", "sealfleet-batches")
	// The chart's operator replaces a local one (TestFleet's).
	if out, err := cluster("operator-stop"); err != nil {
		t.Fatalf("operator-stop: %v\n%s", err, out)
	}
	step(nil, "install")
	step(nil, "node")
	// Once the node is opted in: the agent runs only on nodes labelled sealfleet.io/sealer.
	t.Run("ChartDefaultsOnPodNetwork", checkChartDefaults)
	// The node joined with spec.qualify OnJoin: the operator measured it, its layer file
	// included (the file's write test booked the node's one slot).
	qualified := waitQualification(t, func(q *sealv1.Qualification) bool { return len(q.LayerDevices) > 0 })
	// The node step waited for the parent cache its SealerNode asks for: built once, here.
	cacheManifest := filepath.Join("/var/lib/sealfleet/parent-cache", "StackedDrg8MiBV1_1.json")
	built, err := os.Stat(cacheManifest)
	if err != nil {
		t.Fatalf("no parent-cache manifest after the node step: %v", err)
	}
	// Rules as the chart renders them, with the hasher alert tightened (no grace, a 1-minute
	// window, 1 minute below the threshold) so that the starved run fires within this test.
	step([]string{"PROM_HELM_ARGS=--set monitoring.rules.hasherUtilisation.graceMinutes=0" +
		" --set monitoring.rules.hasherUtilisation.windowMinutes=1 --set monitoring.rules.hasherUtilisation.forMinutes=1" +
		" --set monitoring.rules.belowPrediction.graceMinutes=0 --set monitoring.rules.belowPrediction.forMinutes=1"}, "prom")

	const batch = "e2e-real"
	var (
		mu      sync.Mutex
		samples []float64
		alerts  []string
		huge    float64 // largest sealer_buffer_bytes{backing="hugetlb"} seen
		// The batch's sealer pod an up target (the chart's sealer PodMonitor, labelled by batch).
		sealerUp bool
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, vs, err := promQuery(`sealfleet_node_cpu_busy_ratio{role="hasher",node="127.0.0.1"}`)
			ls, _, err2 := promQuery(`ALERTS{alertname=~"Sealfleet(CCX)?HasherUtilisationLow|SealfleetBatchBelowPrediction",alertstate="firing"}`)
			_, hb, err3 := promQuery(`sealer_buffer_bytes{backing="hugetlb"}`)
			_, su, err4 := promQuery(fmt.Sprintf(`up{job="sealfleet-sealer",batch=%q,batch_namespace="sealfleet-batches"}`, batch))
			mu.Lock()
			if err4 == nil && len(su) > 0 && su[0] == 1 {
				sealerUp = true
			}
			for _, v := range hb {
				if err3 == nil && v > huge {
					huge = v
				}
			}
			if err == nil {
				samples = append(samples, vs...)
			}
			if err2 == nil {
				for _, l := range ls {
					alerts = append(alerts, fmt.Sprint(l))
				}
			}
			mu.Unlock()
			time.Sleep(2 * time.Second)
		}
	}()
	sealT0 := time.Now()
	// Sector 4 holds deal data whose staged file is spoiled: the batch must seal the other
	// three and leave it out, naming its file (one bad sector never costs the batch).
	step([]string{"BAD_SECTOR=4"}, "seal", batch, "4")
	sealDur := time.Since(sealT0)
	cancel()
	<-done

	out := step(nil, "verify", batch)
	if n := strings.Count(out, "matches rust-fil-proofs"); n != 3 {
		t.Errorf("%d of the 3 sealed sectors match rust-fil-proofs", n)
	}
	checkLeftOut(t, batch, out)
	checkPrediction(t, batch)
	checkCPUManager(t, batch)
	checkLotusStore(t, batch)
	checkDataSector(t, batch)
	out = step(nil, "release", batch)
	if !strings.Contains(out, "scrubbed") {
		t.Errorf("release did not report a scrub: %s", out)
	}

	mu.Lock()
	if len(samples) == 0 {
		t.Errorf("no sealfleet_node_cpu_busy_ratio{role=\"hasher\"} series during the run")
	}
	for _, v := range samples {
		if v < 0 || v > 1 {
			t.Errorf("hasher busy ratio %v outside [0,1]", v)
		}
	}
	if len(alerts) > 0 {
		t.Errorf("hasher-utilisation or below-prediction alert firing on a healthy run: %v", alerts)
	}
	// The pod's 1 GiB hugepage holds the sealer's buffers (a scrape of its /metrics says so).
	if huge <= 0 {
		t.Errorf("sealer_buffer_bytes{backing=\"hugetlb\"} never above 0 during the run")
	}
	t.Logf("BENCH realnode seal_seconds=%.1f total_seconds=%.1f hasher_busy %s",
		sealDur.Seconds(), time.Since(start).Seconds(), summary(samples))
	mu.Unlock()
	t.Run("PrometheusOperator", func(t *testing.T) { checkPrometheusOperator(t, batch, sealerUp) })

	t.Run("Requalify", func(t *testing.T) { requalifyRun(t, qualified) })
	t.Run("SnapUpdate", func(t *testing.T) { snapRun(t, step, batch) })
	t.Run("C1FromSlot", func(t *testing.T) { c1Run(t, step) })
	t.Run("SyntheticPoRep", func(t *testing.T) { synthRun(t, step) })
	t.Run("GPUEngine", func(t *testing.T) { gpuRun(t, step) })
	t.Run("StarvedHashersAlert", func(t *testing.T) { starvedRun(t, step) })
	if fi, err := os.Stat(cacheManifest); err != nil || !fi.ModTime().Equal(built.ModTime()) {
		t.Errorf("the parent cache was rebuilt by later batches (manifest %v, %v)", fi, err)
	}
	t.Run("CorruptParentCacheRebuilt", func(t *testing.T) { corruptCacheRun(t, step, cacheManifest) })
	t.Run("RemoteSeal", func(t *testing.T) { remoteSealRun(t, step) })
	t.Run("LotusHandoff", func(t *testing.T) { lotusHandoffRun(t, step) })
	t.Run("DemoFleetAndSummary", func(t *testing.T) { demoFleetRun(t, step) })
}

// sealfleetPlugin runs `kubectl sealfleet ARGS` as a user would: kubectl finds the plugin
// (bin/kubectl-sealfleet) on PATH; the kubeconfig comes from the environment.
func sealfleetPlugin(args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(repo, "bin", "kubectl"), append([]string{"sealfleet"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(repo, "bin")+":"+os.Getenv("PATH"),
		"KUBECONFIG="+filepath.Join(clusterDir, "pki", "admin.kubeconfig"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kubectl sealfleet %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// demoFleetRun runs the demo's last steps (hack/demo.sh fleet, summary) on the fleet that
// TestFleet left (about 300 kwok nodes) beside the real node: the backlog is placed or
// explained, `kubectl sealfleet status` reads the whole fleet and its slot counts equal the
// ledger (what the batches' status holds), and the summary finds every slot of the real node
// free after the real-node batches were released. The backlog is deleted afterwards.
func demoFleetRun(t *testing.T, step func(env []string, args ...string) string) {
	ctx := context.Background()
	const ns = "sealfleet-batches"
	backlog := client.MatchingLabels{"sealfleet.io/demo": "backlog"}
	defer eventually(t, 5*time.Minute, "the demo backlog deleted and released", func(ctx context.Context) (bool, string) {
		if err := k8s.DeleteAllOf(ctx, &sealv1.SealBatch{}, client.InNamespace(ns), backlog); err != nil {
			return false, err.Error()
		}
		var list sealv1.SealBatchList
		if err := k8s.List(ctx, &list, client.InNamespace(ns), backlog); err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 0, fmt.Sprintf("%d backlog batches left", len(list.Items))
	})
	const n = 40
	out := step(nil, "fleet", strconv.Itoa(n))
	if !strings.Contains(out, fmt.Sprintf("%d batches: ", n)) {
		t.Errorf("the fleet step did not report its %d batches placed or explained", n)
	}
	t0 := time.Now()
	raw, err := sealfleetPlugin("status", "-o", "json")
	took := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	var st plugin.FleetStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("kubectl sealfleet status -o json: %v\n%s", err, raw)
	}
	var batches sealv1.SealBatchList
	if err := k8s.List(ctx, &batches); err != nil {
		t.Fatal(err)
	}
	var nodes sealv1.SealerNodeList
	if err := k8s.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	// Held slots are the batches' claims; dirty ones (TestFleet leaves its removed node's) are
	// the SealerNodes' records of slots no batch holds any more.
	held := map[string]bool{}
	for i := range batches.Items {
		if c, ok := ledger.ClaimOf(&batches.Items[i], nil); ok && c.Slot != ledger.NoSlot {
			held[fmt.Sprintf("%s/%d", c.Node, c.Slot)] = true
		}
	}
	dirty := map[string]bool{}
	for _, sn := range nodes.Items {
		for _, d := range sn.Status.DirtySlots {
			if key := fmt.Sprintf("%s/%d", sn.Name, d.Slot); !held[key] {
				dirty[key] = true
			}
		}
	}
	if st.Slots.Held != int64(len(held)) || st.Slots.Dirty != int64(len(dirty)) || st.Nodes.Total != len(nodes.Items) || st.Batches.Total != len(batches.Items) {
		t.Errorf("kubectl sealfleet status: %d slots held, %d dirty, %d nodes, %d batches; the cluster: %d held, %d dirty, %d SealerNodes, %d batches",
			st.Slots.Held, st.Slots.Dirty, st.Nodes.Total, st.Batches.Total, len(held), len(dirty), len(nodes.Items), len(batches.Items))
	}
	if len(held) < n/2 {
		t.Errorf("only %d slots held with a backlog of %d on %d nodes", len(held), n, len(nodes.Items))
	}
	t.Logf("BENCH kubectl sealfleet status: %.2f s for %d SealerNodes and %d SealBatches (%d slots held, %d dirty)",
		took.Seconds(), len(nodes.Items), len(batches.Items), len(held), len(dirty))
	out = step(nil, "summary")
	if !strings.Contains(out, "slots held on 127.0.0.1: 0") {
		t.Errorf("the demo summary does not find the real node's slots all free")
	}
}

// snapRun updates the first CC sector that batch `from` sealed (hack/demo.sh snap) with new
// deal data: the update runs without a slot, its comm_r_new matches filecoin-proofs
// encode_into on the same files, its comm_r_old is the sector's CommR from the seal, and its
// replica and trees are in its output directory.
func snapRun(t *testing.T, step func(env []string, args ...string) string, from string) {
	const name, ns = "e2e-snap", "sealfleet-batches"
	step(nil, "snap", from, name)
	if out := step(nil, "verify", name); strings.Count(out, "matches rust-fil-proofs") != 1 {
		t.Errorf("the update's comm_r_new does not match filecoin-proofs encode_into")
	}
	step(nil, "release", name)
	var src, up sealv1.SealBatch
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: from}, &src); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &up); err != nil {
		t.Fatal(err)
	}
	if up.Status.Slot != nil || up.Status.Hugepages1Gi != 0 || len(up.Status.Sectors) != 1 {
		t.Fatalf("update status: slot %v, hugepages %d, sectors %+v", up.Status.Slot, up.Status.Hugepages1Gi, up.Status.Sectors)
	}
	got := up.Status.Sectors[0]
	for _, s := range src.Status.Sectors {
		if s.Number == got.Number && s.CommR != got.CommROld {
			t.Errorf("sector %d: the update's commROld %s is not the seal's commR %s", s.Number, got.CommROld, s.CommR)
		}
	}
	if got.State != "Updated" || got.CommR == got.CommROld || !strings.HasPrefix(got.CommDCID, "baga6ea4seaq") {
		t.Errorf("updated sector: %+v", got)
	}
	dir := filepath.Join("/var/lib/sealfleet/output", ns, name, strconv.FormatInt(got.Number, 10))
	for _, f := range []string{"sealed", "cache/p_aux", "cache/t_aux", "cache/sc-02-data-tree-r-last.dat", "cache/sc-02-data-tree-d.dat"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("update output %s: %v", f, err)
		}
	}
	t.Logf("sector %d updated: comm_r_old %s, comm_r_new %s (%s)", got.Number, got.CommROld, got.CommR, got.CommRCID)
}

// c1Run seals a commit1 FromSlot batch (a data sector and a CC one): after PC2 it holds its slot
// with no layer files in its outputs until the seeds are written (hack/demo.sh seeds), then
// the operator's C1 writes each sector's commit-phase1-output (filecoin-proofs-api's C1 output,
// for the sector's own commR and the seed given) and the slot is released.
func c1Run(t *testing.T, step func(env []string, args ...string) string) {
	const name, ns = "e2e-c1", "sealfleet-batches"
	step([]string{"COMMIT1=FromSlot"}, "seal", name, "2")
	get := func() *sealv1.SealBatch {
		var b sealv1.SealBatch
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &b); err != nil {
			t.Fatal(err)
		}
		return &b
	}
	b := get()
	if b.Status.Phase != sealv1.PhaseWaitingForSeeds || b.Status.Slot == nil || len(b.Status.Sectors) != 2 {
		t.Fatalf("after PC2: phase %s, slot %v, sectors %+v", b.Status.Phase, b.Status.Slot, b.Status.Sectors)
	}
	dir := filepath.Join("/var/lib/sealfleet/output", ns, name)
	cache := func(n int64) string { return filepath.Join(dir, "cache", fmt.Sprintf("s-t01000-%d", n)) }
	for _, s := range b.Spec.Sectors {
		if layers, _ := filepath.Glob(filepath.Join(cache(s.Number), "sc-02-data-layer-*")); len(layers) > 0 {
			t.Errorf("sector %d: layer files in its outputs: %v", s.Number, layers)
		}
	}
	step(nil, "seeds", name)
	b = get()
	seeds := map[int64]string{}
	for _, s := range b.Spec.Seeds {
		seeds[s.Number] = s.Randomness
	}
	for _, s := range b.Status.Sectors {
		raw, err := os.ReadFile(filepath.Join(cache(s.Number), "commit-phase1-output"))
		var out struct {
			CommR [32]byte `json:"comm_r"`
			Seed  [32]byte `json:"seed"`
		}
		if err != nil || json.Unmarshal(raw, &out) != nil {
			t.Errorf("sector %d: commit-phase1-output: %v", s.Number, err)
			continue
		}
		if s.State != "C1Written" || fmt.Sprintf("%x", out.CommR) != s.CommR || fmt.Sprintf("%x", out.Seed) != seeds[s.Number] {
			t.Errorf("sector %d (%s): C1 output for commR %x seed %x, want %s and %s", s.Number, s.State, out.CommR, out.Seed, s.CommR, seeds[s.Number])
		}
		if layers, _ := filepath.Glob(filepath.Join(cache(s.Number), "sc-02-data-layer-*")); len(layers) > 0 {
			t.Errorf("sector %d: layer files left after C1: %v", s.Number, layers)
		}
		t.Logf("sector %d: commit-phase1-output %d bytes", s.Number, len(raw))
	}
	step(nil, "release", name)
}

// synthRun seals two SyntheticPoRep sectors at 8 MiB: 2^18 synthetic challenges each, which
// the sealer's streaming writer proves in bounded memory (filecoin-proofs' own generator held
// 19 GB per 8 MiB sector). The graph's parent cache is built on demand (the node was set up
// for 8 MiB V1_1 only); every CommR matches rust-fil-proofs, each sector's outputs hold its
// whole syn-porep-vanilla-proofs.dat (the contract's size) and no layer files, what the proofs
// add to the pod's memory request is the writer's bound, under 256 MiB, and the whole request is
// under 2 GiB.
func synthRun(t *testing.T, step func(env []string, args ...string) string) {
	const name, ns = "e2e-synth", "sealfleet-batches"
	env := []string{"PROOF_TYPE=V1_1_Feat_SyntheticPoRep", "SECTOR_SIZE=8MiB", "DATA_SECTORS=0"}
	step(env, "seal", name, "2")
	if out := step(nil, "verify", name); strings.Count(out, "matches rust-fil-proofs") != 2 {
		t.Errorf("synthetic sectors do not match rust-fil-proofs")
	}
	var b sealv1.SealBatch
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &b); err != nil {
		t.Fatal(err)
	}
	if b.Status.Phase != sealv1.PhaseCompleted || b.Status.RegisteredProof != "StackedDrg8MiBV1_1_Feat_SyntheticPoRep" {
		t.Fatalf("synthetic batch: phase %s, proof %s", b.Status.Phase, b.Status.RegisteredProof)
	}
	for _, s := range b.Spec.Sectors {
		cache := filepath.Join("/var/lib/sealfleet/output", ns, name, "cache", fmt.Sprintf("s-t01000-%d", s.Number))
		if fi, err := os.Stat(filepath.Join(cache, "syn-porep-vanilla-proofs.dat")); err != nil || fi.Size() != predict.SynthProofsFileBytes(sealv1.SectorSize8MiB) {
			t.Errorf("sector %d: syn-porep-vanilla-proofs.dat: %v (want %d bytes)", s.Number, err, predict.SynthProofsFileBytes(sealv1.SectorSize8MiB))
		}
		if layers, _ := filepath.Glob(filepath.Join(cache, "sc-02-data-layer-*")); len(layers) > 0 {
			t.Errorf("sector %d: layer files in a SyntheticPoRep sector's outputs: %v", s.Number, layers)
		}
	}
	var pod corev1.Pod
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: b.Status.PodNamespace, Name: b.Status.PodName}, &pod); err == nil {
		// The base for 8 MiB sectors (1 GiB) and the chart's 256 MiB per sector, plus what the
		// synthetic proofs add; the sealer ran within it (the limit equals the request).
		mem := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]
		added := mem.Value() - (render.SmallSectorMemoryBase + 2*(256<<20))
		t.Logf("sealer pod memory request %s: the synthetic proofs add %d bytes", mem.String(), added)
		if added <= 0 || added > 256<<20 || mem.Value() >= 2<<30 {
			t.Errorf("the synthetic proofs add %d bytes to the pod's memory request %s, want at most 256 MiB and a request under 2 GiB", added, mem.String())
		}
	} else {
		t.Logf("sealer pod %s/%s: %v (memory request not checked)", b.Status.PodNamespace, b.Status.PodName, err)
	}
	var node sealv1.SealerNode
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: b.Status.Node}, &node); err != nil {
		t.Fatal(err)
	}
	built := false
	for _, c := range node.Status.ParentCaches {
		built = built || (c.Proof == b.Status.RegisteredProof && c.Verified)
	}
	if !built {
		t.Errorf("no verified parent cache for %s on %s: %+v", b.Status.RegisteredProof, b.Status.Node, node.Status.ParentCaches)
	}
	step(nil, "release", name)
}

// gpuRun seals a pc2Engine gpu batch (one data sector, one CC) on the real node, whose
// nvidia.com/gpu is the host's OpenCL device (pocl's CPU device in CI) advertised by the local
// cluster's stand-in device plugin (hack/cluster.sh NODE_GPU=opencl): the node agent's
// capabilities init container must have found the GPU engine, placement must book the
// resource, the kubelet must grant it through the device plugin, and the sealer, which exits 8
// rather than fall back to the CPU, must finish with every CommR equal to rust-fil-proofs'.
func gpuRun(t *testing.T, step func(env []string, args ...string) string) {
	const name, ns = "e2e-gpu", "sealfleet-batches"
	var node corev1.Node
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "127.0.0.1"}, &node); err != nil {
		t.Fatal(err)
	}
	if placement.AllocatableGPUs(&node) == 0 {
		t.Skip("the real node advertises no nvidia.com/gpu (no OpenCL ICD on this host: hack/host-deps.sh installs pocl)")
	}
	var sn sealv1.SealerNode
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "127.0.0.1"}, &sn); err != nil {
		t.Fatal(err)
	}
	caps := sn.Status.Capabilities
	if caps == nil || !slices.Contains(caps.PC2Engines, sealv1.PC2EngineGPU) || !strings.HasPrefix(caps.GPUEngine, "OpenCL device 0") {
		t.Fatalf("SealerNode capabilities do not list the GPU engine on OpenCL device 0: %+v", caps)
	}
	t.Logf("node capabilities: engines %v, %s", caps.PC2Engines, caps.GPUEngine)
	plugLog := filepath.Join(clusterDir, "logs", "opencl-device-plugin.log")
	before, _ := os.ReadFile(plugLog)
	// 2 KiB CC sectors: what this proves is the device granted and the GPU engine run end to
	// end in the pod (its kernels are held bit-identical to the CPU engine at 2 KiB and 8 MiB by
	// the sealer's own tests); 8 MiB on pocl's CPU device cost 80 s more here.
	step([]string{"PC2_ENGINE=gpu", "SECTOR_SIZE=2KiB", "DATA_SECTORS=0"}, "seal", name, "2")
	if out := step(nil, "verify", name); strings.Count(out, "matches rust-fil-proofs") != 2 {
		t.Errorf("pc2Engine gpu sectors do not match rust-fil-proofs")
	}
	var b sealv1.SealBatch
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &b); err != nil {
		t.Fatal(err)
	}
	if b.Status.Phase != sealv1.PhaseCompleted || b.Spec.PC2Engine != sealv1.PC2EngineGPU {
		t.Errorf("gpu batch: phase %s, engine %s", b.Status.Phase, b.Spec.PC2Engine)
	}
	after, _ := os.ReadFile(plugLog)
	if n := strings.Count(string(after), "allocated [opencl-0]") - strings.Count(string(before), "allocated [opencl-0]"); n < 1 {
		t.Errorf("the device plugin granted no device during the gpu batch (%s)", plugLog)
	}
	step(nil, "release", name)
}

// starvedRun seals a second batch whose sealer pod's block I/O is throttled to 128 KiB/s on
// the disk holding the node's layer file, so that its hashers wait for layer I/O and sit idle.
// The hasher-utilisation alert (tightened by TestRealNode's `prom` step to fire after one
// minute) must fire for exactly that batch and node. Then the throttle is lifted, and the batch
// must still finish with every CommR matching rust-fil-proofs and release its slot.
func starvedRun(t *testing.T, step func(env []string, args ...string) string) {
	const batch, ns = "e2e-starved", "sealfleet-batches"
	var node sealv1.SealerNode
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "127.0.0.1"}, &node); err != nil {
		t.Fatal(err)
	}
	if len(node.Spec.LayerDevices) == 0 || node.Spec.LayerDevices[0].Path == "" {
		t.Fatalf("SealerNode 127.0.0.1 has no layer file: %+v", node.Spec.LayerDevices)
	}
	th, err := newBlkioThrottle(node.Spec.LayerDevices[0].Path, 128<<10)
	if err != nil {
		t.Skipf("cannot throttle the layer storage here: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer th.lift()
	go th.run(ctx, ns, batch)

	t0 := time.Now()
	sealed := make(chan error, 1)
	var sealOut string
	go func() {
		out, err := demo(t, nil, "seal", batch, "2")
		sealOut = out
		sealed <- err
	}()
	firing := fmt.Sprintf(`ALERTS{alertname="SealfleetHasherUtilisationLow",alertstate="firing",node="127.0.0.1",batch="%s/%s"}`, ns, batch)
	// The batch labels far below the rate placement predicted from the node's qualification.
	shortfall := fmt.Sprintf(`ALERTS{alertname="SealfleetBatchBelowPrediction",alertstate="firing",node="127.0.0.1",namespace=%q,batch=%q}`, ns, batch)
	var fired, short time.Duration
	var busy []float64
	for (fired == 0 || short == 0) && time.Since(t0) < 6*time.Minute {
		select {
		case err := <-sealed:
			t.Fatalf("the throttled batch ended (%v) before the alert fired; hasher busy ratio %s\n%s", err, summary(busy), sealOut)
		case <-time.After(2 * time.Second):
		}
		if _, vs, err := promQuery(fmt.Sprintf(`sealfleet:node_hasher_busy_ratio:avg{batch="%s/%s"}`, ns, batch)); err == nil {
			busy = append(busy, vs...)
		}
		if ls, _, err := promQuery(firing); err == nil && len(ls) > 0 && fired == 0 {
			fired = time.Since(t0)
		}
		if ls, _, err := promQuery(shortfall); err == nil && len(ls) > 0 && short == 0 {
			short = time.Since(t0)
			t.Logf("shortfall alert: %v", ls[0])
		}
	}
	if fired == 0 {
		n := th.lift()
		t.Fatalf("%s not firing after %s of throttled I/O (%d cgroups throttled); hasher busy ratio %s", firing, time.Since(t0).Round(time.Second), n, summary(busy))
	}
	if short == 0 {
		t.Errorf("%s not firing after %s of throttled I/O", shortfall, time.Since(t0).Round(time.Second))
	}
	// The drain while the throttle still holds the sealer in PC1: lifted first, the batch can
	// finish inside the drain's 15 s and leave no running pod for the budget to protect.
	drainIsBlocked(t, ns, batch)
	n := th.lift()
	t.Logf("alert fired %.0f s after the batch was applied (%d cgroups throttled); hasher busy ratio %s", fired.Seconds(), n, summary(busy))
	if err := <-sealed; err != nil {
		t.Fatalf("hack/demo.sh seal %s after lifting the throttle: %v\n%s", batch, err, sealOut)
	}
	t.Logf("hack/demo.sh seal %s (%.1f s)\n%s", batch, time.Since(t0).Seconds(), sealOut)
	out := step(nil, "verify", batch)
	if n := strings.Count(out, "matches rust-fil-proofs"); n != 2 {
		t.Errorf("%d of 2 throttled sectors match rust-fil-proofs", n)
	}
	step(nil, "release", batch)
	// The batch is gone: its series go stale and the alert resolves.
	cleared := waitAlertClears(t, firing, 2*time.Minute)
	t.Logf("BENCH realnode_starved alert_after_seconds=%.0f shortfall_alert_after_seconds=%.0f cleared_after_release_seconds=%.0f total_seconds=%.0f",
		fired.Seconds(), short.Seconds(), cleared.Seconds(), time.Since(t0).Seconds())
}

// drainIsBlocked drains the real node of the batch's running sealer pod, as an admin would,
// and expects the batch's disruption budget to refuse the eviction until the drain gives up;
// the pod keeps running and the node is uncordoned again.
func drainIsBlocked(t *testing.T, ns, batch string) {
	t.Helper()
	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(repo, "bin", "kubectl"), append([]string{"--kubeconfig", filepath.Join(clusterDir, "pki", "admin.kubeconfig")}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	var b sealv1.SealBatch
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: batch}, &b); err != nil {
		t.Fatal(err)
	}
	// --delete-emptydir-data: the sealer's hugepages volume is an emptyDir; without it the
	// drain stops at that, before the eviction the budget must refuse.
	out, err := kubectl("drain", "127.0.0.1", "--pod-selector", "sealfleet.io/batch="+batch, "--ignore-daemonsets",
		"--delete-emptydir-data", "--timeout", "15s")
	if uout, uerr := kubectl("uncordon", "127.0.0.1"); uerr != nil {
		t.Fatalf("kubectl uncordon: %v\n%s", uerr, uout)
	}
	if err == nil || !strings.Contains(out, "disruption budget") {
		t.Fatalf("kubectl drain of a node running PC1 was not refused by the batch's disruption budget (err %v):\n%s", err, out)
	}
	var pod corev1.Pod
	// The chart runs sealer pods in the operator's namespace, never the batch's.
	if b.Status.PodNamespace == ns || b.Status.PodNamespace == "" {
		t.Errorf("sealer pod %s runs in the batch's namespace %q", b.Status.PodName, b.Status.PodNamespace)
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: b.Status.PodNamespace, Name: b.Status.PodName}, &pod); err != nil || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		t.Fatalf("sealer pod %s after the refused drain: %v %v", b.Status.PodName, err, pod.Status.Phase)
	}
	// The budget is computable (minAvailable, not maxUnavailable against an owner without a
	// scale subresource): the disruption controller reported no failure for it.
	var events corev1.EventList
	if err := k8s.List(context.Background(), &events, client.InNamespace(b.Status.PodNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "PodDisruptionBudget" && e.Type == corev1.EventTypeWarning {
			t.Errorf("disruption budget %s: %s %s", e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	t.Logf("kubectl drain refused for 15 s by the disruption budget; %s still running", pod.Name)
}

// summary is "n=… min=… mean=… max=…" of a series of ratios.
func summary(vs []float64) string {
	if len(vs) == 0 {
		return "n=0"
	}
	lo, hi, sum := vs[0], vs[0], 0.0
	for _, v := range vs {
		lo, hi, sum = min(lo, v), max(hi, v), sum+v
	}
	return fmt.Sprintf("n=%d min=%.2f mean=%.2f max=%.2f", len(vs), lo, sum/float64(len(vs)), hi)
}

// realNode is the local cluster's real node.
const realNode = "127.0.0.1"

// nodeIP is the real node's address (hack/cluster.sh): the pod network's gateway on the host,
// where pods reach the host and where NodePorts and hostPorts are served.
const nodeIP = "10.244.0.1"

// newNodeServer starts an HTTP test server on the node's address, where pods reach it: the
// way a partner's service outside the cluster sits on a network the cluster routes to.
func newNodeServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(nodeIP, "0"))
	if err != nil {
		t.Fatalf("listen on the node's address %s (hack/cluster.sh's pod network): %v", nodeIP, err)
	}
	s := httptest.NewUnstartedServer(h)
	_ = s.Listener.Close()
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// waitQualification waits until the real node's status.qualification measured its layer file
// and ok accepts it, and logs the figures.
func waitQualification(t *testing.T, ok func(*sealv1.Qualification) bool) *sealv1.Qualification {
	t.Helper()
	var sn sealv1.SealerNode
	deadline := time.Now().Add(4 * time.Minute)
	for {
		err := k8s.Get(context.Background(), client.ObjectKey{Name: realNode}, &sn)
		q := sn.Status.Qualification
		if err == nil && q != nil && q.MeasuredTime != nil && len(sn.Spec.LayerDevices) > 0 &&
			q.DevicesKey == sn.Spec.LayerDevices[0].Path && ok(q) {
			d := q.LayerDevices[0]
			if d.Error != "" || d.RandomReadIOPS <= 0 || d.SeqReadBytesPerSecond <= 0 || q.LabelsPerSecondPerThread <= 0 || !strings.HasPrefix(q.Tool, "sealer ") {
				t.Fatalf("qualification of %s: %+v", realNode, q)
			}
			t.Logf("BENCH qualification %s: %s; random_read_iops=%d seq_read=%d seq_write=%d (%s) labels_per_s_per_thread=%d hugepages %d free %d mapped (%s) memory_copy=%d duration_ms=%d",
				realNode, q.MeasuredTime.Format(time.RFC3339), d.RandomReadIOPS, d.SeqReadBytesPerSecond, d.SeqWriteBytesPerSecond, d.WriteSkipped,
				q.LabelsPerSecondPerThread, q.Hugepages1GiFree, q.Hugepages1GiMapped, q.HugepagesError, q.MemoryCopyBytesPerSecond, q.DurationMilliseconds)
			return q.DeepCopy()
		}
		if time.Now().After(deadline) {
			t.Fatalf("SealerNode %s not qualified as expected after 4 min (%v): %+v", realNode, err, q)
		}
		time.Sleep(2 * time.Second)
	}
}

// checkPrediction compares the PC1 time placement predicted for the batch with the sealer's.
func checkPrediction(t *testing.T, batch string) {
	t.Helper()
	var b sealv1.SealBatch
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "sealfleet-batches", Name: batch}, &b); err != nil {
		t.Fatal(err)
	}
	p := b.Status.Prediction
	if p == nil || p.PC1Seconds == "" || p.MeasuredPC1Seconds == "" || p.FinishTime == nil {
		t.Fatalf("batch %s prediction %+v", batch, p)
	}
	if !strings.Contains(p.Basis, "qualification") || strings.Contains(p.Basis, "not qualified") {
		t.Errorf("batch %s predicted without the node's qualification: %q", batch, p.Basis)
	}
	pred, _ := strconv.ParseFloat(p.PC1Seconds, 64)
	meas, _ := strconv.ParseFloat(p.MeasuredPC1Seconds, 64)
	t.Logf("BENCH prediction %s: pc1 predicted %.1f s measured %.1f s (ratio %.2f), pc2 predicted %s s measured %s s, %s",
		batch, pred, meas, meas/pred, p.PC2Seconds, p.MeasuredPC2Seconds, p.Basis)
	// Noisy neighbours aside the model holds within 30 % here; a broken model is far off.
	if meas <= 0 || pred <= 0 || meas/pred > 3 || meas/pred < 1.0/3 {
		t.Errorf("batch %s: PC1 predicted %.1f s, measured %.1f s", batch, pred, meas)
	}
}

// requalifyRun asks for a new qualification while the node's qualification pod has its block
// I/O throttled (as a worn or shared disk would be): the figures follow the throttle. Asked
// again without it, they come back.
func requalifyRun(t *testing.T, first *sealv1.Qualification) {
	var node sealv1.SealerNode
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: realNode}, &node); err != nil {
		t.Fatal(err)
	}
	const bps = 4 << 20
	th, err := newBlkioThrottle(node.Spec.LayerDevices[0].Path, bps)
	if err != nil {
		t.Skipf("cannot throttle the layer storage here: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer th.lift()
	go th.runPods(ctx, client.MatchingLabels{render.LabelComponent: render.ComponentQualify}, func(p *corev1.Pod) bool {
		return p.Annotations[render.AnnotationQualifyNode] == realNode
	})
	ask := func(token string) *sealv1.Qualification {
		t.Helper()
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, sealv1.AnnotationQualify, token))
		if err := k8s.Patch(context.Background(), &node, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
		return waitQualification(t, func(q *sealv1.Qualification) bool { return q.Request == token })
	}
	slow := ask(fmt.Sprintf("throttled-%d", time.Now().Unix()))
	th.lift()
	// Bandwidth follows the limit; random 4 KiB reads fall well below the disk's own rate
	// (cgroup v1 blk-throttle lets io_uring's small reads past its byte limit a few times over
	// here, and this shared disk's own rate varies 50-90k reads/s, so only a halving is
	// checked).
	d := slow.LayerDevices[0]
	if d.SeqReadBytesPerSecond > 2*bps || d.SeqWriteBytesPerSecond > 2*bps {
		t.Errorf("throttled to %d B/s, the layer file measured sequential read %d B/s, write %d B/s", bps, d.SeqReadBytesPerSecond, d.SeqWriteBytesPerSecond)
	}
	if got, was := d.RandomReadIOPS, first.LayerDevices[0].RandomReadIOPS; got*2 > was {
		t.Errorf("throttled to %d B/s, the layer file measured %d reads/s (unthrottled %d)", bps, got, was)
	}
	again := ask(fmt.Sprintf("lifted-%d", time.Now().Unix()))
	if a := again.LayerDevices[0]; a.RandomReadIOPS < 2*d.RandomReadIOPS || a.SeqReadBytesPerSecond < 8*bps {
		t.Errorf("unthrottled again, the layer file measured %d reads/s, %d B/s (throttled %d, %d)", a.RandomReadIOPS, a.SeqReadBytesPerSecond, d.RandomReadIOPS, d.SeqReadBytesPerSecond)
	}
}
