package provider

import (
	"strings"
	"testing"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/remoteseal/lotusreceive"
)

// lotus' commit1 is taken only for the sector sealfleet sealed: its proof, both CIDs, a 32-byte
// seed and the ticket the batch sealed with (hex or base64 in the spec).
func TestCommit1Mismatch(t *testing.T) {
	o := &sealv1.SealOrder{Spec: sealv1.SealOrderSpec{SectorNumber: 9, SectorSize: sealv1.SectorSize8MiB, ProofType: sealv1.ProofTypeV1_1},
		Status: sealv1.SealOrderStatus{CommDCID: "baga-d", CommRCID: "bagboea-r"}}
	b := &sealv1.SealBatch{Spec: sealv1.SealBatchSpec{Sectors: []sealv1.SectorSpec{{Number: 9, Ticket: "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="}}}}
	ticket := make([]byte, 32)
	for i := range ticket {
		ticket[i] = byte(i + 1)
	}
	ok := func() lotusreceive.RemoteCommit1Params {
		return lotusreceive.RemoteCommit1Params{Ticket: ticket, Seed: make([]byte, 32), Unsealed: lotusreceive.CID{Str: "baga-d"}, Sealed: lotusreceive.CID{Str: "bagboea-r"}, ProofType: 6}
	}
	if msg := commit1Mismatch(o, b, ok()); msg != "" {
		t.Fatalf("the sealed sector's own request refused: %s", msg)
	}
	for want, edit := range map[string]func(*lotusreceive.RemoteCommit1Params){
		"proof type 8":  func(p *lotusreceive.RemoteCommit1Params) { p.ProofType = 8 },
		"CIDs":          func(p *lotusreceive.RemoteCommit1Params) { p.Sealed.Str = "bagboea-other" },
		"seed of 31":    func(p *lotusreceive.RemoteCommit1Params) { p.Seed = p.Seed[:31] },
		"ticket is not": func(p *lotusreceive.RemoteCommit1Params) { p.Ticket = append([]byte{}, p.Ticket[1:]...) },
	} {
		p := ok()
		edit(&p)
		if msg := commit1Mismatch(o, b, p); !strings.Contains(msg, want) {
			t.Errorf("%s: %q", want, msg)
		}
	}
	other := &sealv1.SealBatch{Spec: sealv1.SealBatchSpec{Sectors: []sealv1.SectorSpec{{Number: 10}}}}
	if msg := commit1Mismatch(o, other, ok()); !strings.Contains(msg, "does not seal sector 9") {
		t.Errorf("another batch: %q", msg)
	}
}
