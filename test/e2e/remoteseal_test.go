package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	v0 "github.com/sealfleet/sealfleet/internal/remoteseal/delegatedv0"
	"github.com/sealfleet/sealfleet/internal/remoteseal/provider"
)

func fileSHA(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// The provider's Service is a NodePort on the real node (remoteSeal.service.nodePort), the address
// partners and lotus-miners are given.
const (
	providerNodePort = "30443"
	providerURL      = "http://" + nodeIP + ":" + providerNodePort
)

// remoteSealRun is Curio's remote-seal client against sealfleet on the real node: the chart
// with the provider on, a partner Secret, two 8 MiB CC orders (one batch), the ticket from
// the client's chain, complete (status and notice), the replica downloaded from the node
// (the provider only redirects) with a resumed Range, the cache tar under Curio's
// constraints, CommRs against rust-fil-proofs, commit1 with seeds (C1 from the slot), then
// finalize and cleanup: the files, the orders and the batch are gone, the slot scrubbed.
func remoteSealRun(t *testing.T, step func(env []string, args ...string) string) {
	const ns, sp = "sealfleet-batches", int64(1000)
	ctx := context.Background()
	curio := newCurioClient(t, providerURL)
	partner := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-curio", Namespace: "sealfleet-system", Labels: map[string]string{provider.LabelPartner: "true"}},
		Data: map[string][]byte{provider.KeyToken: []byte(curio.token), provider.KeyURL: []byte(curio.srv.URL),
			provider.KeyMaxSectors: []byte("4"), provider.KeyProofTypes: []byte("5,6,10")},
	}
	// A partner Secret an earlier run left (a kept cluster) holds another token: replace it.
	if err := k8s.Create(ctx, partner); apierrors.IsAlreadyExists(err) {
		var old corev1.Secret
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(partner), &old); err != nil {
			t.Fatal(err)
		}
		old.Data, old.Labels = partner.Data, partner.Labels
		if err := k8s.Update(ctx, &old); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), partner) })
	// The provider behind its Service's NodePort, as partners outside the cluster reach it, on
	// plain HTTP (the local cluster has no certificate for it).
	step(nil, "install", "--set", "remoteSeal.enabled=true", "--set", "remoteSeal.insecureHTTP=true",
		"--set", "remoteSeal.service.type=NodePort", "--set", "remoteSeal.service.nodePort="+providerNodePort,
		"--set", "remoteSeal.maxBatch=2", "--set", "remoteSeal.maxWait=2m", "--set", "remoteSeal.publicURL="+providerURL)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := http.Get(curio.provider + v0.BasePath + "capabilities")
		if err == nil {
			resp.Body.Close()
		}
		var sn sealv1.SealerNode
		_ = k8s.Get(ctx, client.ObjectKey{Name: "127.0.0.1"}, &sn)
		if err == nil && resp.StatusCode == 200 && sn.Status.SectorDataURL != "" {
			t.Logf("provider up; node serves sector data at %s", sn.Status.SectorDataURL)
			if !strings.HasPrefix(sn.Status.SectorDataURL, "https://") {
				t.Errorf("sector data served at %s: the chart's default is HTTPS (remoteSeal.sectorData.tls.mode ChartCA)", sn.Status.SectorDataURL)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("provider not serving or node not publishing sectorDataURL after 3 minutes: %v, %q", err, sn.Status.SectorDataURL)
		}
		time.Sleep(2 * time.Second)
	}
	trustSectorDataCA(t)
	if code, _ := curio.post("status", v0.SectorRequest{PartnerToken: "wrong", SpID: sp, SectorNumber: 5001}, nil); code != http.StatusUnauthorized {
		t.Errorf("status with a wrong token: %d", code)
	}

	sectors := []int64{5001, 5002}
	for _, n := range sectors {
		if err := curio.delegate(sp, n, 6); err != nil { // 6: StackedDrg8MiBV1_1
			t.Fatal(err)
		}
	}
	if o := func() v0.OrderResponse {
		var o v0.OrderResponse
		curio.post("order", v0.OrderRequest{PartnerToken: curio.token, SpID: sp, SectorNumber: 5003, RegSealProof: 16}, &o)
		return o
	}(); o.Accepted || !strings.Contains(o.RejectReason, "not taken for delegated orders") {
		t.Errorf("an NI-PoRep order: %+v", o)
	}
	st := map[int64]v0.StatusResponse{}
	deadline = time.Now().Add(12 * time.Minute)
	for len(st) < len(sectors) {
		for _, n := range sectors {
			s := curio.status(sp, n)
			switch s.State {
			case v0.StateComplete:
				st[n] = s
			case v0.StateFailed, v0.StateGone:
				t.Fatalf("sector %d: %s (%s)", n, s.State, s.FailReason)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not complete after 12 minutes: %v", st)
		}
		time.Sleep(3 * time.Second)
	}
	batch := "rs-f01000-5001-x2"
	var b sealv1.SealBatch
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: batch}, &b); err != nil {
		t.Fatal(err)
	}
	for i, n := range sectors {
		s, bs := st[n], b.Status.Sectors[i]
		if s.TreeRCid != bs.CommRCID || s.TreeDCid != bs.CommDCID || hex.EncodeToString(s.TicketValue) != b.Spec.Sectors[i].Ticket || s.TicketEpoch != 4000 {
			t.Errorf("sector %d: status %+v, batch %+v ticket %s", n, s, bs, b.Spec.Sectors[i].Ticket)
		}
	}
	if out := step(nil, "verify", batch); strings.Count(out, "matches rust-fil-proofs") != 2 {
		t.Errorf("remote-sealed sectors do not match rust-fil-proofs:\n%s", out)
	}
	if out, err := sealfleetPlugin("orders", "-n", ns); err != nil || !strings.Contains(string(out), "f01000-5001") || !strings.Contains(string(out), "e2e-curio") || !strings.Contains(string(out), batch) {
		t.Errorf("kubectl sealfleet orders: %v\n%s", err, out)
	}
	deadline = time.Now().Add(time.Minute)
	for {
		curio.mu.Lock()
		got := len(curio.complete)
		curio.mu.Unlock()
		if got == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("complete notices received: %d of 2", got)
		}
		time.Sleep(time.Second)
	}

	// The replica and the cache: the provider redirects, the node serves.
	dir := filepath.Join("/var/lib/sealfleet/output", ns, batch)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(fmt.Sprintf("%s%ssealed-data/%d/%d?token=%s", curio.provider, v0.BasePath, sp, 5001, curio.token))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The provider's answer is the redirect and its one-line note, never the replica's bytes.
	if resp.StatusCode != http.StatusTemporaryRedirect || !strings.HasPrefix(resp.Header.Get("Location"), "https://"+nodeIP+":9470/remoteseal/node/v0/sealed?") || resp.ContentLength > 1024 {
		t.Errorf("the provider answered sealed-data with %d, Location %q, %d bytes (want a redirect to the node)", resp.StatusCode, resp.Header.Get("Location"), resp.ContentLength)
	}
	tmp := t.TempDir()
	for _, n := range sectors {
		name := fmt.Sprintf("s-t01000-%d", n)
		dst := filepath.Join(tmp, name)
		if err := curio.fetchSealed(sp, n, dst, 3<<20); err != nil {
			t.Fatalf("sector %d: %v", n, err)
		}
		if err := curio.fetchSealed(sp, n, dst, 0); err != nil { // complete: 416
			t.Errorf("sector %d: fetch of a complete file: %v", n, err)
		}
		if got, want := fileSHA(t, dst), fileSHA(t, filepath.Join(dir, "sealed", name)); got != want {
			t.Errorf("sector %d: downloaded replica differs from the sealed one", n)
		}
		cache := filepath.Join(tmp, "cache-"+name)
		if err := os.Mkdir(cache, 0o755); err != nil {
			t.Fatal(err)
		}
		names, err := curio.fetchCache(sp, n, cache)
		if err != nil || strings.Join(names, ",") != "p_aux,sc-02-data-tree-r-last.dat,t_aux" {
			t.Errorf("sector %d: cache tar %v: %v", n, names, err)
		}
		for _, f := range names {
			if fileSHA(t, filepath.Join(cache, f)) != fileSHA(t, filepath.Join(dir, "cache", name, f)) {
				t.Errorf("sector %d: %s differs", n, f)
			}
		}
	}
	var served float64
	deadline = time.Now().Add(time.Minute)
	for served < 2*8<<20 && time.Now().Before(deadline) {
		if _, vs, err := promQuery(`sum(sealfleet_node_sector_data_bytes_total{kind="sealed"})`); err == nil && len(vs) == 1 {
			served = vs[0]
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("BENCH remote-seal sealed bytes served by the node: %.0f (two 8 MiB replicas, one resumed)", served)
	if served < 2*8<<20 {
		t.Errorf("node's sector data counter %v, want at least two replicas (%d)", served, 2*8<<20)
	}

	// commit1 of each sector on its own, as a client precommitting them apart sends it.
	commit1Apart(t, curio, sp, sectors, ns, batch, dir, &b)
	finalizeAndCleanUp(t, curio, sp, sectors, ns, batch)
	remoteSealOrdersRun(t, step, curio, ns, sp, 5, []int64{5007, 5008})  // StackedDrg2KiBV1_1: C1 from the slot
	remoteSealOrdersRun(t, step, curio, ns, sp, 10, []int64{5005, 5006}) // StackedDrg2KiBV1_1_Feat_SyntheticPoRep (8 MiB: TestRealNode/SyntheticPoRep)
}

// remoteSealOrdersRun orders two more sectors of another kind in one batch and takes them
// through the protocol: complete, CommRs against rust-fil-proofs, commit1 with fresh seeds (412
// until C1 wrote each sector's output, which is then the batch's for its commR and seed),
// finalize and cleanup. A SyntheticPoRep batch must give its slot back once complete: its C1
// reads the stored synthetic proofs on the node, not the slot.
func remoteSealOrdersRun(t *testing.T, step func(env []string, args ...string) string, curio *curioClient, ns string, sp int64, proof int, sectors []int64) {
	ctx := context.Background()
	_, kind, err := v0.ProofOf(proof)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sectors {
		if err := curio.delegate(sp, n, proof); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Minute)
	for done := 0; done < len(sectors); {
		done = 0
		for _, n := range sectors {
			switch s := curio.status(sp, n); s.State {
			case v0.StateComplete:
				done++
			case v0.StateFailed, v0.StateGone:
				t.Fatalf("reg_seal_proof %d sector %d: %s (%s)", proof, n, s.State, s.FailReason)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("reg_seal_proof %d orders not complete after 10 minutes: %d of %d", proof, done, len(sectors))
		}
		time.Sleep(3 * time.Second)
	}
	batch := fmt.Sprintf("rs-f01000-%d-x%d", sectors[0], len(sectors))
	var b sealv1.SealBatch
	deadline = time.Now().Add(2 * time.Minute)
	for {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: batch}, &b)
		if err == nil && (kind != sealv1.ProofTypeSyntheticPoRep || meta.IsStatusConditionTrue(b.Status.Conditions, sealv1.CondReleased)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s: %v; a SyntheticPoRep batch gives its slot back once complete: %+v", batch, err, b.Status.Conditions)
		}
		time.Sleep(2 * time.Second)
	}
	if out := step(nil, "verify", batch); strings.Count(out, "matches rust-fil-proofs") != len(sectors) {
		t.Errorf("reg_seal_proof %d sectors do not match rust-fil-proofs:\n%s", proof, out)
	}
	dir := filepath.Join("/var/lib/sealfleet/output", ns, batch)
	commit1Apart(t, curio, sp, sectors, ns, batch, dir, &b)
	finalizeAndCleanUp(t, curio, sp, sectors, ns, batch)
}

// commit1Apart sends each sector's commit1 with a fresh seed only once the previous sector's
// C1 output came back: the first sector's output must come while the others have no seed
// (C1 per sector, never waiting for another's seed), each checked against its commR and seed.
func commit1Apart(t *testing.T, curio *curioClient, sp int64, sectors []int64, ns, batch, dir string, b *sealv1.SealBatch) {
	t.Helper()
	for i, n := range sectors {
		seed := make([]byte, 32)
		_, _ = rand.Read(seed)
		asked := time.Now()
		commit1Checked(t, curio, sp, n, seed, dir, b.Status.Sectors[i].CommR)
		t.Logf("BENCH remote-seal: commit1 of sector %d answered with its C1 output in %.1f s (%s)", n, time.Since(asked).Seconds(), b.Spec.SectorSize)
		if i+1 < len(sectors) {
			var now sealv1.SealBatch
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: batch}, &now); err != nil {
				t.Fatal(err)
			}
			if len(now.Spec.Seeds) != i+1 || now.Status.Sectors[i+1].State == "C1Written" {
				t.Errorf("sector %d's C1 output came back, but the batch has seeds %d and sector %d is %s", n, len(now.Spec.Seeds), sectors[i+1], now.Status.Sectors[i+1].State)
			}
		}
	}
}

// commit1Checked calls commit1 until the sector's C1 output is written (412 before) and checks
// it: the file in the sector's cache directory, for its commR and the seed sent.
func commit1Checked(t *testing.T, curio *curioClient, sp, n int64, seed []byte, dir, commR string) {
	t.Helper()
	var c1 []byte
	deadline := time.Now().Add(5 * time.Minute)
	for {
		code, body := curio.commit1(sp, n, seed)
		if code == 200 && len(body) > 0 {
			c1 = body
			break
		}
		if code != http.StatusPreconditionFailed || time.Now().After(deadline) {
			t.Fatalf("sector %d: commit1: %d %s", n, code, body)
		}
		time.Sleep(3 * time.Second)
	}
	disk, _ := os.ReadFile(filepath.Join(dir, "cache", fmt.Sprintf("s-t01000-%d", n), "commit-phase1-output"))
	var out struct {
		CommR [32]byte `json:"comm_r"`
		Seed  [32]byte `json:"seed"`
	}
	if !bytes.Equal(c1, disk) || json.Unmarshal(c1, &out) != nil || hex.EncodeToString(out.CommR[:]) != commR || !bytes.Equal(out.Seed[:], seed) {
		t.Errorf("sector %d: C1 output (%d bytes) is not the batch's for its commR and seed", n, len(c1))
	}
	t.Logf("sector %d: C1 output %d bytes", n, len(c1))
}

// finalizeAndCleanUp finalizes and cleans up each sector, then waits until every one is gone,
// the batch deleted with its last order, and the files off the node.
func finalizeAndCleanUp(t *testing.T, curio *curioClient, sp int64, sectors []int64, ns, batch string) {
	t.Helper()
	for _, n := range sectors {
		for _, route := range []string{"finalize", "cleanup"} {
			if code, body := curio.post(route, v0.SectorRequest{PartnerToken: curio.token, SpID: sp, SectorNumber: n}, nil); code != 200 {
				t.Errorf("sector %d %s: %d %s", n, route, code, body)
			}
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		gone := 0
		for _, n := range sectors {
			if curio.status(sp, n).State == v0.StateGone {
				gone++
			}
		}
		var b sealv1.SealBatch
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: batch}, &b)
		if gone == len(sectors) && apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after cleanup: %d of %d sectors gone, batch %s: %v", gone, len(sectors), batch, err)
		}
		time.Sleep(2 * time.Second)
	}
	dir := filepath.Join("/var/lib/sealfleet/output", ns, batch)
	for _, n := range sectors {
		for _, p := range []string{filepath.Join(dir, "sealed", fmt.Sprintf("s-t01000-%d", n)), filepath.Join(dir, "cache", fmt.Sprintf("s-t01000-%d", n))} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("%s still there after cleanup: %v", p, err)
			}
		}
	}
}

// trustSectorDataCA makes this process's default HTTP transport trust the chart's sector-data
// CA, as a partner's host must: Curio and lotus follow the provider's redirects to the node
// agents with Go's default client, so sector data and C1 outputs come over HTTPS.
func trustSectorDataCA(t *testing.T) {
	t.Helper()
	var s corev1.Secret
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "sealfleet-system", Name: "sealfleet-sector-data-ca"}, &s); err != nil {
		t.Fatalf("the chart's sector-data CA: %v", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(s.Data["ca.crt"]) {
		t.Fatalf("Secret %s/%s: ca.crt holds no certificate", s.Namespace, s.Name)
	}
	http.DefaultTransport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
}
