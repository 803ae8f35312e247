package plugin

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	v0 "github.com/sealfleet/sealfleet/internal/remoteseal/delegatedv0"
	"github.com/sealfleet/sealfleet/internal/remoteseal/orders"
	"github.com/sealfleet/sealfleet/internal/remoteseal/provider"
)

func testOrder(name, partner string, sector int64, age time.Duration, st sealv1.SealOrderStatus) *sealv1.SealOrder {
	return &sealv1.SealOrder{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(now.Add(-age)), Labels: map[string]string{orders.LabelPartner: partner}},
		Spec:       sealv1.SealOrderSpec{Partner: partner, MinerID: "f01000", SectorNumber: sector, SectorSize: sealv1.SectorSize32GiB, ProofType: sealv1.ProofTypeV1_1},
		Status:     st,
	}
}

// TestOrdersCommand: each order with its state, batch phase, its sector's C1, partner, notice and what the
// partner finished; a failed order's reason; --partner narrows by the partner's label.
func TestOrdersCommand(t *testing.T) {
	b := &sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Name: "rs-f01000-1-x2", Namespace: "ns", Labels: map[string]string{orders.LabelPartner: "alpha"}},
		Status: sealv1.SealBatchStatus{Phase: sealv1.PhaseWaitingForSeeds, Sectors: []sealv1.SectorStatus{{Number: 1, State: "C1Written"}, {Number: 2, State: "Sealed"}}}}
	objs := []client.Object{b,
		testOrder("f01000-1", "alpha", 1, 2*time.Hour, sealv1.SealOrderStatus{State: sealv1.OrderComplete, Batch: b.Name, NotifiedTime: &metav1.Time{Time: now}}),
		testOrder("f01000-2", "alpha", 2, time.Hour, sealv1.SealOrderStatus{State: sealv1.OrderComplete, Batch: b.Name, NotifyAttempts: 3}),
		testOrder("f01000-3", "beta", 3, 30*time.Minute, sealv1.SealOrderStatus{}),
		testOrder("f01000-4", "beta", 4, 10*time.Minute, sealv1.SealOrderStatus{State: sealv1.OrderFailed, Batch: "rs-f01000-4-x1", FailReason: "batch rs-f01000-4-x1 was deleted before the sector was sealed"}),
	}
	objs[2].(*sealv1.SealOrder).Spec.Finalized = true
	objs[2].(*sealv1.SealOrder).Spec.Seed = &sealv1.OrderSeed{Randomness: strings.Repeat("ab", 32)}
	c := fakeClient(objs...)
	out, errOut, code := run(t, c, "", "orders", "-n", "ns", "--no-headers")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := [][]string{
		{"ns", "f01000-1", "alpha", "f01000/1", "StackedDrg32GiBV1_1", "complete", "rs-f01000-1-x2", "WaitingForSeeds", "C1Written", "yes", "-", "120m"},
		{"ns", "f01000-2", "alpha", "f01000/2", "StackedDrg32GiBV1_1", "complete", "rs-f01000-1-x2", "WaitingForSeeds", "seeded", "refused", "3x", "finalize", "60m"},
		{"ns", "f01000-3", "beta", "f01000/3", "StackedDrg32GiBV1_1", "pending", "-", "-", "-", "no", "-", "30m"},
		{"ns", "f01000-4", "beta", "f01000/4", "StackedDrg32GiBV1_1", "failed", "rs-f01000-4-x1", "gone", "-", "no", "-", "10m"},
		{"ns/f01000-4:", "batch", "rs-f01000-4-x1", "was", "deleted", "before", "the", "sector", "was", "sealed"},
	}
	if got := splitRows(out); !reflect.DeepEqual(got, want) {
		t.Errorf("orders:\n%s\nwant rows %q", out, want)
	}
	out, _, code = run(t, c, "", "orders", "--partner", "beta", "-o", "json")
	var rows []OrderRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 || len(rows) != 2 || rows[0].Partner != "beta" || rows[1].Reason == "" {
		t.Errorf("orders --partner beta -o json (exit %d): %v %+v", code, err, rows)
	}
}

// TestConnectString: the partner's connect string from its Secret; a Secret that is no
// partner, or a URL that is none, is refused.
func TestConnectString(t *testing.T) {
	token := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	partner := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "ns", Labels: map[string]string{provider.LabelPartner: "true"}},
		Data: map[string][]byte{provider.KeyToken: []byte(token), provider.KeyURL: []byte("https://alpha.example.com"), provider.KeyMaxSectors: []byte("8")}}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ns"}}
	c := fakeClient(partner, other)
	out, errOut, code := run(t, c, "", "connect-string", "alpha", "--url", "https://seal.example.com")
	u, tok, err := v0.ParseConnectString(strings.TrimSpace(out))
	if code != 0 || err != nil || u != "https://seal.example.com" || tok != token {
		t.Errorf("connect-string (exit %d, %s): %q %q %v", code, errOut, u, tok, err)
	}
	if _, errOut, code := run(t, c, "", "connect-string", "other", "--url", "https://seal.example.com"); code != ExitError || !strings.Contains(errOut, "not a remote-seal partner") {
		t.Errorf("unlabelled Secret: %d %s", code, errOut)
	}
	if _, errOut, code := run(t, c, "", "connect-string", "alpha", "--url", "seal.example.com"); code != ExitError || !strings.Contains(errOut, "--url") {
		t.Errorf("bad url: %d %s", code, errOut)
	}
}
