package render

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/gpubudget"
	"github.com/sealfleet/sealfleet/internal/layout"
	"github.com/sealfleet/sealfleet/internal/predict"
	"github.com/sealfleet/sealfleet/internal/testutil"
)

func TestProverID(t *testing.T) {
	cases := map[string]string{
		"f01000": "e807", // 1000 = 0xe8 0x07 as LEB128
		"t01":    "01",
		"f0127":  "7f",
		"f0128":  "8001",
	}
	for addr, want := range cases {
		got, err := ProverID(addr)
		if err != nil {
			t.Fatal(err)
		}
		if h := hex.EncodeToString(got[:]); !strings.HasPrefix(h, want) || strings.Trim(h[len(want):], "0") != "" {
			t.Errorf("%s: got %s", addr, h)
		}
	}
	for _, bad := range []string{"f1abc", "f0", "x01", "f0-1"} {
		if _, err := ProverID(bad); err == nil || !strings.Contains(err.Error(), "spec.minerID") {
			t.Errorf("%q: want an error naming spec.minerID, got %v", bad, err)
		}
	}
}

func TestCommDAndTicketDecoding(t *testing.T) {
	// The 32 GiB CC commD as hex and as the piece CID lotus prints.
	want := "077e5fde35c50a9303a55009e3498a4ebedff39c42b710b730d8ec7ac7afa63e"
	cid := "baga6ea4seaqao7s73y24kcutaosvacpdjgfe5pw76ooefnyqw4ynr3d2y6x2mpq"
	d, err := CommD("commD", cid)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(d[:]) != want {
		t.Errorf("CID decoded to %x", d)
	}
	d2, err := CommD("commD", want)
	if err != nil || d2 != d {
		t.Errorf("hex commD: %x %v", d2, err)
	}
	if _, err := CommD("spec.sectors[0].commD", "baga6ea4seaqzzzz"); err == nil || !strings.Contains(err.Error(), "spec.sectors[0].commD") {
		t.Errorf("bad CID: %v", err)
	}
	b64, err := Bytes32("ticket", "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=")
	if err != nil || b64[0] != 1 || b64[31] != 32 {
		t.Errorf("base64 ticket: %x %v", b64, err)
	}
}

func testBatch() *sealv1.SealBatch {
	return &sealv1.SealBatch{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "u1"},
		Spec: sealv1.SealBatchSpec{SectorSize: sealv1.SectorSize32GiB, ProofType: sealv1.ProofTypeSyntheticPoRep, MinerID: "f01000",
			PC2Engine:  sealv1.PC2EngineGPU,
			DataSource: &sealv1.DataSource{HostPath: &sealv1.HostPathData{Path: "/srv/deals"}},
			Sectors: []sealv1.SectorSpec{{Number: 7, Ticket: strings.Repeat("ab", 32)}, {Number: 8, Ticket: strings.Repeat("cd", 32),
				CommD: "baga6ea4seaqao7s73y24kcutaosvacpdjgfe5pw76ooefnyqw4ynr3d2y6x2mpq",
				Data: &sealv1.SectorData{File: "staged/s-t01000-8", Pieces: []sealv1.Piece{
					{CID: "baga6ea4seaqao7s73y24kcutaosvacpdjgfe5pw76ooefnyqw4ynr3d2y6x2mpq", Size: 16 << 30},
					{CID: strings.Repeat("0c", 32), Size: 1 << 30}}}}}},
	}
}

var update = flag.Bool("update", false, "rewrite golden files")

func TestConfig(t *testing.T) {
	lay, err := layout.Calculate(layout.FromStatus(testutil.CPU(2, 8, true)), 2, layout.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lj, err := layout.FromRecord(lay.Record(), 2).JSON()
	if err != nil {
		t.Fatal(err)
	}
	b := testBatch()
	b.Spec.Output = &sealv1.OutputSpec{HostPath: &sealv1.HostPathOutput{Path: "/srv/sealed"}, Layout: sealv1.OutputLayoutLotus}
	b.Status.Hugepages1Gi = 36 + 32
	b.Spec.ResidentLayerPercent = 50 // half of a 2 × 32 GiB layer: 32 GiB
	cfg, err := Config(ConfigInput{Batch: b, LayerPaths: []string{"/dev/nvme1n1", "/dev/nvme2n1"}, SlotOffset: 1 << 40, OutputDir: "/output/ns/b",
		Layout: lj, MetricsPort: 9465, MetricsAddress: "127.0.0.1", ParentCacheDir: ParentCacheMount})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Lotus == nil || *cfg.Lotus != (SealerLotus{Miner: 1000, StorageID: "u1"}) {
		t.Errorf("lotus storage path: %+v", cfg.Lotus)
	}
	b.Spec.Output.Layout = sealv1.OutputLayoutSealfleet
	if c, _ := Config(ConfigInput{Batch: b, Layout: lj}); c == nil || c.Lotus != nil {
		t.Errorf("Sealfleet layout rendered a lotus store: %+v", c)
	}
	if cfg.RegisteredProof != "StackedDrg32GiBV1_1_Feat_SyntheticPoRep" {
		t.Errorf("registered proof %q", cfg.RegisteredProof)
	}
	if cfg.Sectors[0].Ticket != strings.Repeat("ab", 32) || cfg.Sectors[0].CommD != "" || !strings.HasPrefix(cfg.Sectors[1].CommD, "077e5fde") {
		t.Errorf("sectors: %+v", cfg.Sectors)
	}
	if d := cfg.Sectors[1].Data; d == nil || d.Path != "/data/staged/s-t01000-8" || len(d.Pieces) != 2 ||
		!strings.HasPrefix(d.Pieces[0].CommP, "077e5fde") || d.Pieces[1] != (SealerPiece{CommP: strings.Repeat("0c", 32), Size: 1 << 30}) {
		t.Errorf("data sector: %+v", cfg.Sectors[1].Data)
	}
	if cfg.ResidentBytes != 32<<30 {
		t.Errorf("resident bytes %d", cfg.ResidentBytes)
	}
	if cfg.MetricsPort != 9465 || cfg.MetricsAddress != "127.0.0.1" {
		t.Errorf("metrics listener: %d %q", cfg.MetricsPort, cfg.MetricsAddress)
	}
	if cfg.Layers.SlotOffset != 1<<40/4096 || len(cfg.Layers.Paths) != 2 {
		t.Errorf("layers: %+v", cfg.Layers)
	}
	// The golden config is the contract: the Rust sealer's tests parse this very file
	// (sealer-image/crates/sealer-config) and check every key it reads is here.
	got, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "sealer-config.golden.json"), append(got, '\n'), *update, "./internal/render")
}

func TestDataPiecesMustFitTheSectorAligned(t *testing.T) {
	piece := func(size int64) sealv1.Piece { return sealv1.Piece{CID: strings.Repeat("0c", 32), Size: size} }
	for _, c := range []struct {
		pieces []sealv1.Piece
		field  string // "" = accepted
	}{
		{[]sealv1.Piece{piece(16 << 30), piece(16 << 30)}, ""},
		// 1 GiB then 16 GiB: the second starts at 16 GiB (aligned), so 1 GiB more does not fit,
		// though the sizes sum to 18 GiB (what CEL checks).
		{[]sealv1.Piece{piece(1 << 30), piece(16 << 30), piece(1 << 30)}, "spec.sectors[1].data.pieces[2].size"},
		{[]sealv1.Piece{piece(3 << 20)}, "spec.sectors[1].data.pieces[0].size"},
		{[]sealv1.Piece{{CID: "baga6ea4seaqzzzz", Size: 128}}, "spec.sectors[1].data.pieces[0].cid"},
	} {
		b := testBatch()
		b.Spec.Sectors[1].Data.Pieces = c.pieces
		_, err := Config(ConfigInput{Batch: b})
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%v refused: %v", c.pieces, err)
		case c.field != "" && (err == nil || !strings.Contains(err.Error(), c.field)):
			t.Errorf("%v: want an error naming %s, got %v", c.pieces, c.field, err)
		}
	}
	// A path that climbs out of the data volume stays inside it.
	b := testBatch()
	b.Spec.Sectors[1].Data.File = "a/../../etc/passwd"
	if cfg, err := Config(ConfigInput{Batch: b}); err != nil || cfg.Sectors[1].Data.Path != "/data/etc/passwd" {
		t.Errorf("escaping path: %+v %v", cfg, err)
	}
}

func TestDataSourceIsMountedReadOnly(t *testing.T) {
	for _, src := range []*sealv1.DataSource{
		{HostPath: &sealv1.HostPathData{Path: "/srv/deals"}},
		{PersistentVolumeClaim: &sealv1.PVCOutput{ClaimName: "deals"}},
	} {
		b := testBatch()
		b.Spec.DataSource = src
		pod := Pod(PodInput{Batch: b, Node: "n1", Attempt: 1, CPUs: 2}, podOpts())
		var found bool
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			if m.MountPath == DataMount {
				found = m.ReadOnly && m.Name == "data"
			}
		}
		var vol *corev1.Volume
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == "data" {
				vol = &pod.Spec.Volumes[i]
			}
		}
		switch {
		case !found || vol == nil:
			t.Errorf("%+v: no read-only data mount", src)
		case src.HostPath != nil && (vol.HostPath == nil || vol.HostPath.Path != "/srv/deals" || *vol.HostPath.Type != corev1.HostPathDirectory):
			t.Errorf("hostPath data volume: %+v", vol.VolumeSource)
		case src.PersistentVolumeClaim != nil && (vol.PersistentVolumeClaim == nil || !vol.PersistentVolumeClaim.ReadOnly):
			t.Errorf("claim data volume: %+v", vol.VolumeSource)
		}
	}
	b := testBatch()
	b.Spec.DataSource = nil
	for _, v := range Pod(PodInput{Batch: b, Node: "n1", Attempt: 1, CPUs: 2}, podOpts()).Spec.Volumes {
		if v.Name == "data" {
			t.Error("a batch without dataSource got a data volume")
		}
	}
}

func podOpts() PodOptions {
	return PodOptions{Image: "sealer:1", MemoryBase: resource.MustParse("2Gi"), MemoryPerSector: resource.MustParse("256Mi"), MetricsPort: 9464}
}

// 2 KiB and 8 MiB batches start from at most 1 GiB whatever the configured base; larger sizes
// from the configured base, and a smaller configured base is never raised.
func TestPodMemoryBaseBySectorSize(t *testing.T) {
	for _, c := range []struct {
		size       sealv1.SectorSize
		base, want string
	}{
		{sealv1.SectorSize2KiB, "2Gi", "1Gi"}, {sealv1.SectorSize8MiB, "2Gi", "1Gi"}, {sealv1.SectorSize512MiB, "2Gi", "2Gi"},
		{sealv1.SectorSize8MiB, "512Mi", "512Mi"}, {sealv1.SectorSize32GiB, "2Gi", "2Gi"}, {sealv1.SectorSize64GiB, "3Gi", "3Gi"},
	} {
		b := testBatch()
		b.Spec.SectorSize, b.Spec.ProofType = c.size, sealv1.ProofTypeV1_1
		b.Spec.PC2Engine = sealv1.PC2EngineCPU // no page-locked GPU buffers
		o := podOpts()
		o.MemoryBase = resource.MustParse(c.base)
		got := Pod(PodInput{Batch: b, Node: "n1", Attempt: 1, CPUs: 2, Hugepages: 1}, o).Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]
		want := resource.MustParse(c.want)
		want.Add(resource.MustParse("512Mi")) // two sectors
		if got.Cmp(want) != 0 {
			t.Errorf("%s sectors, base %s: memory %s, want %s", c.size, c.base, got.String(), want.String())
		}
	}
}

func TestPodPrivilegeFollowsDeviceMode(t *testing.T) {
	b := testBatch()
	files := Pod(PodInput{Batch: b, Node: "n1", Attempt: 1, CPUs: 16, Hugepages: 36,
		Devices: []sealv1.LayerDeviceStatus{{Path: "/data/l.img", Ready: true}, {Path: "/data/skip.img"}}}, podOpts())
	c := files.Spec.Containers[0]
	if c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
		t.Error("file layers made the pod privileged")
	}
	if len(c.SecurityContext.Capabilities.Add) != 1 || c.SecurityContext.Capabilities.Add[0] != "IPC_LOCK" {
		t.Errorf("capabilities %+v", c.SecurityContext.Capabilities)
	}
	// 2 GiB + 256 MiB per sector, one sector's synthetic proofs (a SyntheticPoRep batch), and
	// the GPU engine's page-locked layer buffers and readbacks (pc2Engine gpu).
	mem, want := c.Resources.Limits[corev1.ResourceMemory], resource.MustParse("2560Mi")
	want.Add(*resource.NewQuantity(predict.SynthProofsMemoryBytes(sealv1.SectorSize32GiB), resource.BinarySI))
	host := gpubudget.HostBytes(sealv1.SectorSize32GiB, len(b.Spec.Sectors))
	want.Add(*resource.NewQuantity(int64(host), resource.BinarySI))
	if mem.Cmp(want) != 0 || host == 0 || want.Value() > 2560<<20+256<<20+3<<30 { // host buffers: at most 3 GiB
		t.Errorf("memory %s, want %s", mem.String(), want.String())
	}
	// The C1 pod runs on the CPU: no GPU, no page-locked buffers, no synthetic proofs.
	c1 := Pod(PodInput{Batch: b, Node: "n1", Attempt: 1, CPUs: 1, Step: StepC1}, podOpts()).Spec.Containers[0].Resources.Limits
	if _, ok := c1[sealv1.GPUResource]; ok || c1.Memory().Cmp(resource.MustParse("2560Mi")) != 0 {
		t.Errorf("C1 pod resources %v", c1)
	}
	gpu := c.Resources.Limits["nvidia.com/gpu"]
	if gpu.Value() != 1 || c.Resources.Limits.Cpu().Value() != 16 {
		t.Errorf("gpu/cpu %v", c.Resources.Limits)
	}
	four := intstr.FromInt32(4) // spec.gpus: the pod asks for that many
	b4 := testBatch()
	b4.Spec.GPUs = &four
	if q := Pod(PodInput{Batch: b4, Node: "n1", Attempt: 1, CPUs: 16, Hugepages: 36}, podOpts()).Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; q.Value() != 4 {
		t.Errorf("spec.gpus 4: the pod asks for %v", q.String())
	}
	// spec.gpus All: what placement booked on the node (status.gpus).
	all := intstr.FromString(sealv1.GPUsAll)
	b4.Spec.GPUs, b4.Status.GPUs = &all, 8
	if q := Pod(PodInput{Batch: b4, Node: "n1", Attempt: 1, CPUs: 16, Hugepages: 36}, podOpts()).Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; q.Value() != 8 {
		t.Errorf("spec.gpus All, 8 booked: the pod asks for %v", q.String())
	}
	mounted := 0
	for _, v := range files.Spec.Volumes {
		if v.HostPath != nil && strings.HasPrefix(v.HostPath.Path, "/data/") {
			mounted++
		}
	}
	if mounted != 1 {
		t.Errorf("want exactly the one ready device mounted, got %d", mounted)
	}

	block := Pod(PodInput{Batch: b, Node: "n1", Attempt: 2, CPUs: 16, Devices: []sealv1.LayerDeviceStatus{{Path: "/dev/nvme1n1", Ready: true}}}, podOpts())
	if p := block.Spec.Containers[0].SecurityContext.Privileged; p == nil || !*p {
		t.Error("block devices need a privileged container")
	}
	if block.Name != "b-sealer-2" || PodNode(block) != "n1" || block.Spec.NodeName != "" {
		t.Errorf("name/node %s %s (nodeName %q: kube-scheduler binds)", block.Name, PodNode(block), block.Spec.NodeName)
	}

	vfio := Pod(PodInput{Batch: b, Node: "n1", Attempt: 1, CPUs: 16, DeviceMode: sealv1.DeviceModeVFIO,
		Devices: []sealv1.LayerDeviceStatus{{PCIAddress: "0000:41:00.0", IOMMUGroup: "17", Ready: true}}}, podOpts())
	paths := map[string]bool{}
	for _, v := range vfio.Spec.Volumes {
		if v.HostPath != nil {
			paths[v.HostPath.Path] = true
		}
	}
	if !paths["/dev/vfio/17"] || !paths["/dev/vfio/vfio"] || paths["/dev/vfio"] {
		t.Errorf("vfio volumes: %v", paths)
	}
}

// Every attempt's pod is covered by the batch's disruption budget, which allows no eviction;
// the pod carries the operator's priority class, runtime class and pull secrets (the scrub
// pod its pull secrets too).
func TestDisruptionBudgetPriorityAndPullSecrets(t *testing.T) {
	b := testBatch()
	pdb := DisruptionBudget(b, Home{})
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	o := podOpts()
	o.PriorityClassName = "sealfleet-sealer"
	o.PullSecrets = []string{"reg-a", "reg-b"}
	if p := Pod(PodInput{Batch: b, Node: "n1", Attempt: 1, CPUs: 2}, o); p.Spec.RuntimeClassName != nil {
		t.Errorf("runtime class %q set though none was given (the default runtime must apply)", *p.Spec.RuntimeClassName)
	}
	o.RuntimeClassName = "nvidia"
	for attempt := int32(1); attempt <= 3; attempt++ {
		p := Pod(PodInput{Batch: b, Node: "n1", Attempt: attempt, CPUs: 2}, o)
		if !sel.Matches(labels.Set(p.Labels)) {
			t.Errorf("attempt %d pod %v not selected by %v", attempt, p.Labels, pdb.Spec.Selector)
		}
		if p.Spec.PriorityClassName != "sealfleet-sealer" {
			t.Errorf("priority class %q", p.Spec.PriorityClassName)
		}
		if p.Spec.RuntimeClassName == nil || *p.Spec.RuntimeClassName != "nvidia" {
			t.Errorf("runtime class %v", p.Spec.RuntimeClassName)
		}
		if len(p.Spec.ImagePullSecrets) != 2 || p.Spec.ImagePullSecrets[1].Name != "reg-b" {
			t.Errorf("pull secrets %v", p.Spec.ImagePullSecrets)
		}
	}
	scrub := ScrubPod(ScrubInput{Namespace: b.Namespace, Node: "n1", PullSecrets: o.PullSecrets}, "img", corev1.PullIfNotPresent)
	if len(scrub.Spec.ImagePullSecrets) != 2 || scrub.Spec.ImagePullSecrets[0].Name != "reg-a" {
		t.Errorf("scrub pull secrets %v", scrub.Spec.ImagePullSecrets)
	}
	if sel.Matches(labels.Set(scrub.Labels)) {
		t.Error("the budget must not hold the scrub pod (a release would wait on a drain)")
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil || pdb.Name != "b-sealer" || pdb.Namespace != b.Namespace {
		t.Errorf("budget %s/%s %+v", pdb.Namespace, pdb.Name, pdb.Spec)
	}
}

// The scrub pod belongs to the node's slot, not to a batch: it runs in the operator's node-pod
// namespace, touches only the slot's range of the ready devices, and its name fits any node.
func TestScrubPodCoversOnlyTheSlot(t *testing.T) {
	p := ScrubPod(ScrubInput{Namespace: "sealfleet-system", Node: "n1.example", Slot: 1, BatchUID: "0123456789ab", Offset: 4096, Length: 8192,
		Roots: []string{"/data", "/srv"},
		Devices: []sealv1.LayerDeviceStatus{{Path: "/data/a.img", Ready: true}, {Path: "/dev/nvme1n1", Ready: true}, {Path: "/dev/nvme2n1"},
			{Path: "/data/b.img", Ready: true}, {Path: "/etc/c.img", Ready: true}}}, "op:1", corev1.PullNever)
	args := strings.Join(p.Spec.Containers[0].Args, " ")
	if args != "scrub --offset 4096 --length 8192 --root /data --root /srv /data/a.img /dev/nvme1n1 /data/b.img" {
		t.Errorf("args %q", args)
	}
	// Layer files are reached through their root, mounted once (the scrub checks on the node
	// that each file's real path stays under it); block devices one by one; a file outside
	// every root is not mounted at all.
	var vols []string
	for _, v := range p.Spec.Volumes {
		vols = append(vols, v.HostPath.Path+":"+string(*v.HostPath.Type))
	}
	if strings.Join(vols, " ") != "/data:Directory /dev/nvme1n1:BlockDevice" {
		t.Errorf("volumes %v", vols)
	}
	if PodNode(p) != "n1.example" || p.Spec.RestartPolicy != corev1.RestartPolicyNever || p.Namespace != "sealfleet-system" {
		t.Errorf("scrub pod %s/%s spec %+v", p.Namespace, p.Name, p.Spec)
	}
	if p.Name != "scrub-n1-example-slot-1-01234567" || p.Annotations[AnnotationScrubNode] != "n1.example" || p.Annotations[AnnotationScrubSlot] != "1" ||
		p.Annotations[AnnotationScrubBatchUID] != "0123456789ab" {
		t.Errorf("scrub pod %s annotations %v", p.Name, p.Annotations)
	}
	if _, batch := p.Labels[LabelBatch]; batch {
		t.Errorf("a scrub pod carries no batch label: %v", p.Labels)
	}
	long := strings.Repeat("a", 62) + "." + strings.Repeat("b", 62) + "." + strings.Repeat("c", 62) + "." + strings.Repeat("d", 62)
	n1, n2 := ScrubPodName(long, 0, "u"), ScrubPodName(long+"x", 0, "u")
	if len(n1) > 253 || n1 == n2 {
		t.Errorf("long node names: %q (%d) and %q", n1, len(n1), n2)
	}
}

func TestParentCacheBuilderAndMount(t *testing.T) {
	p := ParentCacheBuilder(ParentCacheInput{Node: "n1.example", Proof: "StackedDrg32GiBV1_1", HostPath: "/srv/cache", Namespace: "ns"}, podOpts())
	if p.Name != "parent-cache-n1-example-stackeddrg32gibv1-1" || PodNode(p) != "n1.example" || p.Namespace != "ns" {
		t.Errorf("builder %s/%s on %s", p.Namespace, p.Name, PodNode(p))
	}
	c := p.Spec.Containers[0]
	if strings.Join(c.Command, " ") != "/sealer parent-cache --proof StackedDrg32GiBV1_1 --dir /parent-cache" || c.VolumeMounts[0].ReadOnly {
		t.Errorf("builder container %+v", c)
	}
	if hp := p.Spec.Volumes[0].HostPath; hp == nil || hp.Path != "/srv/cache" || p.Annotations[AnnotationCacheProof] != "StackedDrg32GiBV1_1" {
		t.Errorf("builder volume %+v annotations %v", p.Spec.Volumes, p.Annotations)
	}
	pod := Pod(PodInput{Batch: testBatch(), Node: "n1", Attempt: 1, CPUs: 4, ParentCachePath: "/srv/cache"}, podOpts())
	var mounted bool
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		mounted = mounted || (m.MountPath == ParentCacheMount && m.ReadOnly)
	}
	if !mounted {
		t.Errorf("sealer pod does not mount the parent cache read-only: %+v", pod.Spec.Containers[0].VolumeMounts)
	}
}

// updateBatch is testBatch as a SnapDeals update of its two sectors, sealed earlier under a
// lotus storage path.
func updateBatch() *sealv1.SealBatch {
	b := testBatch()
	b.Spec.ProofType, b.Spec.PC2Engine = sealv1.ProofTypeV1_1, sealv1.PC2EngineCPU
	b.Spec.Update = &sealv1.SnapUpdate{SectorKeys: sealv1.SectorKeySource{
		HostPath: &sealv1.HostPathData{Path: "/var/lib/sealfleet/output/ns/cc"}, Layout: sealv1.OutputLayoutLotus}}
	for i := range b.Spec.Sectors {
		b.Spec.Sectors[i].Ticket = ""
	}
	b.Spec.Sectors[0].Data = &sealv1.SectorData{File: "staged/s-t01000-7", Pieces: []sealv1.Piece{{CID: strings.Repeat("0c", 32), Size: 32 << 30}}}
	b.Spec.Sectors[1].CommR = "bagboea4b5abcaaahbykryizkge4d6rsnkrnwe2lqo57ildettkq2rl5wxxcmxuwz"
	return b
}

func TestUpdateConfigAndPod(t *testing.T) {
	b := updateBatch()
	cfg, err := UpdateConfig(b, "/output/ns/b")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RegisteredProof != "StackedDrg32GiBV1_1" || cfg.OutputDir != "/output/ns/b" || len(cfg.Sectors) != 2 {
		t.Errorf("config: %+v", cfg)
	}
	s := cfg.Sectors[1]
	if s.SectorKey != "/sector-keys/sealed/s-t01000-8" || s.SectorKeyCache != "/sector-keys/cache/s-t01000-8" ||
		!strings.HasPrefix(s.CommD, "077e5fde") || s.Data == nil || s.Data.Path != "/data/staged/s-t01000-8" ||
		s.CommROld != "00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9" {
		t.Errorf("sector 8: %+v", s)
	}
	if sealed, cache := SectorKeyPaths(sealv1.OutputLayoutSealfleet, 1000, 7); sealed != "/sector-keys/7/sealed" || cache != "/sector-keys/7/cache" {
		t.Errorf("Sealfleet layout: %s %s", sealed, cache)
	}
	// The golden update config is the contract: the Rust sealer's tests parse this file
	// (sealer-image/crates/sealer-config/src/snap.rs) and check every key it reads is here.
	got, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "snap-config.golden.json"), append(got, '\n'), *update, "./internal/render")

	b.Spec.Sectors[0].Data = nil
	if _, err := UpdateConfig(b, "/o"); err == nil || !strings.Contains(err.Error(), "spec.sectors[0].data") {
		t.Errorf("a sector without data: %v", err)
	}

	pod := Pod(PodInput{Batch: updateBatch(), Node: "n1", Attempt: 1, CPUs: 2}, podOpts())
	c := pod.Spec.Containers[0]
	if strings.Join(c.Command, " ") != "/sealer snap --config /etc/sealer/config.json" {
		t.Errorf("command %v", c.Command)
	}
	var keys *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == SectorKeysMount {
			keys = &c.VolumeMounts[i]
		}
	}
	if keys == nil || !keys.ReadOnly {
		t.Errorf("sector keys not mounted read-only: %+v", c.VolumeMounts)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == "sector-keys" && (v.HostPath == nil || v.HostPath.Path != "/var/lib/sealfleet/output/ns/cc" || *v.HostPath.Type != corev1.HostPathDirectory) {
			t.Errorf("sector-keys volume: %+v", v.VolumeSource)
		}
	}
	if _, ok := c.Resources.Limits["hugepages-1Gi"]; ok {
		t.Error("an update asked for hugepages")
	}
}

// Every sealer pod first claims its batch's output directory with the operator's image; the
// claim container requests what it limits, so the pod stays Guaranteed.
func TestSealerPodClaimsItsOutputFirst(t *testing.T) {
	b := testBatch()
	o := podOpts()
	o.HelperImage = "operator:2"
	p := Pod(PodInput{Batch: b, Node: "n1", Attempt: 1, CPUs: 4}, o)
	if len(p.Spec.InitContainers) != 1 {
		t.Fatalf("init containers %+v", p.Spec.InitContainers)
	}
	c := p.Spec.InitContainers[0]
	want := "/node-agent claim-output --dir " + OutputDir(b) + " --batch " + b.Namespace + "/" + b.Name + " --uid " + string(b.UID)
	if c.Name != ClaimOutputContainer || c.Image != "operator:2" || strings.Join(c.Command, " ") != want {
		t.Errorf("claim container %s %s %q, want %q", c.Name, c.Image, strings.Join(c.Command, " "), want)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != "output" || c.VolumeMounts[0].MountPath != OutputMount {
		t.Errorf("claim mounts %+v", c.VolumeMounts)
	}
	if !equalResources(c.Resources.Requests, c.Resources.Limits) {
		t.Errorf("claim container requests %v limits %v: the pod would not be Guaranteed", c.Resources.Requests, c.Resources.Limits)
	}
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}
