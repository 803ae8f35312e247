package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/kube"
	"github.com/sealfleet/sealfleet/internal/layout"
	"github.com/sealfleet/sealfleet/internal/testutil"
	"github.com/sealfleet/sealfleet/internal/topology"
)

// TestNodeBatches finds the PC1/PC2 batches placed on this node with the layouts their status
// records, counts their cores out of freeCores, and counts every held slot (a completed batch
// not yet released still holds one; a released one does not).
func TestNodeBatches(t *testing.T) {
	topo, err := topology.Discover("../topology/testdata/tr-pro-5975wx")
	if err != nil {
		t.Fatal(err)
	}
	l, err := layout.Calculate(topo.Layout(), 32, layout.Options{})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(name, node string, phase sealv1.SealBatchPhase) *sealv1.SealBatch {
		return testutil.Batch("ns", name, sealv1.SectorSize32GiB, 32, testutil.Placed(node, 0, phase),
			func(b *sealv1.SealBatch) { b.Status.Layout = l.Record() })
	}
	released := batch("released", "n1", sealv1.PhaseCompleted)
	released.Status.Conditions = []metav1.Condition{{Type: "Released", Status: metav1.ConditionTrue, Reason: "SlotReleased", LastTransitionTime: metav1.Now()}}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme()).
		WithIndex(&sealv1.SealBatch{}, FieldNode, func(o client.Object) []string { return []string{o.(*sealv1.SealBatch).Status.Node} }).
		WithObjects(batch("running", "n1", sealv1.PhasePC1), batch("elsewhere", "n2", sealv1.PhasePC1),
			batch("done", "n1", sealv1.PhaseCompleted), released).Build()
	a := &Agent{Client: c, NodeName: "n1"}
	got, held, err := a.nodeBatches(context.Background())
	if err != nil || len(got) != 1 || got[0].Name != "ns/running" || got[0].Layout.Hashers() != 16 {
		t.Fatalf("running batches %+v, %v", got, err)
	}
	if held != 2 {
		t.Errorf("%d slots held, want 2 (running and done)", held)
	}
	if as := Assignments(got); len(as) != 18 {
		t.Errorf("%d assignments, want 2 coordinators + 16 hashers", len(as))
	}
	if n := freeCores(topo.Layout(), nil, got); n != 32-l.PhysicalCores() {
		t.Errorf("free cores %d, want %d", n, 32-l.PhysicalCores())
	}

	// The kubelet (CPU manager static) granted other CPUs: busy ratios follow the sealer's
	// report, the booked layout still counts for free cores.
	moved := batch("moved", "n3", sealv1.PhasePC1)
	from := l.Coordinators[0].Hashers[0].CPU
	moved.Status.RunningCPUs = &sealv1.RunningCPUs{Granted: "40-63", Moves: []sealv1.CPUMove{{Layout: int32(from), Granted: 60}}}
	c = fake.NewClientBuilder().WithScheme(kube.Scheme()).
		WithIndex(&sealv1.SealBatch{}, FieldNode, func(o client.Object) []string { return []string{o.(*sealv1.SealBatch).Status.Node} }).
		WithObjects(moved).Build()
	got, _, err = (&Agent{Client: c, NodeName: "n3"}).nodeBatches(context.Background())
	if err != nil || len(got) != 1 {
		t.Fatalf("running batches %+v, %v", got, err)
	}
	var cpus []int
	for _, a := range Assignments(got) {
		cpus = append(cpus, a.CPU)
	}
	if !slices.Contains(cpus, 60) || slices.Contains(cpus, from) {
		t.Errorf("assignment CPUs %v: want %d measured on 60", cpus, from)
	}
	if n := freeCores(topo.Layout(), nil, got); n != 32-l.PhysicalCores() {
		t.Errorf("free cores %d after a move, want %d", n, 32-l.PhysicalCores())
	}
}

// TestKubeletReservesMore: a node whose kubelet keeps more CPUs from pods than the SealerNode
// keeps from the sealer is flagged, naming both numbers and the fix; agreeing ones are not.
func TestKubeletReservesMore(t *testing.T) {
	topo, err := topology.Discover("../topology/testdata/epyc-7313") // 16 cores, SMT 2
	if err != nil {
		t.Fatal(err)
	}
	node := func(alloc string) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(alloc)}}}
	}
	lt := topo.Layout()
	if msg := kubeletReservesMore(node("31"), lt, nil); !strings.Contains(msg, "allocates 31 CPUs") || !strings.Contains(msg, "leaves the sealer 32") || !strings.Contains(msg, "spec.reservedCPUs") {
		t.Errorf("31 allocatable, nothing reserved: %q", msg)
	}
	// CPU 0 reserved takes its whole core (CPUs 0 and 16): 30 usable.
	for _, alloc := range []string{"31", "30", "30500m"} {
		if msg := kubeletReservesMore(node(alloc), lt, []int{0}); msg != "" {
			t.Errorf("%s allocatable, one core reserved: %q", alloc, msg)
		}
	}
	if msg := kubeletReservesMore(node("29900m"), lt, []int{0}); msg == "" {
		t.Error("29.9 allocatable with 30 usable not flagged")
	}
	if msg := kubeletReservesMore(&corev1.Node{}, lt, nil); msg != "" {
		t.Errorf("a node without allocatable (not yet reported) flagged: %q", msg)
	}
}

// TestOutputVolumes: each output path reports its file system, a path not created yet the
// disk it will be created on, and the default path stands in for an empty list.
func TestOutputVolumes(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "srv", "sealed"), 0o755); err != nil {
		t.Fatal(err)
	}
	vs := outputVolumes(root, []string{"/srv/sealed", "/srv/not/yet"})
	if len(vs) != 2 {
		t.Fatalf("%+v", vs)
	}
	for _, v := range vs {
		if v.Reason != "" || v.CapacityBytes <= 0 || v.AvailableBytes <= 0 || v.AvailableBytes > v.CapacityBytes || v.CapacityBytes%(1<<20) != 0 ||
			v.AvailableBytes%spaceQuantum(v.CapacityBytes) != 0 {
			t.Errorf("%+v", v)
		}
	}
	if vs[1].Path != "/srv/not/yet" || vs[0].CapacityBytes != vs[1].CapacityBytes {
		t.Errorf("a path not created yet measures its parent's file system: %+v", vs)
	}
	// Under a root other than "/", a path whose only existing ancestor is the root itself was
	// not mounted into the agent: unusable, not the agent's own disk.
	if d := outputVolumes(root, nil); len(d) != 1 || d[0].Path != sealv1.DefaultOutputHostPath || d[0].CapacityBytes != 0 || !strings.Contains(d[0].Reason, "nodeAgent.outputPaths") {
		t.Errorf("default path, not mounted: %+v", d)
	}
}

func TestSpaceQuantum(t *testing.T) {
	for capacity, want := range map[int64]int64{0: 1 << 20, 100 << 20: 1 << 20, 1 << 30: 1 << 20, 4 << 30: 4 << 20, 252 << 30: 128 << 20, 15 << 40: 8 << 30} {
		if got := spaceQuantum(capacity); got != want {
			t.Errorf("spaceQuantum(%d) = %d, want %d", capacity, got, want)
		}
	}
}

// TestParentCaches: the agent reports each manifest in the cache directory: verified while
// the file keeps its recorded size, building with its percent, and why anything else is not
// usable.
func TestParentCaches(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "var", "cache")
	write := func(name, content string) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.cache", strings.Repeat("x", 56))
	write("StackedDrg2KiBV1_1.json", `{"name":"StackedDrg2KiBV1_1","file":"a.cache","bytes":56,"verified":true}`)
	write("b.cache", strings.Repeat("x", 10))
	write("StackedDrg8MiBV1_1.json", `{"name":"StackedDrg8MiBV1_1","file":"b.cache","bytes":56,"verified":true}`)
	write("StackedDrg32GiBV1_1.json", `{"name":"StackedDrg32GiBV1_1","building":true,"percent":41.7}`)
	write("StackedDrg64GiBV1_1.json", `{"name":"StackedDrg64GiBV1_1","file":"c.cache"}`)
	got := parentCaches(root, "/var/cache")
	want := map[string]func(sealv1.ParentCacheStatus) bool{
		"StackedDrg2KiBV1_1":  func(s sealv1.ParentCacheStatus) bool { return s.Verified && s.Bytes == 56 },
		"StackedDrg8MiBV1_1":  func(s sealv1.ParentCacheStatus) bool { return !s.Verified && strings.Contains(s.Reason, "truncated") },
		"StackedDrg32GiBV1_1": func(s sealv1.ParentCacheStatus) bool { return s.Building && s.Percent == 41 && !s.Verified },
		"StackedDrg64GiBV1_1": func(s sealv1.ParentCacheStatus) bool {
			return !s.Verified && strings.Contains(s.Reason, "did not finish")
		},
	}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for _, s := range got {
		if ok := want[s.Proof]; ok == nil || !ok(s) {
			t.Errorf("%+v", s)
		}
	}
	if got := parentCaches(root, "/nowhere"); len(got) != 0 {
		t.Errorf("no directory: %+v", got)
	}
	// A directory the agent's pod was not given is named with the fix; on the host itself a
	// missing directory only holds no cache yet.
	if why := parentCacheDirHidden(root, "/nowhere"); !strings.Contains(why, "/nowhere") || !strings.Contains(why, "nodeAgent.parentCachePath") {
		t.Errorf("hidden directory: %q", why)
	}
	if why := parentCacheDirHidden(root, "/var/cache"); why != "" {
		t.Errorf("visible directory reported hidden: %q", why)
	}
	if why := parentCacheDirHidden("/", "/nowhere-on-this-host"); why != "" {
		t.Errorf("on the host: %q", why)
	}
}
