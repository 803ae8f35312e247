package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/testenv"
	"github.com/sealfleet/sealfleet/internal/testutil"
)

// Fleet size the plugin must handle quickly: 300 nodes, 1000 batches.
const (
	scaleNodes   = 300
	scaleBatches = 1000
	scalePlaced  = 2 * scaleNodes // every slot of every node
)

// writeKubeconfig writes a kubeconfig for the envtest API server with `ns` as the context's
// namespace, so the commands are tested through the kubectl flags, as a user runs them.
func writeKubeconfig(t *testing.T, cfg *rest.Config, ns string) string {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: ns}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// parallel runs f(0..n-1) on a few workers and fails the test on the first error.
func parallel(t *testing.T, n int, f func(i int) error) {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestAgainstAPIServer runs the commands against a real API server through a kubeconfig:
// status, slots and wait over 300 SealerNodes and 1000 SealBatches (every list is paged,
// and each command stays fast), batch's event field selector, and seeds through the API's
// validation of spec.seeds.
func TestAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}}); err != nil {
		t.Fatal(err)
	}
	parallel(t, scaleNodes, func(i int) error {
		n := sealerNode(fmt.Sprintf("node-%03d", i))
		n.Status.Conditions[0].LastTransitionTime = metav1.Now()
		status := *n.Status.DeepCopy()
		if err := c.Create(ctx, &n); err != nil { // the API drops the status here
			return err
		}
		n.Status = status
		return c.Status().Update(ctx, &n)
	})
	parallel(t, scaleBatches, func(i int) error {
		b := testutil.Batch("fleet", fmt.Sprintf("b-%04d", i), sealv1.SectorSize32GiB, 1)
		b.UID = ""
		b.Labels = map[string]string{"scale": "yes"}
		if err := c.Create(ctx, b); err != nil {
			return err
		}
		if i < scalePlaced {
			testutil.Placed(fmt.Sprintf("node-%03d", i%scaleNodes), int32(i/scaleNodes), sealv1.PhasePC1)(b)
			b.Status.PlacedTime = &metav1.Time{Time: time.Now().Add(-time.Minute)}
		} else {
			b.Status.Phase, b.Status.Message = sealv1.PhasePending, "no node has a free layer slot"
		}
		return c.Status().Update(ctx, b)
	})

	kubeconfig := writeKubeconfig(t, env.Config, "fleet")
	runReal := func(args ...string) (string, string, int, time.Duration) {
		var out, errOut bytes.Buffer
		root := NewRootCommand(Env{Out: &out, Err: &errOut})
		root.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
		start := time.Now()
		err := root.ExecuteContext(ctx)
		took := time.Since(start)
		if err != nil {
			errOut.WriteString("error: " + err.Error())
		}
		return out.String(), errOut.String(), exitCode(err), took
	}

	out, errOut, code, took := runReal("status", "-o", "json")
	if code != 0 {
		t.Fatalf("status: exit %d %s", code, errOut)
	}
	var s FleetStatus
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Nodes.Total != scaleNodes || s.Nodes.Ready != scaleNodes || s.Slots.Total != scalePlaced || s.Slots.Held != scalePlaced ||
		s.Slots.Free != 0 || s.Batches.Total != scaleBatches || s.Batches.ByPhase["PC1"] != scalePlaced {
		t.Errorf("status at scale: %+v", s)
	}
	t.Logf("status over %d nodes and %d batches: %s", scaleNodes, scaleBatches, took)
	// The bound is loose for a loaded CI machine; a regression to per-object requests
	// (1300 round trips) would still exceed it.
	if took > 10*time.Second {
		t.Errorf("status took %s", took)
	}

	out, errOut, code, took = runReal("slots", "--held", "--no-headers")
	if rows := strings.Count(out, "\n"); code != 0 || rows != scalePlaced {
		t.Errorf("slots --held: exit %d, %d rows, want %d: %s", code, rows, scalePlaced, errOut)
	}
	t.Logf("slots --held: %s", took)

	// The context's namespace is the default (-n not given).
	out, errOut, code, _ = runReal("wait", "-l", "scale=yes", "--for", "placement", "--timeout", "30s")
	if want := fmt.Sprintf("%d batches: %d placed, %d pending (%d with a reason)\n", scaleBatches, scalePlaced, scaleBatches-scalePlaced, scaleBatches-scalePlaced); code != 0 || out != want {
		t.Errorf("wait for placement: exit %d %q %s", code, out, errOut)
	}

	// Paging against the real server: 1000 batches come in pages of at most 500.
	var pages int
	counting := rest.CopyConfig(env.Config)
	counting.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, "/sealbatches") {
				pages++
			}
			return rt.RoundTrip(r)
		})
	})
	cc, err := client.New(counting, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	batches, err := listBatches(ctx, cc)
	if err != nil || len(batches) != scaleBatches || pages != 2 {
		t.Errorf("listed %d batches in %d requests (%v), want %d in 2", len(batches), pages, err, scaleBatches)
	}
	if conflicts := ledger.BookOf(batches, nil, nil).Conflicts(); len(conflicts) > 0 {
		t.Errorf("fixture double-books slots: %v", conflicts[:1])
	}

	// batch: the API server selects the batch's events by involvedObject kind and name.
	first := &sealv1.SealBatch{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "fleet", Name: "b-0000"}, first); err != nil {
		t.Fatal(err)
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "fleet", Name: "b-0000.placed"},
		InvolvedObject: corev1.ObjectReference{Kind: "SealBatch", Name: "b-0000", Namespace: "fleet", UID: first.UID},
		Type:           corev1.EventTypeNormal, Reason: "Placed", Message: "slot 0 of node-000",
		LastTimestamp: metav1.Now(),
	}
	other := ev.DeepCopy()
	other.Name, other.InvolvedObject.Name, other.Reason = "b-0001.placed", "b-0001", "NotThisOne"
	for _, e := range []*corev1.Event{ev, other} {
		if err := c.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code, _ = runReal("batch", "b-0000", "-o", "json")
	var report BatchReport
	if err := json.Unmarshal([]byte(out), &report); code != 0 || err != nil || len(report.Events) != 1 || report.Events[0].Reason != "Placed" {
		t.Errorf("batch -o json: exit %d %v events %+v %s", code, err, report.Events, errOut)
	}

	// seeds: the merge patch passes the API's rules (FromSlot only, seeds add-only).
	b := testutil.Batch("fleet", "c1", sealv1.SectorSize2KiB, 2, testutil.NumberedFrom(100))
	b.UID, b.Spec.Commit1 = "", sealv1.Commit1FromSlot
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	seeds := "- {number: 100, randomness: 0x" + strings.Repeat("ab", 32) + ", epoch: 4000}\n"
	if out, errOut, code, _ = runReal("seeds", "c1", "-f", writeFile(t, seeds)); code != 0 || out != "seeds written for sectors 100 of fleet/c1\n" {
		t.Fatalf("seeds -f: exit %d %q %s", code, out, errOut)
	}
	if out, errOut, code, _ = runReal("seeds", "c1", "--random", "--epoch", "4001"); code != 0 || out != "seeds written for sectors 101 of fleet/c1\n" {
		t.Fatalf("seeds --random: exit %d %q %s", code, out, errOut)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	if len(b.Spec.Seeds) != 2 || b.Spec.Seeds[0].Randomness != strings.Repeat("ab", 32) || b.Spec.Seeds[1].Epoch != 4001 {
		t.Errorf("spec.seeds on the server: %+v", b.Spec.Seeds)
	}
}

func writeFile(t *testing.T, content string) string {
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
