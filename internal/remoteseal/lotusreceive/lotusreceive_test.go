package lotusreceive

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	rlepluslazy "github.com/filecoin-project/go-bitfield/rle"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/commcid"
)

func ccSector(size sealv1.SectorSize) Sector {
	s := Sector{MinerID: "t01000", Number: 42, Size: size, Proof: sealv1.ProofTypeV1_1, TicketEpoch: 1234, CommD: CCCommD(size.Bytes())}
	for i := range s.Ticket {
		s.Ticket[i], s.CommR[i] = byte(i), byte(200-i)
	}
	s.CommR[31] &= 0x3f
	return s
}

var urls = Endpoints{Unsealed: "https://n1/u", Sealed: "https://n1/s", Cache: "https://n1/c", Commit1: "https://op/c1", Done: "https://op/done"}

// The zero commitment of a 32 GiB sector is the unsealed CID every CC sector of lotus shows.
func TestCCCommDIsLotusCCUnsealedCID(t *testing.T) {
	c, err := commcid.PieceCID(CCCommD(32 << 30))
	if err != nil || c != "baga6ea4seaqao7s73y24kcutaosvacpdjgfe5pw76ooefnyqw4ynr3d2y6x2mpq" {
		t.Fatalf("32 GiB CC commD %s, %v", c, err)
	}
}

// The meta's JSON has lotus' field names and encodings: CIDs as {"/": …}, bytes as base64,
// the registered proof as its number, one CC piece with a null DealInfo.
func TestMetaJSONIsLotusShape(t *testing.T) {
	s := ccSector(sealv1.SectorSize8MiB)
	m, err := Meta(s, urls)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(m)
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"State", "Sector", "Type", "Pieces", "TicketValue", "TicketEpoch", "CommD", "CommR", "DataUnsealed", "DataSealed", "DataCache", "RemoteCommit1Endpoint", "RemoteCommit2Endpoint", "RemoteSealingDoneEndpoint"} {
		if _, ok := v[k]; !ok {
			t.Errorf("no %s in %s", k, raw)
		}
	}
	commR, _ := commcid.SealedCID(s.CommR)
	if v["State"] != "PreCommitting" || v["Type"] != float64(6) || v["TicketEpoch"] != float64(1234) ||
		v["TicketValue"] != base64.StdEncoding.EncodeToString(s.Ticket[:]) || v["CommR"].(map[string]any)["/"] != commR {
		t.Errorf("meta %s", raw)
	}
	if id := v["Sector"].(map[string]any); id["Miner"] != float64(1000) || id["Number"] != float64(42) {
		t.Errorf("sector id %v", id)
	}
	p := v["Pieces"].([]any)[0].(map[string]any)
	if p["DealInfo"] != nil || p["Piece"].(map[string]any)["Size"] != float64(8<<20) || p["Piece"].(map[string]any)["PieceCID"].(map[string]any)["/"] != v["CommD"].(map[string]any)["/"] {
		t.Errorf("piece %v", p)
	}
	if loc := v["DataSealed"].(map[string]any); loc["URL"] != urls.Sealed || loc["Local"] != false {
		t.Errorf("sealed location %v", loc)
	}
	if m32, err := Meta(ccSector(sealv1.SectorSize32GiB), urls); err != nil || m32.Type != 8 {
		t.Errorf("32 GiB V1_1: type %d, %v", m32.Type, err)
	}
}

func TestMetaRefusals(t *testing.T) {
	data := ccSector(sealv1.SectorSize2KiB)
	data.CommD[0] ^= 1
	noURL := urls
	noURL.Commit1 = ""
	for name, c := range map[string]struct {
		s    Sector
		e    Endpoints
		want string
	}{
		"data sector": {data, urls, "holds data"},
		"miner":       {func() Sector { s := ccSector(sealv1.SectorSize2KiB); s.MinerID = "f1abc"; return s }(), urls, "not an ID address"},
		"url":         {ccSector(sealv1.SectorSize2KiB), noURL, "no commit1 URL"},
	} {
		if _, err := Meta(c.s, c.e); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// The trailer decodes (go-bitfield) to one run of present bytes covering the sector, and ends
// with its own length.
func TestUnsealedCCTrailer(t *testing.T) {
	for _, size := range []uint64{2 << 10, 8 << 20, 32 << 30, 64 << 30} {
		tr, err := UnsealedCCTrailer(size)
		if err != nil {
			t.Fatal(err)
		}
		n := binary.LittleEndian.Uint32(tr[len(tr)-4:])
		if int(n) != len(tr)-4 {
			t.Fatalf("size %d: length field %d, trailer %d bytes", size, n, len(tr))
		}
		rle, err := rlepluslazy.FromBuf(tr[:n])
		if err != nil {
			t.Fatal(err)
		}
		it, err := rle.RunIterator()
		if err != nil {
			t.Fatal(err)
		}
		var runs []rlepluslazy.Run
		for it.HasNext() {
			r, err := it.NextRun()
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, r)
		}
		if len(runs) != 1 || !runs[0].Val || runs[0].Len != size {
			t.Errorf("size %d: runs %+v", size, runs)
		}
	}
}

// fakeMiner answers JSON-RPC as lotus-miner does: SectorReceive of a known sector fails with
// lotus' message, SectorsStatus reports the sector it holds.
func fakeMiner(t *testing.T, token string, have map[uint64]string) (*httptest.Server, *[]RemoteSectorMeta) {
	var got []RemoteSectorMeta
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		req, err := ReadRequest(r)
		if err != nil {
			t.Error(err)
			return
		}
		switch req.Method {
		case "Filecoin.SectorReceive":
			var m RemoteSectorMeta
			if err := json.Unmarshal(req.Params[0], &m); err != nil {
				t.Error(err)
			}
			if _, ok := have[m.Sector.Number]; ok {
				WriteAnswer(w, req.ID, nil, &RPCError{Code: 1, Message: "sector 42 state already exists"})
				return
			}
			got = append(got, m)
			have[m.Sector.Number] = m.CommR.Str
			WriteAnswer(w, req.ID, nil, nil)
		case "Filecoin.SectorsStatus":
			var n uint64
			_ = json.Unmarshal(req.Params[0], &n)
			WriteAnswer(w, req.ID, SectorInfo{SectorID: n, State: "PreCommitting", CommR: &CID{have[n]}}, nil)
		default:
			WriteAnswer(w, req.ID, nil, &RPCError{Code: -32601, Message: "method not found"})
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func TestReceiveIsIdempotentPerSector(t *testing.T) {
	have := map[uint64]string{}
	srv, got := fakeMiner(t, "admin-token", have)
	c := &Client{URL: srv.URL, Token: "admin-token"}
	m, err := Meta(ccSector(sealv1.SectorSize8MiB), urls)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Receive(context.Background(), m); err != nil || len(*got) != 1 || (*got)[0].CommR.Str != m.CommR.Str {
		t.Fatalf("first receive: %v, lotus got %d", err, len(*got))
	}
	// Again (its answer lost): lotus has this sector, with this CommR.
	if err := c.Receive(context.Background(), m); err != nil {
		t.Fatalf("repeat: %v", err)
	}
	// Another sector under the same number is lotus' own: refused.
	have[42] = "bagboea4b5abcaother"
	if err := c.Receive(context.Background(), m); err == nil || !strings.Contains(err.Error(), "not the one sealfleet sealed") {
		t.Fatalf("foreign sector: %v", err)
	}
	bad := &Client{URL: srv.URL, Token: "wrong"}
	if err := bad.Receive(context.Background(), m); err == nil || !strings.Contains(err.Error(), "admin token") {
		t.Fatalf("wrong token: %v", err)
	}
}
