package delegatedv0_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	v0 "github.com/sealfleet/sealfleet/internal/remoteseal/delegatedv0"
)

const (
	tokenA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	tokenB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// fakeBackend keeps orders in memory, one partner per token, sealed bytes on a "node" server.
type fakeBackend struct {
	mu       sync.Mutex
	capacity map[string]int64
	orders   map[v0.SectorID]order
	node     string // base URL of the node holding the bytes
	finalize []v0.SectorID
	fail     error // returned by Status when set
}

type order struct {
	partner  string
	proof    int
	reserved bool
	state    string
}

func (f *fakeBackend) Authenticate(_ context.Context, token string) (v0.Partner, error) {
	switch token {
	case tokenA:
		return v0.Partner{ID: "a", Name: "alpha", AllowanceRemaining: 10}, nil
	case tokenB:
		return v0.Partner{ID: "b", Name: "beta", AllowanceRemaining: 1}, nil
	}
	return v0.Partner{}, v0.ErrUnauthorized
}

func (f *fakeBackend) Capabilities(context.Context) (v0.CapabilitiesResponse, error) {
	return v0.CapabilitiesResponse{SupportedProofs: []int64{5, 6, 10}, MaxBatchSize: 128, SupportsRangeRequests: true}, nil
}

func (f *fakeBackend) Capacity(_ context.Context, p v0.Partner) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.capacity[p.ID], nil
}

func (f *fakeBackend) Order(_ context.Context, p v0.Partner, s v0.SectorID, proof int, reserved bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o, ok := f.orders[s]; ok {
		if o.partner != p.ID {
			return &v0.Rejection{Reason: "sector already ordered by another partner"}
		}
		return nil
	}
	if proof != 5 && proof != 10 {
		return &v0.Rejection{Reason: fmt.Sprintf("proof type %d not allowed for this partner", proof)}
	}
	f.orders[s] = order{partner: p.ID, proof: proof, reserved: reserved, state: v0.StatePending}
	return nil
}

func (f *fakeBackend) get(p v0.Partner, s v0.SectorID) (order, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.orders[s]
	return o, ok && o.partner == p.ID
}

func (f *fakeBackend) Status(_ context.Context, p v0.Partner, s v0.SectorID) (v0.StatusResponse, error) {
	if f.fail != nil {
		return v0.StatusResponse{}, f.fail
	}
	o, ok := f.get(p, s)
	if !ok {
		return v0.StatusResponse{State: v0.StateGone}, nil
	}
	if o.state != v0.StateComplete {
		return v0.StatusResponse{State: o.state}, nil
	}
	return v0.StatusResponse{State: o.state, TreeDCid: "baga6ea4seaq", TreeRCid: "bagboea4b5abc", TicketEpoch: 100, TicketValue: bytes.Repeat([]byte{7}, 32)}, nil
}

func (f *fakeBackend) SealedData(_ context.Context, p v0.Partner, s v0.SectorID) (v0.Payload, error) {
	if _, ok := f.get(p, s); !ok {
		return v0.Payload{}, v0.ErrNotFound
	}
	return v0.Payload{Redirect: fmt.Sprintf("%s/sealed/%d/%d?sig=node-credential", f.node, s.SpID, s.Number)}, nil
}

func (f *fakeBackend) CacheData(ctx context.Context, p v0.Partner, s v0.SectorID) (v0.Payload, error) {
	return v0.Payload{}, v0.ErrNotFound
}

func (f *fakeBackend) Commit1(_ context.Context, p v0.Partner, s v0.SectorID, seed []byte) (v0.Payload, error) {
	o, ok := f.get(p, s)
	if !ok {
		return v0.Payload{}, v0.ErrNotFound
	}
	if o.state != v0.StateComplete {
		return v0.Payload{}, v0.ErrNotReady
	}
	return v0.Payload{Body: io.NopCloser(bytes.NewReader(append([]byte("c1:"), seed...)))}, nil
}

func (f *fakeBackend) Finalize(_ context.Context, p v0.Partner, s v0.SectorID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finalize = append(f.finalize, s)
	return nil
}

func (f *fakeBackend) Cleanup(context.Context, v0.Partner, v0.SectorID) error { return nil }

// harness runs the provider and a "node" that serves 1 MiB of sealed bytes with Range support.
type harness struct {
	t      *testing.T
	b      *fakeBackend
	srv    *v0.Server
	url    string
	now    time.Time
	errs   []string
	sealed []byte
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, now: time.Unix(1_800_000_000, 0), sealed: make([]byte, 1<<20)}
	for i := range h.sealed {
		h.sealed[i] = byte(i * 7)
	}
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("sig") != "node-credential" {
			http.Error(w, "bad credential", http.StatusForbidden)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(h.sealed))
	}))
	t.Cleanup(node.Close)
	h.b = &fakeBackend{capacity: map[string]int64{"a": 2, "b": 1}, orders: map[v0.SectorID]order{}, node: node.URL}
	h.srv = &v0.Server{Backend: h.b, Now: func() time.Time { return h.now }, Error: func(route string, err error) { h.errs = append(h.errs, route+": "+err.Error()) }}
	ts := httptest.NewServer(h.srv.Handler())
	t.Cleanup(ts.Close)
	h.url = ts.URL
	return h
}

// post sends JSON as Curio's client does (Content-Type exactly application/json).
func (h *harness) post(route string, body any) (int, []byte) {
	h.t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := http.Post(h.url+v0.BasePath+route, "application/json", bytes.NewReader(raw))
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (h *harness) postJSON(route string, body, into any) {
	h.t.Helper()
	code, out := h.post(route, body)
	if code != http.StatusOK {
		h.t.Fatalf("%s: %d %s", route, code, out)
	}
	if err := json.Unmarshal(out, into); err != nil {
		h.t.Fatalf("%s: %v: %s", route, err, out)
	}
}

func (h *harness) available(token string) v0.AvailableResponse {
	var a v0.AvailableResponse
	h.postJSON("available", v0.AuthorizeRequest{PartnerToken: token}, &a)
	return a
}

func (h *harness) order(token, slot string, number int64, proof int) v0.OrderResponse {
	var o v0.OrderResponse
	h.postJSON("order", v0.OrderRequest{PartnerToken: token, SlotToken: slot, SpID: 1000, SectorNumber: number, RegSealProof: proof}, &o)
	return o
}

func TestCapabilitiesAndAuthorize(t *testing.T) {
	h := newHarness(t)
	resp, err := http.Get(h.url + v0.BasePath + "capabilities")
	if err != nil {
		t.Fatal(err)
	}
	var c v0.CapabilitiesResponse
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.Header.Get("Content-Type") != "application/json" || c.MaxBatchSize != 128 || !c.SupportsRangeRequests {
		t.Errorf("capabilities: %v %+v %s", err, c, resp.Header.Get("Content-Type"))
	}
	resp.Body.Close()
	var a v0.AuthorizeResponse
	h.postJSON("authorize", v0.AuthorizeRequest{PartnerToken: "nope"}, &a)
	if a.Authorized {
		t.Errorf("unknown token authorized: %+v", a)
	}
	h.postJSON("authorize", v0.AuthorizeRequest{PartnerToken: tokenA}, &a)
	if !a.Authorized || a.PartnerName != "alpha" || a.AllowanceRemaining != 10 {
		t.Errorf("authorize: %+v", a)
	}
}

// TestSlotsReserveCapacity: available hands out single-use tokens for 30 s, no more than the
// partner's capacity at once; order spends one, refuses a used, expired or foreign one.
func TestSlotsReserveCapacity(t *testing.T) {
	h := newHarness(t)
	s1, s2 := h.available(tokenA), h.available(tokenA)
	if !s1.Available || !s2.Available || len(s1.SlotToken) != 32 || s1.SlotToken == s2.SlotToken {
		t.Fatalf("two slots of capacity 2: %+v %+v", s1, s2)
	}
	if s3 := h.available(tokenA); s3.Available {
		t.Errorf("a third reservation beyond capacity 2: %+v", s3)
	}
	if o := h.order(tokenB, s1.SlotToken, 1, 5); o.Accepted || !strings.Contains(o.RejectReason, "slot token") {
		t.Errorf("partner b spent a's slot: %+v", o)
	}
	if o := h.order(tokenA, s1.SlotToken, 1, 5); o.Accepted {
		t.Errorf("a slot token spent by the refused attempt was taken again: %+v", o)
	}
	if o := h.order(tokenA, s2.SlotToken, 1, 5); !o.Accepted {
		t.Errorf("valid slot refused: %+v", o)
	}
	if o := h.b.orders[v0.SectorID{SpID: 1000, Number: 1}]; !o.reserved || o.partner != "a" {
		t.Errorf("order recorded as %+v", o)
	}
	h.b.capacity["a"] = 1
	s4 := h.available(tokenA)
	if !s4.Available {
		t.Fatal("no slot after the others were spent")
	}
	if s5 := h.available(tokenA); s5.Available {
		t.Errorf("an outstanding reservation did not count: %+v", s5)
	}
	h.now = h.now.Add(31 * time.Second)
	if o := h.order(tokenA, s4.SlotToken, 2, 5); o.Accepted {
		t.Errorf("expired slot accepted: %+v", o)
	}
	if s6 := h.available(tokenA); !s6.Available {
		t.Errorf("an expired reservation still holds capacity: %+v", s6)
	}
}

func TestOrders(t *testing.T) {
	h := newHarness(t)
	if o := h.order(tokenA, "", 7, 10); !o.Accepted {
		t.Fatalf("order: %+v", o)
	}
	if o := h.order(tokenA, "", 7, 10); !o.Accepted {
		t.Errorf("the same order again (Curio retries) refused: %+v", o)
	}
	if o := h.order(tokenB, "", 7, 10); o.Accepted || !strings.Contains(o.RejectReason, "another partner") {
		t.Errorf("a second partner's order for the same sector: %+v", o)
	}
	if o := h.order(tokenA, "", 8, 99); o.Accepted || !strings.Contains(o.RejectReason, "reg_seal_proof 99") {
		t.Errorf("unknown proof type: %+v", o)
	}
	if o := h.order(tokenA, "", 8, 8); o.Accepted || !strings.Contains(o.RejectReason, "proof type 8 not allowed") {
		t.Errorf("backend refusal: %+v", o)
	}
	if code, body := h.post("order", v0.OrderRequest{PartnerToken: "wrong", SpID: 1000, SectorNumber: 9, RegSealProof: 5}); code != http.StatusUnauthorized || strings.TrimSpace(string(body)) != "unauthorized" {
		t.Errorf("unknown token: %d %s", code, body)
	}
	if code, body := h.post("order", v0.OrderRequest{PartnerToken: tokenA, SpID: -1, SectorNumber: 9, RegSealProof: 5}); code != http.StatusBadRequest || !strings.Contains(string(body), "sp_id") {
		t.Errorf("negative sp_id: %d %s", code, body)
	}
	resp, err := http.Post(h.url+v0.BasePath+"order", "text/plain", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Content-Type must be application/json") {
		t.Errorf("text/plain body: %d %s", resp.StatusCode, body)
	}
	resp, err = http.Post(h.url+v0.BasePath+"order", "application/json; charset=utf-8", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid request body") {
		t.Errorf("bad JSON: %d %s", resp.StatusCode, body)
	}
}

func TestStatusAndCommit1(t *testing.T) {
	h := newHarness(t)
	var st v0.StatusResponse
	h.postJSON("status", v0.SectorRequest{PartnerToken: tokenA, SpID: 1000, SectorNumber: 3}, &st)
	if st.State != v0.StateGone {
		t.Errorf("unknown sector: %+v", st)
	}
	h.order(tokenA, "", 3, 5)
	seed := bytes.Repeat([]byte{9}, 32)
	code, body := h.post("commit1", v0.Commit1Request{PartnerToken: tokenA, SpID: 1000, SectorNumber: 3, SeedValue: seed})
	if code != http.StatusPreconditionFailed {
		t.Errorf("commit1 before the trees: %d %s", code, body)
	}
	h.b.orders[v0.SectorID{SpID: 1000, Number: 3}] = order{partner: "a", proof: 5, state: v0.StateComplete}
	code, body = h.post("status", v0.SectorRequest{PartnerToken: tokenA, SpID: 1000, SectorNumber: 3})
	// Curio's client reads ticket_value as base64 of 32 bytes.
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil || code != http.StatusOK || raw["state"] != "complete" || raw["tree_d_cid"] == nil ||
		raw["ticket_value"] != base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)) || raw["ticket_epoch"] != float64(100) {
		t.Errorf("complete status: %d %s", code, body)
	}
	if code, body := h.post("commit1", v0.Commit1Request{PartnerToken: tokenA, SpID: 1000, SectorNumber: 3, SeedValue: seed[:5]}); code != http.StatusBadRequest || !strings.Contains(string(body), "seed_value must be 32 bytes") {
		t.Errorf("short seed: %d %s", code, body)
	}
	resp, err := http.Post(h.url+v0.BasePath+"commit1", "application/json",
		strings.NewReader(fmt.Sprintf(`{"partner_token":%q,"sp_id":1000,"sector_number":3,"seed_value":%q}`, tokenA, base64.StdEncoding.EncodeToString(seed))))
	if err != nil {
		t.Fatal(err)
	}
	c1, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/octet-stream" || !bytes.Equal(c1, append([]byte("c1:"), seed...)) {
		t.Errorf("commit1 (no seed_epoch, as Curio sends it): %d %q", resp.StatusCode, c1)
	}
	if code, _ := h.post("commit1", v0.Commit1Request{PartnerToken: tokenB, SpID: 1000, SectorNumber: 3, SeedValue: seed}); code != http.StatusNotFound {
		t.Errorf("another partner's commit1: %d", code)
	}
	for _, route := range []string{"finalize", "cleanup"} {
		if code, body := h.post(route, v0.SectorRequest{PartnerToken: tokenA, SpID: 1000, SectorNumber: 3}); code != http.StatusOK || len(body) != 0 {
			t.Errorf("%s: %d %q", route, code, body)
		}
	}
	if len(h.b.finalize) != 1 {
		t.Errorf("finalize reached the backend %d times", len(h.b.finalize))
	}
}

// TestSealedDataRedirectsAndResumes: the provider answers with a redirect to the node, and a
// Go client (Curio's fallback downloader) resumes there with its Range header; past the end is
// 416, which that downloader takes for "complete".
func TestSealedDataRedirectsAndResumes(t *testing.T) {
	h := newHarness(t)
	h.order(tokenA, "", 4, 5)
	get := func(path, rng string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, h.url+v0.BasePath+path, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(h.url + v0.BasePath + "sealed-data/1000/4?token=" + tokenA)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || !strings.Contains(resp.Header.Get("Location"), "sig=node-credential") {
		t.Fatalf("sealed-data: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	full, body := get("sealed-data/1000/4?token="+tokenA, "")
	if full.StatusCode != http.StatusOK || !bytes.Equal(body, h.sealed) {
		t.Errorf("full download: %d, %d bytes", full.StatusCode, len(body))
	}
	part, body := get("sealed-data/1000/4?token="+tokenA, "bytes=1000-")
	if part.StatusCode != http.StatusPartialContent || !bytes.Equal(body, h.sealed[1000:]) {
		t.Errorf("resumed download: %d, %d bytes", part.StatusCode, len(body))
	}
	past, _ := get("sealed-data/1000/4?token="+tokenA, fmt.Sprintf("bytes=%d-", len(h.sealed)))
	if past.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("range past the end: %d", past.StatusCode)
	}
	for path, want := range map[string]int{
		"sealed-data/1000/4":                  http.StatusUnauthorized,
		"sealed-data/1000/4?token=" + tokenB:  http.StatusNotFound,
		"sealed-data/x/4?token=" + tokenA:     http.StatusBadRequest,
		"sealed-data/1000/-4?token=" + tokenA: http.StatusBadRequest,
		"cache-data/1000/4?token=" + tokenA:   http.StatusNotFound,
		"nothing-here":                        http.StatusNotFound,
	} {
		if resp, body := get(path, ""); resp.StatusCode != want {
			t.Errorf("GET %s: %d %s, want %d", path, resp.StatusCode, body, want)
		}
	}
	resp, err = http.Post(h.url+v0.BasePath+"sealed-data/1000/4?token="+tokenA, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST sealed-data: %d", resp.StatusCode)
	}
}

// TestInternalErrorsHideDetails: a backend failure is a 500 "internal error" to the client and
// reported to the provider with its route.
func TestInternalErrorsHideDetails(t *testing.T) {
	h := newHarness(t)
	h.b.fail = errors.New("etcd is on fire")
	code, body := h.post("status", v0.SectorRequest{PartnerToken: tokenA, SpID: 1000, SectorNumber: 1})
	if code != http.StatusInternalServerError || strings.Contains(string(body), "etcd") {
		t.Errorf("status with a failing backend: %d %s", code, body)
	}
	if len(h.errs) != 1 || !strings.Contains(h.errs[0], "status: etcd is on fire") {
		t.Errorf("reported errors %v", h.errs)
	}
	for _, e := range h.errs {
		if strings.Contains(e, tokenA) {
			t.Errorf("a token reached the error report: %s", e)
		}
	}
}

func TestProofTable(t *testing.T) {
	for n, want := range map[int]string{0: "StackedDrg2KiBV1", 5: "StackedDrg2KiBV1_1", 6: "StackedDrg8MiBV1_1", 8: "StackedDrg32GiBV1_1",
		9: "StackedDrg64GiBV1_1", 10: "StackedDrg2KiBV1_1_Feat_SyntheticPoRep", 13: "StackedDrg32GiBV1_1_Feat_SyntheticPoRep", 18: "StackedDrg32GiBV1_2_Feat_NonInteractivePoRep"} {
		size, proof, err := v0.ProofOf(n)
		if err != nil || sealv1.RegisteredProof(size, proof) != want || v0.RegisteredSealProof(size, proof) != n {
			t.Errorf("%d: %s %s %v, want %s", n, size, proof, err, want)
		}
	}
	for _, n := range []int{-1, 20, 1000} {
		if _, _, err := v0.ProofOf(n); err == nil {
			t.Errorf("%d decoded", n)
		}
	}
}

func TestConnectString(t *testing.T) {
	s := v0.ConnectString("https://seal.example.com", tokenA)
	raw, _ := base64.StdEncoding.DecodeString(s)
	if string(raw) != `{"url":"https://seal.example.com","token":"`+tokenA+`"}` {
		t.Errorf("connect string payload %s", raw)
	}
	u, tok, err := v0.ParseConnectString(s)
	if err != nil || u != "https://seal.example.com" || tok != tokenA {
		t.Errorf("round trip: %s %s %v", u, tok, err)
	}
	for _, bad := range []string{"%%%", base64.StdEncoding.EncodeToString([]byte(`{"url":""}`)), base64.StdEncoding.EncodeToString([]byte(`[1]`))} {
		if _, _, err := v0.ParseConnectString(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestClientCalls: the ticket and complete calls as Curio's client routes serve them.
func TestClientCalls(t *testing.T) {
	var got v0.CompleteNotification
	client := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/pfx" + v0.BasePath + "ticket":
			switch r.URL.Query().Get("maddr") {
			case "f01000":
				_ = json.NewEncoder(w).Encode(v0.TicketResponse{Ticket: bytes.Repeat([]byte{1}, 32), Epoch: 4242})
			case "f02000":
				_ = json.NewEncoder(w).Encode(v0.TicketResponse{Ticket: []byte{1}, Epoch: 1})
			default:
				http.Error(w, "ticket endpoint not available (no chain API)", http.StatusServiceUnavailable)
			}
		case "/pfx" + v0.BasePath + "complete":
			if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&got) != nil || got.PartnerToken != tokenA {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer client.Close()
	ctx := context.Background()
	tk, err := v0.FetchTicket(ctx, http.DefaultClient, client.URL+"/pfx/", "f01000")
	if err != nil || tk.Epoch != 4242 || len(tk.Ticket) != 32 {
		t.Errorf("ticket: %+v %v", tk, err)
	}
	if _, err := v0.FetchTicket(ctx, http.DefaultClient, client.URL+"/pfx", "f02000"); err == nil || !strings.Contains(err.Error(), "32 bytes") {
		t.Errorf("short ticket: %v", err)
	}
	if _, err := v0.FetchTicket(ctx, http.DefaultClient, client.URL+"/pfx", "f03000"); err == nil || !strings.Contains(err.Error(), "no chain API") {
		t.Errorf("client without a chain: %v", err)
	}
	n := v0.CompleteNotification{PartnerToken: tokenA, SpID: 1000, SectorNumber: 3, TreeDCid: "d", TreeRCid: "r", TicketEpoch: 4242, TicketValue: tk.Ticket}
	if err := v0.NotifyComplete(ctx, http.DefaultClient, client.URL+"/pfx", n); err != nil || got.TreeRCid != "r" || got.TicketEpoch != 4242 {
		t.Errorf("complete: %v %+v", err, got)
	}
	n.PartnerToken = tokenB
	if err := v0.NotifyComplete(ctx, http.DefaultClient, client.URL+"/pfx", n); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("complete refused: %v", err)
	}
}
