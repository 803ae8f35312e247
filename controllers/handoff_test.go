package controllers_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/controllers"
	"github.com/sealfleet/sealfleet/internal/commcid"
	"github.com/sealfleet/sealfleet/internal/remoteseal/lotusreceive"
	"github.com/sealfleet/sealfleet/internal/remoteseal/orders"
	"github.com/sealfleet/sealfleet/internal/remoteseal/provider"
)

const lotusToken = "lotus-admin-token"

// fakeLotus answers lotus-miner's JSON-RPC SectorReceive (refusing the first `refuse` calls as
// an unreachable chain would) and records each received meta.
type fakeLotus struct {
	mu       sync.Mutex
	refuse   int
	received map[uint64]lotusreceive.RemoteSectorMeta
	srv      *httptest.Server
}

func newFakeLotus(t *testing.T, refuse int) *fakeLotus {
	f := &fakeLotus{refuse: refuse, received: map[uint64]lotusreceive.RemoteSectorMeta{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+lotusToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		req, _ := lotusreceive.ReadRequest(r)
		f.mu.Lock()
		defer f.mu.Unlock()
		var m lotusreceive.RemoteSectorMeta
		switch {
		case req.Method != "Filecoin.SectorReceive" || len(req.Params) != 1 || json.Unmarshal(req.Params[0], &m) != nil:
			lotusreceive.WriteAnswer(w, req.ID, nil, &lotusreceive.RPCError{Code: -32601, Message: "method not found"})
		case f.refuse > 0:
			f.refuse--
			lotusreceive.WriteAnswer(w, req.ID, nil, &lotusreceive.RPCError{Code: 1, Message: "getting chain head: connection refused"})
		default:
			f.received[m.Sector.Number] = m
			lotusreceive.WriteAnswer(w, req.ID, nil, nil)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// TestBatchHandedToLotus: a batch naming a lotus-miner Secret that does not exist waits with
// the reason; one naming a real one gets an order per sector, and once sealed each sector is
// handed to lotus (SectorReceive, retried after a refusal) with its ticket, CIDs, node URLs and
// signed callbacks; lotus' commit1 with a foreign ticket is refused, with the right one it
// hands the seed to C1 and is redirected to the C1 output once written; lotus' done deletes
// the sector's outputs and forgets the order, and the batch (the owner's) stays.
func TestBatchHandedToLotus(t *testing.T) {
	lotus := newFakeLotus(t, 1)
	addr := freeAddr(t)
	h := newHarnessWith(t, func(h *harness) {
		h.namespace("partners")
		h.namespace("orders")
		h.remote = controllers.RemoteSealOptions{Listen: addr, Insecure: true, PartnerNamespace: "partners", OrderNamespace: "orders",
			MinerPrefix: "f0", MaxBatch: 2, MaxWait: time.Hour, OutputPath: "/var/lib/sealfleet/output", DataKeySecret: "data-key", URLTTL: time.Hour,
			CleanupAfter: time.Hour, PublicURL: "http://" + addr, Commit1Wait: time.Second}
		if err := h.c.Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "partners", Labels: map[string]string{provider.LabelLotusMiner: "true"}},
			Data:       map[string][]byte{provider.KeyToken: []byte(lotusToken), provider.KeyAPIURL: []byte(lotus.srv.URL), provider.KeyMinerID: []byte("f01000")},
		}); err != nil {
			t.Fatal(err)
		}
	})
	h.addNode("node-r", 1, 8, nil)
	ctx := context.Background()
	h.serveSectorData("node-r", "http://10.0.0.9:9470")
	epoch := int64(900)
	handed := func(name, miner string, numbers ...int64) *sealv1.SealBatch {
		b := &sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "orders"}, Spec: sealv1.SealBatchSpec{
			SectorSize: sealv1.SectorSize8MiB, MinerID: "f01000", Commit1: sealv1.Commit1FromSlot, Handoff: &sealv1.Handoff{LotusMiner: miner},
			Output: &sealv1.OutputSpec{HostPath: &sealv1.HostPathOutput{Path: "/var/lib/sealfleet/output"}, Layout: sealv1.OutputLayoutLotus}}}
		for _, n := range numbers {
			b.Spec.Sectors = append(b.Spec.Sectors, sealv1.SectorSpec{Number: n, Ticket: strings.Repeat(fmt.Sprintf("%02x", n), 32), TicketEpoch: &epoch})
		}
		if err := h.c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		return b
	}

	// A miner Secret nobody created: the batch is held, saying so.
	handed("lost", "m2", 7)
	h.eventually("the batch held with the reason", func() (bool, string) {
		c := meta.FindStatusCondition(h.batch("orders", "lost").Status.Conditions, sealv1.CondPlaced)
		return c != nil && strings.Contains(c.Message, "no Secret partners/m2"), fmt.Sprint(c)
	})

	b := handed("lb", "m1", 41, 42)
	for _, n := range []int64{41, 42} {
		h.eventually(fmt.Sprintf("the order of sector %d", n), func() (bool, string) {
			var o sealv1.SealOrder
			err := h.c.Get(ctx, client.ObjectKey{Namespace: "orders", Name: fmt.Sprintf("f01000-%d", n)}, &o)
			return err == nil && o.Status.Batch == "lb" && o.Labels[orders.LabelHandoff] == "lb" && o.Status.Ticket != nil && o.Status.Ticket.Epoch == epoch, fmt.Sprint(err, o.Status)
		})
	}
	pod := h.waitPod("orders", "lb-sealer-1")
	cc := lotusreceive.CCCommD(8 << 20)
	var res []string
	for _, n := range []int64{41, 42} {
		res = append(res, fmt.Sprintf(`{"sector_id":%d,"replica_id":"%064x","comm_d":"%x","comm_c":"%064x","comm_r_last":"%064x","comm_r":"%064x"}`, n, n, cc, 2, 3, n+7))
	}
	h.setPod(pod, corev1.PodSucceeded, 0, `{"sectors":[`+strings.Join(res, ",")+`]}`)
	h.waitPhase("orders", "lb", sealv1.PhaseWaitingForSeeds)
	h.eventuallyWithin(2*time.Minute, "both sectors received by lotus (one refusal, then a back-off)", func() (bool, string) {
		lotus.mu.Lock()
		defer lotus.mu.Unlock()
		return len(lotus.received) == 2, fmt.Sprint(len(lotus.received))
	})
	lotus.mu.Lock()
	m := lotus.received[41]
	lotus.mu.Unlock()
	ccCID, _ := commcid.PieceCID(cc)
	var commR [32]byte
	commR[31] = 48
	rCID, _ := commcid.SealedCID(commR)
	if m.State != "PreCommitting" || m.Sector.Miner != 1000 || m.Type != 6 || m.TicketEpoch != epoch || hex.EncodeToString(m.TicketValue) != strings.Repeat("29", 32) ||
		m.CommD.Str != ccCID || m.CommR.Str != rCID || len(m.Pieces) != 1 || m.Pieces[0].Piece.Size != 8<<20 {
		t.Errorf("meta of sector 41: %+v", m)
	}
	for kind, loc := range map[string]*lotusreceive.SectorLocation{"sealed": m.DataSealed, "unsealed-cc": m.DataUnsealed, "cache": m.DataCache} {
		u, _ := url.Parse(loc.URL)
		if loc.Local || u.Host != "10.0.0.9:9470" || u.Path != "/remoteseal/node/v0/"+kind || !strings.HasPrefix(u.Query().Get("path"), "orders/lb/") {
			t.Errorf("%s location %s", kind, loc.URL)
		}
	}
	if !strings.HasPrefix(m.RemoteCommit1Endpoint, "http://"+addr+"/handoff/lotus/v0/commit1?") || !strings.Contains(m.RemoteSealingDoneEndpoint, "/handoff/lotus/v0/done?") {
		t.Errorf("callbacks %s %s", m.RemoteCommit1Endpoint, m.RemoteSealingDoneEndpoint)
	}
	if !h.hasEvent("orders", "lb", "LotusReceiveFailed", "connection refused") || !h.hasEvent("orders", "lb", "LotusReceived", "lotus-miner m1 took sector") {
		t.Error("handoff events on the batch missing")
	}

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(u string, body any) (int, string) {
		raw, _ := json.Marshal(body)
		resp, err := noRedirect.Post(u, "application/json", bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		text, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location") + string(text)
	}
	commit1 := func(n int64, ticket []byte) (int, string) {
		lotus.mu.Lock()
		m := lotus.received[uint64(n)]
		lotus.mu.Unlock()
		return call(m.RemoteCommit1Endpoint, lotusreceive.RemoteCommit1Params{Ticket: ticket, Seed: bytes.Repeat([]byte{byte(n)}, 32), Unsealed: *m.CommD, Sealed: *m.CommR, ProofType: 6})
	}
	if code, msg := commit1(41, bytes.Repeat([]byte{1}, 32)); code != http.StatusBadRequest || !strings.Contains(msg, "ticket") {
		t.Errorf("commit1 with a foreign ticket: %d %s", code, msg)
	}
	if code, _ := call(strings.Replace(m.RemoteCommit1Endpoint, "f01000-41", "f01000-42", 1), nil); code != http.StatusForbidden {
		t.Errorf("commit1 with another sector's signature: %d", code)
	}
	for _, n := range []int64{41, 42} {
		if code, msg := commit1(n, m.TicketValue[:0:0]); code != http.StatusBadRequest {
			t.Errorf("commit1 %d without ticket: %d %s", n, code, msg)
		}
	}
	ticket41, _ := hex.DecodeString(strings.Repeat("29", 32))
	if code, msg := commit1(41, ticket41); code != http.StatusServiceUnavailable || !strings.Contains(msg, "not written yet") {
		t.Errorf("commit1 41 before C1: %d %s", code, msg)
	}
	c1 := h.waitPod("orders", "lb-c1-1")
	if got := h.batch("orders", "lb"); len(got.Spec.Seeds) != 1 || got.Spec.Seeds[0].Randomness != strings.Repeat("29", 32) {
		t.Errorf("batch seeds %+v", got.Spec.Seeds)
	}
	// lotus gives sector 42 up before its commit1: the batch stops waiting for it, its files
	// and order go, and its commit1 is refused from then on.
	lotus.mu.Lock()
	m42 := lotus.received[42]
	lotus.mu.Unlock()
	if code, msg := call(m42.RemoteSealingDoneEndpoint, lotusreceive.RemoteSealingDoneParams{Successful: false, State: "Removing"}); code != 200 {
		t.Fatalf("unsuccessful done of 42: %d %s", code, msg)
	}
	h.eventually("sector 42 abandoned", func() (bool, string) {
		got := h.batch("orders", "lb")
		return slices.Contains(got.Spec.AbandonedSectors, 42), fmt.Sprint(got.Spec.AbandonedSectors)
	})
	ticket42, _ := hex.DecodeString(strings.Repeat("2a", 32))
	if code, msg := commit1(42, ticket42); code != http.StatusGone {
		t.Errorf("commit1 of the given-up sector 42: %d %s", code, msg)
	}
	h.setPod(c1, corev1.PodSucceeded, 0, c1Results(41))
	got := h.waitPhase("orders", "lb", sealv1.PhaseCompleted)
	if got.Status.Sectors[0].State != "C1Written" || got.Status.Sectors[1].State != "Abandoned" {
		t.Errorf("sector states %+v", got.Status.Sectors)
	}
	var gone *corev1.Pod
	h.eventually("output cleanup of the given-up sector 42", func() (bool, string) {
		pods := h.podsLabelled(scrubNS, "sealfleet.io/order=f01000-42")
		if len(pods) == 1 {
			gone = &pods[0]
		}
		return gone != nil, fmt.Sprint(len(pods))
	})
	h.setPod(gone, corev1.PodSucceeded, 0, "")
	h.eventually("order 42 forgotten", func() (bool, string) {
		var o sealv1.SealOrder
		err := h.c.Get(ctx, client.ObjectKey{Namespace: "orders", Name: "f01000-42"}, &o)
		return err != nil, fmt.Sprint(err)
	})
	code, loc := commit1(41, ticket41)
	if code != http.StatusSeeOther || !strings.Contains(loc, "10.0.0.9:9470/remoteseal/node/v0/commit1?") || !strings.Contains(loc, url.QueryEscape("orders/lb/cache/s-t01000-41/commit-phase1-output")) {
		t.Errorf("commit1 after C1: %d %s", code, loc)
	}

	// lotus is done with sector 41: its outputs go, its order with them; the batch stays.
	if code, msg := call(m.RemoteSealingDoneEndpoint, lotusreceive.RemoteSealingDoneParams{Successful: true, State: "Proving", CommitMessage: &lotusreceive.CID{Str: "bafy2bzacecommit"}}); code != 200 {
		t.Fatalf("done: %d %s", code, msg)
	}
	var cleanup *corev1.Pod
	h.eventually("output cleanup of sector 41", func() (bool, string) {
		pods := h.podsLabelled(scrubNS, "sealfleet.io/order=f01000-41")
		if len(pods) == 1 {
			cleanup = &pods[0]
		}
		return cleanup != nil, fmt.Sprint(len(pods))
	})
	if args := strings.Join(cleanup.Spec.Containers[0].Args, " "); args != "remove-outputs --root /output orders/lb/sealed/s-t01000-41 orders/lb/cache/s-t01000-41" {
		t.Errorf("cleanup %s", args)
	}
	h.setPod(cleanup, corev1.PodSucceeded, 0, "")
	h.eventually("order 41 forgotten", func() (bool, string) {
		var o sealv1.SealOrder
		err := h.c.Get(ctx, client.ObjectKey{Namespace: "orders", Name: "f01000-41"}, &o)
		return err != nil, fmt.Sprint(err)
	})
	if code, _ := call(m.RemoteSealingDoneEndpoint, lotusreceive.RemoteSealingDoneParams{Successful: true, State: "Proving"}); code != 200 {
		t.Errorf("a repeated done: %d", code)
	}
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "sealfleet_remote_seal_request_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			var route, code string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "route":
					route = l.GetValue()
				case "code":
					code = l.GetValue()
				}
			}
			calls[route+" "+code] += m.GetHistogram().GetSampleCount()
		}
	}
	if calls["lotus-commit1 303"] != 1 || calls["lotus-commit1 400"] < 3 || calls["lotus-done 200"] != 3 {
		t.Errorf("lotus calls in sealfleet_remote_seal_request_seconds: %v", calls)
	}
	if !h.hasEvent("orders", "lb", "LotusSealingDone", "left lotus' sealing pipeline in state Proving, commit message bafy2bzacecommit") {
		t.Error("no event for lotus' done")
	}
	if got := h.batch("orders", "lb"); got.DeletionTimestamp != nil || got.Name != b.Name {
		t.Error("the owner's batch was deleted with its order")
	}
}
