package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	v0 "github.com/sealfleet/sealfleet/internal/remoteseal/delegatedv0"
	"github.com/sealfleet/sealfleet/internal/remoteseal/orders"
	"github.com/sealfleet/sealfleet/internal/remoteseal/provider"
	"github.com/sealfleet/sealfleet/internal/testenv"
)

const (
	tokenA = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
	tokenB = "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"
)

// orderlessCache is a cache that has not seen any SealOrder yet.
type orderlessCache struct{ client.Client }

func (c orderlessCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*sealv1.SealOrder); ok {
		return apierrors.NewNotFound(sealv1.GroupVersion.WithResource("sealorders").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func partnerSecret(name, token, maxSectors, proofs string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "sealfleet-system", Labels: map[string]string{provider.LabelPartner: "true"}},
		Data: map[string][]byte{provider.KeyToken: []byte(token), provider.KeyURL: []byte("https://" + name + ".example.com"),
			provider.KeyMaxSectors: []byte(maxSectors), provider.KeyProofTypes: []byte(proofs)},
	}
}

type client0 struct {
	t   *testing.T
	url string
}

// call posts JSON as Curio's client does and decodes a 200's body into out.
func (c client0) call(route string, in, out any) int {
	c.t.Helper()
	raw, _ := json.Marshal(in)
	resp, err := http.Post(c.url+v0.BasePath+route, "application/json", bytes.NewReader(raw))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			c.t.Fatalf("%s: %v: %s", route, err, body)
		}
	}
	return resp.StatusCode
}

func (c client0) order(token, slot string, sector int64, proof int) v0.OrderResponse {
	c.t.Helper()
	var o v0.OrderResponse
	if code := c.call("order", v0.OrderRequest{PartnerToken: token, SlotToken: slot, SpID: 1000, SectorNumber: sector, RegSealProof: proof}, &o); code != http.StatusOK {
		c.t.Fatalf("order: %d", code)
	}
	return o
}

func (c client0) status(token string, sector int64) v0.StatusResponse {
	c.t.Helper()
	var s v0.StatusResponse
	if code := c.call("status", v0.SectorRequest{PartnerToken: token, SpID: 1000, SectorNumber: sector}, &s); code != http.StatusOK {
		c.t.Fatalf("status: %d", code)
	}
	return s
}

// TestProviderOnAPIServer drives the protocol server over the Kubernetes backend: partners
// from Secrets (a broken one reported, never authenticating), orders as SealOrders
// (idempotent, one partner per sector, refused for proof types the partner may not order or
// sealfleet does not seal, or a sector another batch seals, within maxSectors), the status
// from the order's batch, commit1's seed recorded once, finalize and cleanup as marks.
func TestProviderOnAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c := env.Client
	for _, ns := range []string{"sealfleet-system", "sealfleet-batches"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	broken := partnerSecret("broken", "short", "1", "")
	for _, s := range []*corev1.Secret{partnerSecret("alpha", tokenA, "3", "5,6,10"), partnerSecret("beta", tokenB, "1", ""), broken} {
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	var problems []string
	b := &provider.Backend{Client: c, Namespace: "sealfleet-system", OrderNamespace: "sealfleet-batches", MinerPrefix: "f0",
		Problem: func(err error) { problems = append(problems, err.Error()) }}
	ts := httptest.NewServer((&v0.Server{Backend: b}).Handler())
	defer ts.Close()
	cl := client0{t: t, url: ts.URL}

	var auth v0.AuthorizeResponse
	cl.call("authorize", v0.AuthorizeRequest{PartnerToken: tokenA}, &auth)
	if !auth.Authorized || auth.PartnerName != "alpha" || auth.AllowanceRemaining != 3 {
		t.Errorf("authorize alpha: %+v", auth)
	}
	cl.call("authorize", v0.AuthorizeRequest{PartnerToken: "short"}, &auth)
	if auth.Authorized || len(problems) == 0 || !strings.Contains(problems[0], "data.token must hold the shared token") || strings.Contains(strings.Join(problems, ""), "short") {
		t.Errorf("broken partner: authorized %v, problems %v", auth.Authorized, problems)
	}

	var av v0.AvailableResponse
	cl.call("available", v0.AuthorizeRequest{PartnerToken: tokenA}, &av)
	if o := cl.order(tokenA, av.SlotToken, 7, 5); !o.Accepted {
		t.Fatalf("order: %+v", o)
	}
	var so sealv1.SealOrder
	if err := c.Get(ctx, client.ObjectKey{Namespace: "sealfleet-batches", Name: "f01000-7"}, &so); err != nil || so.Spec.Partner != "alpha" ||
		so.Spec.SectorSize != sealv1.SectorSize2KiB || so.Spec.ProofType != sealv1.ProofTypeV1_1 || so.Labels[orders.LabelPartner] != "alpha" {
		t.Fatalf("SealOrder: %v %+v", err, so)
	}
	for _, tc := range []struct {
		token  string
		sector int64
		proof  int
		want   string
	}{
		{tokenA, 7, 5, ""}, // a repeat (Curio retries its delegate task)
		{tokenA, 7, 6, "already ordered as StackedDrg2KiBV1_1"},
		{tokenB, 7, 5, "already ordered by another partner"},
		{tokenA, 8, 7, "proof type 7 not allowed for this partner"},
		{tokenA, 8, 11, "proof type 11 not allowed for this partner"}, // SyntheticPoRep 8 MiB is taken, not by alpha's Secret
		{tokenB, 8, 15, "not taken for delegated orders"},             // NI-PoRep
		{tokenB, 8, 0, "not taken for delegated orders"},              // V1
	} {
		o := cl.order(tc.token, "", tc.sector, tc.proof)
		if tc.want == "" && !o.Accepted || tc.want != "" && (o.Accepted || !strings.Contains(o.RejectReason, tc.want)) {
			t.Errorf("order %d proof %d: %+v, want %q", tc.sector, tc.proof, o, tc.want)
		}
	}
	other := &sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: "default"}, Spec: sealv1.SealBatchSpec{
		SectorSize: sealv1.SectorSize2KiB, MinerID: "t01000", Sectors: []sealv1.SectorSpec{{Number: 9, Ticket: strings.Repeat("ab", 32)}}}}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	if o := cl.order(tokenB, "", 9, 5); o.Accepted || !strings.Contains(o.RejectReason, "already sealed by batch default/by-hand") {
		t.Errorf("a sector another batch seals: %+v", o)
	}
	if o := cl.order(tokenB, "", 10, 5); !o.Accepted {
		t.Errorf("beta's first order: %+v", o)
	}
	if o := cl.order(tokenB, "", 11, 5); o.Accepted || !strings.Contains(o.RejectReason, "no capacity: 1 of 1") {
		t.Errorf("beyond maxSectors: %+v", o)
	}
	cl.call("available", v0.AuthorizeRequest{PartnerToken: tokenB}, &av)
	if av.Available {
		t.Errorf("beta has a slot at maxSectors: %+v", av)
	}

	if s := cl.status(tokenA, 7); s.State != v0.StatePending {
		t.Errorf("queued order: %+v", s)
	}
	// A cache that has not seen the order yet (the manager's, a moment after the delegate
	// call): the status reads it from the API server, never as gone.
	lagging := &provider.Backend{Client: orderlessCache{c}, Fresh: c, Namespace: "sealfleet-system", OrderNamespace: "sealfleet-batches", MinerPrefix: "f0"}
	lts := httptest.NewServer((&v0.Server{Backend: lagging}).Handler())
	defer lts.Close()
	if s := (client0{t: t, url: lts.URL}).status(tokenA, 7); s.State != v0.StatePending {
		t.Errorf("queued order behind a lagging cache: %+v", s)
	}
	if s := cl.status(tokenB, 7); s.State != v0.StateGone {
		t.Errorf("another partner's sector: %+v", s)
	}
	seed := bytes.Repeat([]byte{3}, 32)
	if code := cl.call("commit1", v0.Commit1Request{PartnerToken: tokenA, SpID: 1000, SectorNumber: 7, SeedValue: seed}, nil); code != http.StatusPreconditionFailed {
		t.Errorf("commit1 before the trees: %d", code)
	}

	// The order's batch seals it: the status follows, with the CIDs and the ticket.
	so.Status = sealv1.SealOrderStatus{Batch: "rs-f01000-7-x1", Ticket: &sealv1.OrderTicket{Randomness: strings.Repeat("0c", 32), Epoch: 4242, FetchTime: metav1.Now()}}
	if err := c.Status().Update(ctx, &so); err != nil {
		t.Fatal(err)
	}
	sb, err := orders.Batch("sealfleet-batches", sealv1.OutputSpec{HostPath: &sealv1.HostPathOutput{Path: "/var/lib/sealfleet/output"}}, []*sealv1.SealOrder{&so})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	sb.Status.Phase = sealv1.PhaseWaitingForSeeds
	sb.Status.Sectors = []sealv1.SectorStatus{{Number: 7, CommDCID: "baga6ea4seaqd", CommRCID: "bagboea4b5abc"}}
	if err := c.Status().Update(ctx, sb); err != nil {
		t.Fatal(err)
	}
	s := cl.status(tokenA, 7)
	if s.State != v0.StateComplete || s.TreeDCid != "baga6ea4seaqd" || s.TreeRCid != "bagboea4b5abc" || s.TicketEpoch != 4242 || !bytes.Equal(s.TicketValue, bytes.Repeat([]byte{0x0c}, 32)) {
		t.Errorf("complete: %+v", s)
	}
	if code := cl.call("commit1", v0.Commit1Request{PartnerToken: tokenA, SpID: 1000, SectorNumber: 7, SeedValue: seed}, nil); code != http.StatusPreconditionFailed {
		t.Errorf("commit1 before C1 ran: %d", code)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(&so), &so); err != nil || so.Spec.Seed == nil || so.Spec.Seed.Randomness != strings.Repeat("03", 32) {
		t.Errorf("seed not recorded: %v %+v", err, so.Spec.Seed)
	}
	if code := cl.call("commit1", v0.Commit1Request{PartnerToken: tokenA, SpID: 1000, SectorNumber: 7, SeedValue: bytes.Repeat([]byte{4}, 32)}, nil); code != http.StatusConflict {
		t.Errorf("a second, different seed: %d", code)
	}
	sb.Status.Sectors[0].State = "C1Written"
	if err := c.Status().Update(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if code := cl.call("commit1", v0.Commit1Request{PartnerToken: tokenA, SpID: 1000, SectorNumber: 7, SeedValue: seed}, nil); code != http.StatusInternalServerError {
		t.Errorf("commit1 with no node data server: %d (want 500: not served)", code)
	}
	resp, err := http.Get(ts.URL + v0.BasePath + "sealed-data/1000/7?token=" + tokenA)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("sealed-data with no node data server: %d", resp.StatusCode)
	}

	for _, route := range []string{"finalize", "cleanup"} {
		if code := cl.call(route, v0.SectorRequest{PartnerToken: tokenA, SpID: 1000, SectorNumber: 7}, nil); code != http.StatusOK {
			t.Errorf("%s: %d", route, code)
		}
		if code := cl.call(route, v0.SectorRequest{PartnerToken: tokenA, SpID: 1000, SectorNumber: 999}, nil); code != http.StatusOK {
			t.Errorf("%s of an unknown sector: %d", route, code)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(&so), &so); err != nil || !so.Spec.Finalized || !so.Spec.Cleanup {
		t.Errorf("finalize and cleanup not recorded: %v %+v", err, so.Spec)
	}
	cl.call("authorize", v0.AuthorizeRequest{PartnerToken: tokenA}, &auth)
	if auth.AllowanceRemaining != 3 {
		t.Errorf("a cleaned-up order still counts against maxSectors: %+v", auth)
	}
}
