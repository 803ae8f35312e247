package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/ledger"
)

// upgradeFrom is the commit whose release the upgrade test installs first (its chart and its
// operator built from its tree; its sealer is this checkout's, which hack/upgrade-from.sh
// refuses unless sealer-image/ is unchanged since).
const upgradeFrom = "a26172a"

// TestUpgrade (make test-upgrade; SEALFLEET_E2E_UPGRADE=1): the release of upgradeFrom runs on
// the real node with the remote-seal provider on; a batch starts, and while its sealer is held
// in PC1 (its layer file's I/O throttled) this checkout's release is installed over it (helm
// upgrade, as docs/upgrade.md says). The sealer pod keeps running, the batch completes with
// every CommR equal to rust-fil-proofs', its slot is held by it alone and released once, and
// the sector-data key and CA are the same bytes before and after.
func TestUpgrade(t *testing.T) {
	if os.Getenv("SEALFLEET_E2E_UPGRADE") != "1" {
		t.Skip("the upgrade test runs with SEALFLEET_E2E_UPGRADE=1 (make test-upgrade)")
	}
	if out, _ := cluster("status"); !strings.Contains(out, "kubelet running") {
		t.Skip("no real node in this cluster (needs root; SEALFLEET_E2E_NODE=1 when the suite starts the cluster)")
	}
	const batch, ns = "e2e-upgrade", "sealfleet-batches"
	ctx := context.Background()
	step := func(env []string, args ...string) string {
		t.Helper()
		t0 := time.Now()
		out, err := demo(t, env, args...)
		t.Logf("hack/demo.sh %s (%.1f s)\n%s", strings.Join(args, " "), time.Since(t0).Seconds(), out)
		if err != nil {
			t.Fatalf("hack/demo.sh %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	t0 := time.Now()
	build := exec.Command(filepath.Join(repo, "hack", "upgrade-from.sh"), upgradeFrom, filepath.Join(repo, "_out", "upgrade"))
	build.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+filepath.Join(clusterDir, "run", "containerd", "containerd.sock"))
	var stderr bytes.Buffer
	build.Stderr = &stderr
	chartOut, err := build.Output()
	if err != nil {
		t.Fatalf("hack/upgrade-from.sh %s: %v\n%s", upgradeFrom, err, stderr.String())
	}
	oldChart := strings.TrimSpace(string(chartOut))
	t.Logf("release of %s built (%.0f s): %s", upgradeFrom, time.Since(t0).Seconds(), oldChart)

	// The provider on, so that the chart keeps a sector-data key and CA through the upgrade.
	remote := []string{"--set", "remoteSeal.enabled=true", "--set", "remoteSeal.insecureHTTP=true"}
	// The operator's local process (TestFleet's), if any, must not act beside the chart's.
	if out, err := cluster("operator-stop"); err != nil {
		t.Fatalf("operator-stop: %v\n%s", err, out)
	}
	step([]string{"DEMO_CHART=" + oldChart, "DEMO_IMAGE_TAG=upgrade-from"}, append([]string{"install"}, remote...)...)
	operatorImage := func() string {
		var d appsv1.Deployment
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "sealfleet-system", Name: "sealfleet-operator"}, &d); err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].Image
	}
	if img := operatorImage(); img != "localhost/sealfleet-operator:upgrade-from" {
		t.Fatalf("the older release runs %s", img)
	}
	step(nil, "node")
	secret := func(suffix string) map[string][]byte {
		var s corev1.Secret
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "sealfleet-system", Name: "sealfleet-" + suffix}, &s); err != nil {
			t.Fatalf("Secret sealfleet-%s: %v", suffix, err)
		}
		return s.Data
	}
	key, ca := secret("sector-data-key"), secret("sector-data-ca")

	var node sealv1.SealerNode
	if err := k8s.Get(ctx, client.ObjectKey{Name: "127.0.0.1"}, &node); err != nil {
		t.Fatal(err)
	}
	if len(node.Spec.LayerDevices) == 0 || node.Spec.LayerDevices[0].Path == "" {
		t.Fatalf("SealerNode 127.0.0.1 has no layer file: %+v", node.Spec.LayerDevices)
	}
	th, err := newBlkioThrottle(node.Spec.LayerDevices[0].Path, 128<<10)
	if err != nil {
		t.Skipf("cannot throttle the layer storage here, so no upgrade can land mid-PC1: %v", err)
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer th.lift()
	go th.run(tctx, ns, batch)
	sealed := make(chan error, 1)
	var sealOut string
	go func() {
		out, err := demo(t, nil, "seal", batch, "2")
		sealOut = out
		sealed <- err
	}()

	// Wait for the sealer in PC1, labelling.
	var b sealv1.SealBatch
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: batch}, &b); err == nil && b.Status.Phase == sealv1.PhasePC1 {
			break
		}
		select {
		case err := <-sealed:
			t.Fatalf("the batch ended (%v) before it was seen in PC1\n%s", err, sealOut)
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s not in PC1 after 3 minutes: phase %s", batch, b.Status.Phase)
		}
	}
	pod, attempt, slot := b.Status.PodName, b.Status.Attempts, b.Status.Slot
	t.Logf("batch in PC1 on pod %s (attempt %d); upgrading", pod, attempt)

	// The upgrade: this checkout's release over the older one.
	t1 := time.Now()
	step(nil, append([]string{"install"}, remote...)...)
	if img := operatorImage(); img == "localhost/sealfleet-operator:upgrade-from" || !strings.HasPrefix(img, "localhost/sealfleet-operator:") {
		t.Errorf("after the upgrade the operator runs %s, want this checkout's release", img)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: batch}, &b); err != nil {
		t.Fatal(err)
	}
	if b.Status.Phase != sealv1.PhasePC1 || b.Status.PodName != pod {
		t.Errorf("the upgrade disturbed the batch: phase %s, pod %s (was %s in PC1)", b.Status.Phase, b.Status.PodName, pod)
	}
	t.Logf("upgraded in %.0f s with the batch in PC1", time.Since(t1).Seconds())
	// Its slot is held by this batch alone while it runs.
	holders := slotHolders(t, "127.0.0.1")
	if len(holders) != 1 || holders[0] != ns+"/"+batch {
		t.Errorf("slots of 127.0.0.1 held by %v, want only %s/%s", holders, ns, batch)
	}

	th.lift()
	if err := <-sealed; err != nil {
		t.Fatalf("hack/demo.sh seal %s after the upgrade: %v\n%s", batch, err, sealOut)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: batch}, &b); err != nil {
		t.Fatal(err)
	}
	if b.Status.Attempts != attempt || b.Status.Slot == nil || slot == nil || *b.Status.Slot != *slot {
		t.Errorf("the batch was restarted or moved by the upgrade: attempts %d (was %d), slot %v (was %v)", b.Status.Attempts, attempt, b.Status.Slot, slot)
	}
	out := step(nil, "verify", batch)
	if n := strings.Count(out, "matches rust-fil-proofs"); n != 2 {
		t.Errorf("%d of 2 sectors sealed across the upgrade match rust-fil-proofs", n)
	}
	step(nil, "release", batch)
	if h := slotHolders(t, "127.0.0.1"); len(h) != 0 {
		t.Errorf("after the release the slots of 127.0.0.1 are still held by %v", h)
	}
	if k, c := secret("sector-data-key"), secret("sector-data-ca"); !bytes.Equal(k["key"], key["key"]) ||
		!bytes.Equal(c["tls.crt"], ca["tls.crt"]) || !bytes.Equal(c["tls.key"], ca["tls.key"]) {
		t.Error("the upgrade replaced the sector-data key or CA: partners' URLs and trust would break")
	}
	t.Logf("BENCH upgrade total_seconds=%.0f", time.Since(t0).Seconds())
}

// slotHolders lists the batches (namespace/name) holding a layer slot of node, read from every
// SealBatch's status and the SealerNode's dirty slots as the operator's ledger reads them, and
// fails the test on any double booking the ledger finds.
func slotHolders(t *testing.T, node string) []string {
	t.Helper()
	var list sealv1.SealBatchList
	if err := k8s.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var sns sealv1.SealerNodeList
	if err := k8s.List(context.Background(), &sns); err != nil {
		t.Fatal(err)
	}
	book := ledger.BookOf(list.Items, nil, nil)
	book.AddDirty(sns.Items)
	if c := book.Conflicts(); len(c) > 0 {
		t.Errorf("slots held twice: %v", c)
	}
	var out []string
	if u := book.Of(node); u != nil {
		for _, c := range u.Claims {
			if c.Slot != ledger.NoSlot && !c.Dirty {
				out = append(out, c.Batch)
			}
		}
	}
	return out
}
