package controllers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/controllers"
	v0 "github.com/sealfleet/sealfleet/internal/remoteseal/delegatedv0"
	"github.com/sealfleet/sealfleet/internal/remoteseal/provider"
)

const partnerToken = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"

// fakeCurio is a partner's Curio: it answers the ticket route and accepts complete notices
// after refusing the first `refuse` of them.
type fakeCurio struct {
	mu      sync.Mutex
	refuse  int
	noChain bool // the ticket route answers 503, as a Curio without a chain API does
	notices map[int64]v0.CompleteNotification
	tickets int
	maddrs  []string
	srv     *httptest.Server
}

func newFakeCurio(t *testing.T, refuse int) *fakeCurio {
	f := &fakeCurio{refuse: refuse, notices: map[int64]v0.CompleteNotification{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch r.URL.Path {
		case v0.BasePath + "ticket":
			if f.noChain {
				http.Error(w, "ticket endpoint not available (no chain API)", http.StatusServiceUnavailable)
				return
			}
			f.tickets++
			f.maddrs = append(f.maddrs, r.URL.Query().Get("maddr"))
			_ = json.NewEncoder(w).Encode(v0.TicketResponse{Ticket: bytes.Repeat([]byte{byte(f.tickets)}, 32), Epoch: int64(1000 + f.tickets)})
		case v0.BasePath + "complete":
			var n v0.CompleteNotification
			if err := json.NewDecoder(r.Body).Decode(&n); err != nil || n.PartnerToken != partnerToken {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			if f.refuse > 0 {
				f.refuse--
				http.Error(w, "database down", http.StatusInternalServerError)
				return
			}
			f.notices[n.SectorNumber] = n
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// freeAddr is a loopback address free now, for a server the test starts later. The port is
// drawn below Linux's ephemeral range (32768-60999): a port the kernel hands out for outgoing
// connections (this process's clients, other tests') could be taken again before the server
// binds it.
func freeAddr(t *testing.T) string {
	for range 100 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(20000+rand.IntN(12000)))
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	t.Fatal("no free loopback port in 20000-31999")
	return ""
}

// remoteSealHarness runs the operator with the remote-seal provider on a free loopback
// port, partner "alpha" calling back to curio, and one node; post calls the provider.
func remoteSealHarness(t *testing.T, curio *fakeCurio, maxBatch int, commit1Hold ...time.Duration) (*harness, func(route string, in, out any) int, string) {
	hold := time.Second // commit1 held this long for its C1 output, then 412
	if len(commit1Hold) > 0 {
		hold = commit1Hold[0]
	}
	addr := freeAddr(t)
	h := newHarnessWith(t, func(h *harness) {
		h.namespace("partners")
		h.namespace("orders")
		h.remote = controllers.RemoteSealOptions{Listen: addr, Insecure: true, PartnerNamespace: "partners", OrderNamespace: "orders",
			MinerPrefix: "f0", MaxBatch: maxBatch, MaxWait: time.Hour, OutputPath: "/var/lib/sealfleet/output", DataKeySecret: "data-key", URLTTL: time.Hour,
			CleanupAfter: 3 * time.Second, PartnerCommit1Wait: hold}
		if err := h.c.Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "partners", Labels: map[string]string{provider.LabelPartner: "true"}},
			Data:       map[string][]byte{provider.KeyToken: []byte(partnerToken), provider.KeyURL: []byte(curio.srv.URL), provider.KeyMaxSectors: []byte("4")},
		}); err != nil {
			t.Fatal(err)
		}
	})
	h.addNode("node-r", 1, 8, nil)
	base := "http://" + addr + v0.BasePath
	post := func(route string, in, out any) int {
		raw, _ := json.Marshal(in)
		resp, err := http.Post(base+route, "application/json", bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if out != nil && resp.StatusCode == 200 {
			if err := json.Unmarshal(body, out); err != nil {
				t.Fatalf("%s: %v %s", route, err, body)
			}
		}
		return resp.StatusCode
	}
	h.eventually("the provider serving", func() (bool, string) {
		resp, err := http.Get(base + "capabilities")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200, fmt.Sprint(err)
	})
	return h, post, base
}

// TestOrdersBecomeBatches: a partner's two orders (through the provider's HTTP server) wait
// for each other, then form one batch sealed with tickets from the partner's chain; the
// orders follow the batch (sdr, complete with CIDs); the seeds sent with commit1 reach the
// batch's C1; the partner is told of completion, retried after it refuses once.
func TestOrdersBecomeBatches(t *testing.T) {
	curio := newFakeCurio(t, 1)
	h, post, base := remoteSealHarness(t, curio, 2, time.Minute)
	ctx := context.Background()
	var key corev1.Secret
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "partners", Name: "data-key"}, &key); err != nil || len(key.Data["key"]) != 32 {
		t.Errorf("sector data signing key: %v", err)
	}

	order := func(sector int64) {
		var av v0.AvailableResponse
		if code := post("available", v0.AuthorizeRequest{PartnerToken: partnerToken}, &av); code != 200 || !av.Available {
			t.Fatalf("available: %d %+v", code, av)
		}
		var o v0.OrderResponse
		if code := post("order", v0.OrderRequest{PartnerToken: partnerToken, SlotToken: av.SlotToken, SpID: 1000, SectorNumber: sector, RegSealProof: 5}, &o); code != 200 || !o.Accepted {
			t.Fatalf("order %d: %d %+v", sector, code, o)
		}
	}
	order(21)
	time.Sleep(time.Second)
	if n := len(h.batchesIn("orders")); n != 0 {
		t.Fatalf("a batch of one formed before the second order or the wait: %d", n)
	}
	order(22)
	var b *sealv1.SealBatch
	h.eventually("a batch of both orders", func() (bool, string) {
		bs := h.batchesIn("orders")
		if len(bs) == 1 {
			b = &bs[0]
		}
		return len(bs) == 1, fmt.Sprint(len(bs))
	})
	if b.Name != "rs-f01000-21-x2" || b.Spec.Commit1 != sealv1.Commit1FromSlot || len(b.Spec.Sectors) != 2 ||
		b.Spec.Sectors[0].Ticket != strings.Repeat("01", 32) || b.Spec.Sectors[1].Ticket != strings.Repeat("02", 32) {
		t.Errorf("batch %s: %+v", b.Name, b.Spec)
	}
	if strings.Join(curio.maddrs, ",") != "f01000,f01000" {
		t.Errorf("tickets drawn for %v", curio.maddrs)
	}
	status := func(sector int64) v0.StatusResponse {
		var s v0.StatusResponse
		if code := post("status", v0.SectorRequest{PartnerToken: partnerToken, SpID: 1000, SectorNumber: sector}, &s); code != 200 {
			t.Fatalf("status: %d", code)
		}
		return s
	}
	pod := h.waitPod("orders", b.Name+"-sealer-1")
	h.setPod(pod, corev1.PodRunning, 0, "")
	h.waitPhase("orders", b.Name, sealv1.PhasePC1)
	h.eventually("sdr", func() (bool, string) { s := status(21); return s.State == v0.StateSDR, s.State + " " + s.FailReason })
	h.setPod(pod, corev1.PodSucceeded, 0, results(b))
	h.waitPhase("orders", b.Name, sealv1.PhaseWaitingForSeeds)
	var s21 v0.StatusResponse
	h.eventually("complete", func() (bool, string) { s21 = status(21); return s21.State == v0.StateComplete, s21.State })
	if !strings.HasPrefix(s21.TreeRCid, "bagboea4b5abc") || !strings.HasPrefix(s21.TreeDCid, "baga6ea4seaq") || s21.TicketEpoch != 1001 {
		t.Errorf("complete status %+v", s21)
	}
	h.eventuallyWithin(2*time.Minute, "complete notices for both sectors (one refused, then a 30 s back-off)", func() (bool, string) {
		curio.mu.Lock()
		defer curio.mu.Unlock()
		return len(curio.notices) == 2, fmt.Sprint(len(curio.notices))
	})
	attempts := int32(0)
	for _, name := range []string{"f01000-21", "f01000-22"} {
		var so sealv1.SealOrder
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "orders", Name: name}, &so); err != nil {
			t.Fatal(err)
		}
		h.eventually(name+" notified", func() (bool, string) {
			_ = h.c.Get(ctx, client.ObjectKey{Namespace: "orders", Name: name}, &so)
			return so.Status.NotifiedTime != nil, fmt.Sprint(so.Status)
		})
		attempts += so.Status.NotifyAttempts
	}
	if attempts != 1 {
		t.Errorf("refused notices recorded: %d, want 1", attempts)
	}
	if n := curio.notices[21]; n.TicketEpoch < 1001 || len(n.TicketValue) != 32 || n.TreeRCid == "" || n.SpID != 1000 {
		t.Errorf("notice of sector 21: %+v", n)
	}
	if !h.hasEvent("orders", b.Name, "PartnerNotifyFailed", "partner alpha") || !h.hasEvent("orders", b.Name, "FormedFromOrders", "partner alpha ordered sectors 21,22") {
		t.Errorf("events on the batch naming the partner missing")
	}

	// Metrics: orders by partner and state, requests by route and code, order-to-complete.
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			lbl := ""
			for _, l := range m.GetLabel() {
				lbl += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.GetGauge() != nil:
				seen[f.GetName()+lbl] += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				seen[f.GetName()+lbl] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	if seen["sealfleet_remote_seal_orders,partner=alpha,state=complete"] != 2 || seen["sealfleet_remote_seal_request_seconds,code=200,route=order"] < 2 ||
		seen["sealfleet_remote_seal_order_complete_seconds"] < 2 {
		t.Errorf("remote-seal metrics: orders %v, order requests %v, complete %v", seen["sealfleet_remote_seal_orders,partner=alpha,state=complete"],
			seen["sealfleet_remote_seal_request_seconds,code=200,route=order"], seen["sealfleet_remote_seal_order_complete_seconds"])
	}

	// commit1 of sector 21 alone: its seed reaches the batch, whose C1 runs for it at once
	// while sector 22 has no seed; the call is held until the output is written, then
	// redirected to it.
	commit1 := func(n int64) chan int {
		answer := make(chan int, 1)
		go func() {
			raw, _ := json.Marshal(v0.Commit1Request{PartnerToken: partnerToken, SpID: 1000, SectorNumber: n, SeedValue: bytes.Repeat([]byte{byte(n)}, 32)})
			noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := noFollow.Post(base+"commit1", "application/json", bytes.NewReader(raw))
			if err != nil {
				answer <- 0
				return
			}
			resp.Body.Close()
			answer <- resp.StatusCode
		}()
		return answer
	}
	h.serveSectorData("node-r", "http://10.0.0.9:9470")
	answer21 := commit1(21)
	c1 := h.waitPod("orders", b.Name+"-c1-1")
	if s := c1.Annotations["sealfleet.io/c1-sectors"]; s != "21" {
		t.Errorf("C1 run 1 for sectors %q, want 21 alone", s)
	}
	got := h.batch("orders", b.Name)
	if len(got.Spec.Seeds) != 1 || got.Spec.Seeds[0].Randomness != strings.Repeat("15", 32) {
		t.Errorf("batch seeds %+v", got.Spec.Seeds)
	}
	h.setPod(c1, corev1.PodSucceeded, 0, c1Results(21))
	if code := <-answer21; code != http.StatusTemporaryRedirect {
		t.Errorf("held commit1 of 21: %d, want a redirect to its C1 output", code)
	}
	got = h.batch("orders", b.Name)
	if got.Status.Phase != sealv1.PhaseWaitingForSeeds || got.Status.Sectors[0].State != "C1Written" || got.Status.Sectors[1].State == "C1Written" {
		t.Errorf("after 21's C1: phase %s, sectors %+v", got.Status.Phase, got.Status.Sectors)
	}
	// Sector 21 is done: its partner finalizes and cleans it up while 22 still waits, and
	// its outputs go at once (C1 of 22 writes only 22's cache).
	for _, route := range []string{"finalize", "cleanup"} {
		if code := post(route, v0.SectorRequest{PartnerToken: partnerToken, SpID: 1000, SectorNumber: 21}, nil); code != 200 {
			t.Errorf("%s: %d", route, code)
		}
	}
	h.eventually("sector 21's output cleanup while 22 waits", func() (bool, string) {
		return len(h.podsLabelled(scrubNS, "sealfleet.io/order=f01000-21")) == 1, h.batch("orders", b.Name).Status.Message
	})
	if got := h.batch("orders", b.Name); got.Status.Phase != sealv1.PhaseWaitingForSeeds || len(got.Spec.AbandonedSectors) != 0 {
		t.Errorf("batch after 21's cleanup: %s, abandoned %v", got.Status.Phase, got.Spec.AbandonedSectors)
	}
	answer22 := commit1(22)
	c1 = h.waitPod("orders", b.Name+"-c1-2")
	h.setPod(c1, corev1.PodSucceeded, 0, c1Results(22))
	if code := <-answer22; code != http.StatusTemporaryRedirect {
		t.Errorf("held commit1 of 22: %d", code)
	}
	h.waitPhase("orders", b.Name, sealv1.PhaseCompleted)
	h.eventually("C1 time recorded", func() (bool, string) {
		var so sealv1.SealOrder
		err := h.c.Get(ctx, client.ObjectKey{Namespace: "orders", Name: "f01000-21"}, &so)
		return err == nil && so.Status.SeedTime != nil && so.Status.C1Time != nil, fmt.Sprint(err, so.Status)
	})

	// Sector 21: its partner called cleanup; sector 22: the partner never did, and
	// CleanupAfter (3 s here) passed. Each gets a pod deleting its replica and cache on the node.
	for _, n := range []int64{21, 22} {
		name := fmt.Sprintf("f01000-%d", n)
		var pod *corev1.Pod
		h.eventually("output cleanup of "+name, func() (bool, string) {
			pods := h.podsLabelled(scrubNS, "sealfleet.io/order="+name)
			if len(pods) == 1 {
				pod = &pods[0]
			}
			return pod != nil, fmt.Sprint(len(pods))
		})
		args := strings.Join(pod.Spec.Containers[0].Args, " ")
		want := fmt.Sprintf("remove-outputs --root /output orders/%[1]s/sealed/s-t01000-%[2]d orders/%[1]s/cache/s-t01000-%[2]d", b.Name, n)
		if args != want || pod.Spec.Volumes[0].HostPath.Path != "/var/lib/sealfleet/output" {
			t.Errorf("cleanup pod: %s on %s, want %s", args, pod.Spec.Volumes[0].HostPath.Path, want)
		}
		h.setPod(pod, corev1.PodSucceeded, 0, "")
		h.eventually(name+" gone", func() (bool, string) { s := status(n); return s.State == v0.StateGone, s.State })
	}
	if !h.hasEvent("orders", b.Name, "OutputCleanup", "did not call cleanup within 3s") {
		t.Error("no event for the cleanup timeout")
	}
	h.eventually("the batch deleted with its last order", func() (bool, string) {
		return len(h.batchesIn("orders")) == 0, fmt.Sprint(len(h.batchesIn("orders")))
	})
}

func (h *harness) podsLabelled(ns, selector string) []corev1.Pod {
	sel, err := labels.Parse(selector)
	if err != nil {
		h.t.Fatal(err)
	}
	var l corev1.PodList
	if err := h.c.List(context.Background(), &l, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		h.t.Fatal(err)
	}
	return l.Items
}

func (h *harness) batchesIn(ns string) []sealv1.SealBatch {
	var l sealv1.SealBatchList
	if err := h.c.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		h.t.Fatal(err)
	}
	return l.Items
}

// TestOrderFailsWhenItsNodeIsRemoved: a complete sector whose node leaves the cluster takes
// its replica along: the order fails with the reason (the partner stops asking), and its data
// is no longer offered.
func TestOrderFailsWhenItsNodeIsRemoved(t *testing.T) {
	curio := newFakeCurio(t, 0)
	h, post, base := remoteSealHarness(t, curio, 1)
	ctx := context.Background()
	var o v0.OrderResponse
	if code := post("order", v0.OrderRequest{PartnerToken: partnerToken, SpID: 1000, SectorNumber: 31, RegSealProof: 5}, &o); code != 200 || !o.Accepted {
		t.Fatalf("order: %d %+v", code, o)
	}
	var b *sealv1.SealBatch
	h.eventually("a batch", func() (bool, string) {
		bs := h.batchesIn("orders")
		if len(bs) == 1 {
			b = &bs[0]
		}
		return b != nil, ""
	})
	pod := h.waitPod("orders", b.Name+"-sealer-1")
	h.setPod(pod, corev1.PodSucceeded, 0, results(b))
	status := func() v0.StatusResponse {
		var s v0.StatusResponse
		post("status", v0.SectorRequest{PartnerToken: partnerToken, SpID: 1000, SectorNumber: 31}, &s)
		return s
	}
	h.eventually("complete", func() (bool, string) { s := status(); return s.State == v0.StateComplete, s.State })
	// C1 runs with the partner's seed and the batch completes (its slot released): the
	// outputs alone are left on the node.
	post("commit1", v0.Commit1Request{PartnerToken: partnerToken, SpID: 1000, SectorNumber: 31, SeedValue: bytes.Repeat([]byte{7}, 32)}, nil)
	h.setPod(h.waitPod("orders", b.Name+"-c1-1"), corev1.PodSucceeded, 0, c1Results(31))
	h.waitPhase("orders", b.Name, sealv1.PhaseCompleted)
	if err := h.c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-r"}}); err != nil {
		t.Fatal(err)
	}
	var s v0.StatusResponse
	h.eventually("failed", func() (bool, string) { s = status(); return s.State == v0.StateFailed, s.State })
	if !strings.Contains(s.FailReason, "node node-r, which held the sector's replica and cache, was removed from the cluster") {
		t.Errorf("reason %q", s.FailReason)
	}
	resp, err := http.Get(base + "sealed-data/1000/31?token=" + partnerToken)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("sealed-data of a sector on a removed node: %d", resp.StatusCode)
	}
}

// TestOrderWaitsForItsTicket: a partner that gives no ticket (its Curio has no chain API)
// leaves the order queued with a warning naming the partner and the reason, and is asked
// again; once it answers, the batch is formed with its ticket.
func TestOrderWaitsForItsTicket(t *testing.T) {
	curio := newFakeCurio(t, 0)
	curio.noChain = true
	h, post, _ := remoteSealHarness(t, curio, 1)
	var o v0.OrderResponse
	if code := post("order", v0.OrderRequest{PartnerToken: partnerToken, SpID: 1000, SectorNumber: 41, RegSealProof: 5}, &o); code != 200 || !o.Accepted {
		t.Fatalf("order: %d %+v", code, o)
	}
	h.eventually("a TicketFailed warning", func() (bool, string) {
		return h.hasEvent("orders", "f01000-41", "TicketFailed", "partner alpha: ticket from"), ""
	})
	if n := len(h.batchesIn("orders")); n != 0 {
		t.Fatalf("a batch formed without a ticket: %d", n)
	}
	curio.mu.Lock()
	curio.noChain = false
	curio.mu.Unlock()
	h.eventuallyWithin(time.Minute, "the batch once the partner gives a ticket", func() (bool, string) {
		bs := h.batchesIn("orders")
		return len(bs) == 1 && bs[0].Spec.Sectors[0].Ticket == strings.Repeat("01", 32), fmt.Sprint(len(bs))
	})
}

// TestOrdersFormAsLargeAsAFreeNodeTakes: with room for more in maxBatch, four 8 MiB orders
// form a batch at once because the one free node's slot takes no more than four; a fifth,
// ordered while that batch holds the node, waits (no batch of one) instead of drawing a
// ticket that would age in the queue.
func TestOrdersFormAsLargeAsAFreeNodeTakes(t *testing.T) {
	curio := newFakeCurio(t, 0)
	h, post, _ := remoteSealHarness(t, curio, 8)
	ctx := context.Background()
	var partner corev1.Secret
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "partners", Name: "alpha"}, &partner); err != nil {
		t.Fatal(err)
	}
	partner.Data[provider.KeyMaxSectors] = []byte("8")
	if err := h.c.Update(ctx, &partner); err != nil {
		t.Fatal(err)
	}
	order := func(sector int64) {
		var o v0.OrderResponse
		if code := post("order", v0.OrderRequest{PartnerToken: partnerToken, SpID: 1000, SectorNumber: sector, RegSealProof: 6}, &o); code != 200 || !o.Accepted {
			t.Fatalf("order %d: %d %+v", sector, code, o)
		}
	}
	for n := int64(31); n <= 34; n++ {
		order(n)
	}
	h.eventually("a batch of the four orders (the most the node's 64 MiB slot takes at 8 MiB)", func() (bool, string) {
		bs := h.batchesIn("orders")
		return len(bs) == 1 && len(bs[0].Spec.Sectors) == 4, fmt.Sprint(len(bs))
	})
	order(35)
	time.Sleep(3 * time.Second)
	if bs := h.batchesIn("orders"); len(bs) != 1 {
		t.Fatalf("a batch formed for the fifth order while the only node is taken: %d batches", len(bs))
	}
	curio.mu.Lock()
	defer curio.mu.Unlock()
	if curio.tickets != 4 {
		t.Errorf("tickets drawn: %d, want 4 (none for the waiting order)", curio.tickets)
	}
}

// TestSyntheticOrderC1OnCommit1: a SyntheticPoRep order seals into a batch that completes (and
// gives its slot back) once its synthetic proofs are written; the partner's commit1 brings the
// seed, and a C1 pod on the node (one CPU, no slot, hugepages or layer devices) writes the C1
// output from the stored proofs; commit1 then redirects to the node. A second run that fails
// for good gives the sector up, and commit1 says why.
func TestSyntheticOrderC1OnCommit1(t *testing.T) {
	curio := newFakeCurio(t, 0)
	h, post, base := remoteSealHarness(t, curio, 1)
	h.addNode("node-s", 1, 8, nil) // the second batch's: node-r is taken by the first
	ctx := context.Background()
	h.serveSectorData("node-r", "http://10.0.0.9:9470")
	for _, n := range []int64{51, 52} {
		var o v0.OrderResponse
		if code := post("order", v0.OrderRequest{PartnerToken: partnerToken, SpID: 1000, SectorNumber: n, RegSealProof: 10}, &o); code != 200 || !o.Accepted {
			t.Fatalf("SyntheticPoRep order %d: %d %+v", n, code, o)
		}
	}
	var b, b2 *sealv1.SealBatch
	h.eventually("a batch per order (maxBatch 1)", func() (bool, string) {
		b, b2 = h.batch("orders", "rs-f01000-51-x1"), h.batch("orders", "rs-f01000-52-x1")
		return b != nil && b2 != nil, fmt.Sprint(len(h.batchesIn("orders")))
	})
	for _, x := range []*sealv1.SealBatch{b, b2} {
		if x.Spec.ProofType != sealv1.ProofTypeSyntheticPoRep || x.Spec.FromSlot() {
			t.Fatalf("batch %s: proof %s commit1 %q", x.Name, x.Spec.ProofType, x.Spec.Commit1)
		}
		pod := h.waitPod("orders", x.Name+"-sealer-1")
		h.setPod(pod, corev1.PodSucceeded, 0, results(x))
		h.waitPhase("orders", x.Name, sealv1.PhaseCompleted)
	}
	commit1 := func(n int64) (int, string) {
		raw, _ := json.Marshal(v0.Commit1Request{PartnerToken: partnerToken, SpID: 1000, SectorNumber: n, SeedValue: bytes.Repeat([]byte{byte(n)}, 32)})
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noFollow.Post(base+"commit1", "application/json", bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location") + string(body)
	}
	if code, body := commit1(51); code != http.StatusPreconditionFailed {
		t.Fatalf("commit1 before C1: %d %s", code, body)
	}
	c1 := h.waitPod("orders", b.Name+"-c1-1")
	c := c1.Spec.Containers[0]
	if args := strings.Join(append(c.Command, c.Args...), " "); !strings.Contains(args, "c1 --config") || c.Resources.Requests.Cpu().Value() != 1 {
		t.Errorf("C1 pod: %s, %v CPUs", args, c.Resources.Requests.Cpu())
	}
	for _, v := range c1.Spec.Volumes {
		if strings.HasPrefix(v.Name, "layer-") || v.Name == "hugepages" || v.Name == "parent-cache" {
			t.Errorf("C1 from synthetic proofs mounts %s", v.Name)
		}
	}
	var seeds corev1.ConfigMap
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: c1.Namespace, Name: b.Name + "-c1-seeds"}, &seeds); err != nil ||
		!strings.Contains(seeds.Data["seeds.json"], `"sector_id":51`) || !strings.Contains(seeds.Data["seeds.json"], strings.Repeat("33", 32)) {
		t.Errorf("seeds ConfigMap: %v %v", err, seeds.Data)
	}
	h.setPod(c1, corev1.PodSucceeded, 0, c1Results(51))
	h.eventually("sector 51 C1Written", func() (bool, string) {
		got := h.batch("orders", b.Name)
		return got.Status.Sectors[0].State == "C1Written", got.Status.Sectors[0].State
	})
	if got := h.batch("orders", b.Name); got.Status.Node != "node-r" {
		t.Fatalf("batch %s placed on %s, want node-r", b.Name, got.Status.Node)
	}
	if code, loc := commit1(51); code != http.StatusTemporaryRedirect || !strings.HasPrefix(loc, "http://10.0.0.9:9470/") {
		t.Errorf("commit1 after C1: %d %s", code, loc)
	}

	// Sector 52: its C1 pod fails with a code that will not pass (its proofs are unreadable).
	if code, _ := commit1(52); code != http.StatusPreconditionFailed {
		t.Errorf("commit1 of 52 before its C1: %d", code)
	}
	failed := h.waitPod("orders", b2.Name+"-c1-1")
	h.setPod(failed, corev1.PodFailed, 2, "sector 52: no synthetic proofs in its cache directory")
	h.eventually("sector 52 C1Failed", func() (bool, string) {
		got := h.batch("orders", b2.Name)
		return got.Status.Sectors[0].State == "C1Failed", got.Status.Sectors[0].State + " " + got.Status.Message
	})
	if code, body := commit1(52); code == http.StatusTemporaryRedirect || code == http.StatusPreconditionFailed || !strings.Contains(body, "no C1 output for sectors 52") {
		t.Errorf("commit1 of a sector whose C1 failed: %d %s", code, body)
	}
}
