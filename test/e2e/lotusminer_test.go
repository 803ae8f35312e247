package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	rlepluslazy "github.com/filecoin-project/go-bitfield/rle"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/remoteseal/lotusreceive"
	"github.com/sealfleet/sealfleet/internal/remoteseal/provider"
)

// lotusMiner stands in for lotus-miner where none can run (it needs a chain): its JSON-RPC
// answers Filecoin.SectorReceive as lotus' API does (admin token, JSON-RPC 2.0), then, as
// lotus' ReceiveSector state does, fetches every location of the meta into its own storage
// (an octet stream into a file; a tar, by its Content-Type, unpacked into the cache directory).
type lotusMiner struct {
	t     *testing.T
	token string
	dir   string
	srv   *httptest.Server
	mu    sync.Mutex
	metas map[uint64]lotusreceive.RemoteSectorMeta
	// fetched is each sector's fetch result (nil: all three locations stored).
	fetched map[uint64]error
}

func newLotusMiner(t *testing.T) *lotusMiner {
	tok := make([]byte, 24)
	_, _ = rand.Read(tok)
	m := &lotusMiner{t: t, token: hex.EncodeToString(tok), dir: t.TempDir(), metas: map[uint64]lotusreceive.RemoteSectorMeta{}, fetched: map[uint64]error{}}
	m.srv = newNodeServer(t, http.HandlerFunc(m.rpc))
	return m
}

func (m *lotusMiner) rpc(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/rpc/v0" || r.Header.Get("Authorization") != "Bearer "+m.token {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	req, err := lotusreceive.ReadRequest(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var meta lotusreceive.RemoteSectorMeta
	switch {
	case req.Method != "Filecoin.SectorReceive" || len(req.Params) != 1 || json.Unmarshal(req.Params[0], &meta) != nil:
		lotusreceive.WriteAnswer(w, req.ID, nil, &lotusreceive.RPCError{Code: -32601, Message: "method not found"})
		return
	case meta.State != "PreCommitting" || meta.DataUnsealed == nil || meta.DataSealed == nil || meta.DataCache == nil || meta.CommR == nil:
		lotusreceive.WriteAnswer(w, req.ID, nil, &lotusreceive.RPCError{Code: 1, Message: "imported sector State in not supported, or locations missing"})
		return
	}
	m.mu.Lock()
	_, dup := m.metas[meta.Sector.Number]
	if !dup {
		m.metas[meta.Sector.Number] = meta
	}
	m.mu.Unlock()
	if dup {
		lotusreceive.WriteAnswer(w, req.ID, nil, &lotusreceive.RPCError{Code: 1, Message: fmt.Sprintf("sector %d state already exists", meta.Sector.Number)})
		return
	}
	go func() {
		err := m.fetch(meta)
		m.mu.Lock()
		m.fetched[meta.Sector.Number] = err
		m.mu.Unlock()
	}()
	lotusreceive.WriteAnswer(w, req.ID, nil, nil)
}

func (m *lotusMiner) sectorDir(n uint64, kind string) string {
	return filepath.Join(m.dir, kind, fmt.Sprintf("s-t0%d-%d", 1000, n))
}

// fetch stores the unsealed file, the replica and the cache, as lotus' FetchWithTemp does.
func (m *lotusMiner) fetch(meta lotusreceive.RemoteSectorMeta) error {
	for kind, loc := range map[string]*lotusreceive.SectorLocation{"unsealed": meta.DataUnsealed, "sealed": meta.DataSealed, "cache": meta.DataCache} {
		dst := m.sectorDir(meta.Sector.Number, kind)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		req, _ := http.NewRequest(http.MethodGet, loc.URL, nil)
		for _, h := range loc.Headers {
			req.Header.Set(h.Key, h.Value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return fmt.Errorf("%s: %s", kind, resp.Status)
		}
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if mt == "application/x-tar" {
			err = untar(resp.Body, dst)
		} else {
			var f *os.File
			if f, err = os.Create(dst); err == nil {
				_, err = io.Copy(f, resp.Body)
				f.Close()
			}
		}
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
	}
	return nil
}

func untar(r io.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || strings.Contains(h.Name, "/") {
			return fmt.Errorf("tar entry %q is not a plain file", h.Name)
		}
		f, err := os.Create(filepath.Join(dir, h.Name))
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		f.Close()
		if err != nil {
			return err
		}
	}
}

// lotusHandoffRun hands a batch of two 8 MiB CC sectors to the stand-in lotus-miner through
// the provider installed by remoteSealRun (with its public URL): SectorReceive once sealed,
// with the ticket and its epoch; the files lotus fetched from the node equal the sealed ones
// (replica and cache byte for byte, the unsealed file zeros with lotus' trailer), and the
// CommRs match rust-fil-proofs; lotus gives the second sector up before its commit1 (its files
// and order go at once), lotus' commit1 of the first with a random seed (C1 from the slot, for
// it alone) returns the batch's C1 output for its commR and seed; lotus' done deletes its
// outputs and order.
func lotusHandoffRun(t *testing.T, step func(env []string, args ...string) string) {
	const ns, name = "sealfleet-batches", "e2e-lotus"
	ctx := context.Background()
	lotus := newLotusMiner(t)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-lotus-miner", Namespace: "sealfleet-system", Labels: map[string]string{provider.LabelLotusMiner: "true"}},
		Data: map[string][]byte{provider.KeyToken: []byte(lotus.token), provider.KeyAPIURL: []byte(lotus.srv.URL + "/rpc/v0"),
			provider.KeyMinerID: []byte("f01000")},
	}
	if err := k8s.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, secret) }()
	trustSectorDataCA(t) // lotus fetches from the node agents over HTTPS
	epoch := int64(4100)
	b := &sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: sealv1.SealBatchSpec{
		SectorSize: sealv1.SectorSize8MiB, MinerID: "f01000", Commit1: sealv1.Commit1FromSlot, Handoff: &sealv1.Handoff{LotusMiner: secret.Name},
		Output: &sealv1.OutputSpec{HostPath: &sealv1.HostPathOutput{Path: "/var/lib/sealfleet/output"}, Layout: sealv1.OutputLayoutLotus}}}
	for _, n := range []int64{6001, 6002} {
		tk := make([]byte, 32)
		_, _ = rand.Read(tk)
		b.Spec.Sectors = append(b.Spec.Sectors, sealv1.SectorSpec{Number: n, Ticket: hex.EncodeToString(tk), TicketEpoch: &epoch})
	}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, b) }()

	deadline := time.Now().Add(12 * time.Minute)
	for {
		lotus.mu.Lock()
		n, fetched := len(lotus.metas), len(lotus.fetched)
		lotus.mu.Unlock()
		if n == 2 && fetched == 2 {
			break
		}
		if time.Now().After(deadline) {
			_ = k8s.Get(ctx, client.ObjectKeyFromObject(b), b)
			t.Fatalf("lotus received %d and fetched %d of 2 sectors after 12 minutes (batch %s: %+v)", n, fetched, b.Status.Phase, b.Status.Conditions)
		}
		time.Sleep(3 * time.Second)
	}
	if out := step(nil, "verify", name); strings.Count(out, "matches rust-fil-proofs") != 2 {
		t.Errorf("handed-over sectors do not match rust-fil-proofs:\n%s", out)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("/var/lib/sealfleet/output", ns, name)
	for i, s := range b.Spec.Sectors {
		n := uint64(s.Number)
		lotus.mu.Lock()
		meta, ferr := lotus.metas[n], lotus.fetched[n]
		lotus.mu.Unlock()
		if ferr != nil {
			t.Fatalf("sector %d: lotus' fetch: %v", n, ferr)
		}
		if meta.CommR.Str != b.Status.Sectors[i].CommRCID || meta.CommD.Str != b.Status.Sectors[i].CommDCID || hex.EncodeToString(meta.TicketValue) != s.Ticket || meta.TicketEpoch != epoch || meta.Type != 6 {
			t.Errorf("sector %d: meta %+v, batch status %+v", n, meta, b.Status.Sectors[i])
		}
		lotusName := fmt.Sprintf("s-t01000-%d", n)
		if fileSHA(t, lotus.sectorDir(n, "sealed")) != fileSHA(t, filepath.Join(dir, "sealed", lotusName)) {
			t.Errorf("sector %d: the replica lotus fetched differs from the sealed one", n)
		}
		var names []string
		entries, _ := os.ReadDir(lotus.sectorDir(n, "cache"))
		for _, e := range entries {
			names = append(names, e.Name())
			if fileSHA(t, filepath.Join(lotus.sectorDir(n, "cache"), e.Name())) != fileSHA(t, filepath.Join(dir, "cache", lotusName, e.Name())) {
				t.Errorf("sector %d: cache file %s differs", n, e.Name())
			}
		}
		sort.Strings(names)
		if strings.Join(names, ",") != "p_aux,sc-02-data-tree-r-last.dat,t_aux" {
			t.Errorf("sector %d: cache lotus stored: %v", n, names)
		}
		checkUnsealedCC(t, lotus.sectorDir(n, "unsealed"), 8<<20)
	}
	var served float64
	if _, vs, err := promQuery(`sum(sealfleet_node_sector_data_bytes_total{kind=~"sealed|unsealed-cc|cache"})`); err == nil && len(vs) == 1 {
		served = vs[0]
	}
	t.Logf("BENCH lotus handoff: bytes the node served so far (replicas, unsealed files, caches, this run and the remote-seal one): %.0f", served)

	metaOf := func(n int64) lotusreceive.RemoteSectorMeta {
		lotus.mu.Lock()
		defer lotus.mu.Unlock()
		return lotus.metas[uint64(n)]
	}
	done := func(n int64, ok bool, state string) {
		params, _ := json.Marshal(lotusreceive.RemoteSealingDoneParams{Successful: ok, State: state})
		resp, err := http.Post(metaOf(n).RemoteSealingDoneEndpoint, "application/json", bytes.NewReader(params))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("sector %d: done: %v %v", n, err, resp)
		}
		resp.Body.Close()
	}
	// gone waits until the sector's replica, cache and order are deleted.
	gone := func(n int64, why string) {
		deadline := time.Now().Add(3 * time.Minute)
		for {
			left := 0
			for _, p := range []string{filepath.Join(dir, "sealed", fmt.Sprintf("s-t01000-%d", n)), filepath.Join(dir, "cache", fmt.Sprintf("s-t01000-%d", n))} {
				if _, err := os.Stat(p); err == nil {
					left++
				}
			}
			var o sealv1.SealOrder
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("f01000-%d", n)}, &o); err == nil {
				left++
			}
			if left == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("sector %d after %s: %d outputs or its order left", n, why, left)
			}
			time.Sleep(2 * time.Second)
		}
	}
	kept, dropped := b.Spec.Sectors[0].Number, b.Spec.Sectors[1].Number

	// lotus gives up on the second sector before its commit1 (an unsuccessful done, as its
	// Removing state sends): its files and order go at once, the batch no longer waits for it.
	given := time.Now()
	done(dropped, false, "Removing")
	gone(dropped, "lotus gave it up")
	t.Logf("BENCH lotus handoff: sector %d given up: files and order gone in %.1f s", dropped, time.Since(given).Seconds())

	// lotus' commit1 of the first sector, as its Committing state makes it: POST, redirects
	// followed, retried on 503. C1 runs for it alone as soon as its seed is in.
	m := metaOf(kept)
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	params, _ := json.Marshal(lotusreceive.RemoteCommit1Params{Ticket: m.TicketValue, Seed: seed, Unsealed: *m.CommD, Sealed: *m.CommR, ProofType: m.Type})
	var c1 []byte
	asked := time.Now()
	for deadline := time.Now().Add(8 * time.Minute); ; {
		resp, err := http.Post(m.RemoteCommit1Endpoint, "application/json", bytes.NewReader(params))
		if err != nil {
			t.Fatalf("sector %d: commit1: %v", kept, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			c1 = body
			break
		}
		if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("sector %d: commit1: %s %s", kept, resp.Status, body)
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("BENCH lotus handoff: commit1 of sector %d answered with its C1 output in %.1f s (8 MiB)", kept, time.Since(asked).Seconds())
	disk, _ := os.ReadFile(filepath.Join(dir, "cache", fmt.Sprintf("s-t01000-%d", kept), "commit-phase1-output"))
	var out struct {
		CommR [32]byte `json:"comm_r"`
		Seed  [32]byte `json:"seed"`
	}
	if !bytes.Equal(c1, disk) || json.Unmarshal(c1, &out) != nil || hex.EncodeToString(out.CommR[:]) != b.Status.Sectors[0].CommR || !bytes.Equal(out.Seed[:], seed) {
		t.Errorf("sector %d: C1 output (%d bytes) is not the batch's for its commR and seed", kept, len(c1))
	}
	t.Logf("sector %d: C1 output %d bytes through lotus' commit1", kept, len(c1))

	// lotus is done with the first: its outputs and order go; the batch is the owner's.
	done(kept, true, "Proving")
	gone(kept, "lotus' done")
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil || b.Status.Phase != sealv1.PhaseCompleted {
		t.Errorf("the owner's batch after handoff: %v %s", err, b.Status.Phase)
	}
}

// checkUnsealedCC: the unsealed file lotus stored is `size` zeros, then an RLE+ trailer of one
// present run covering them, then the trailer's length.
func checkUnsealedCC(t *testing.T, path string, size uint64) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(raw)) <= size+4 || !bytes.Equal(raw[:size], make([]byte, size)) {
		t.Fatalf("unsealed file %s: %d bytes, or not zeros", path, len(raw))
	}
	n := binary.LittleEndian.Uint32(raw[len(raw)-4:])
	rle, err := rlepluslazy.FromBuf(raw[size : uint64(len(raw))-4])
	if err != nil || uint64(n) != uint64(len(raw))-4-size {
		t.Fatalf("unsealed trailer: %v (length %d)", err, n)
	}
	it, _ := rle.RunIterator()
	r, err := it.NextRun()
	if err != nil || !r.Val || r.Len != size || it.HasNext() {
		t.Errorf("unsealed trailer runs: %+v %v", r, err)
	}
}
