package lotusreceive

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strconv"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/commcid"
	v0 "github.com/sealfleet/sealfleet/internal/remoteseal/delegatedv0"
)

// Sector is what sealfleet knows of one sealed committed-capacity sector.
type Sector struct {
	// MinerID is the miner actor, f0… or t0….
	MinerID string
	Number  int64
	Size    sealv1.SectorSize
	Proof   sealv1.ProofType
	// Ticket and TicketEpoch are the seal randomness and the epoch lotus drew it at: lotus
	// checks both against its chain before it precommits.
	Ticket      [32]byte
	TicketEpoch int64
	CommD       [32]byte
	CommR       [32]byte
}

// Endpoints are the URLs lotus fetches the sector's files from and calls back.
type Endpoints struct {
	Unsealed, Sealed, Cache string
	Commit1, Done           string
}

// Meta is the RemoteSectorMeta handing s to lotus in state PreCommitting: one zero piece
// filling the sector (a CC sector, as lotus' own CC sectors hold), the ticket, CommD and
// CommR as CIDs, and the locations. A sector holding data is refused: lotus precommits a
// data sector with its deals (DealInfo), which sealfleet does not have.
func Meta(s Sector, e Endpoints) (RemoteSectorMeta, error) {
	actor, err := strconv.ParseUint(s.MinerID[min(2, len(s.MinerID)):], 10, 64)
	if err != nil || len(s.MinerID) < 3 || (s.MinerID[:2] != "f0" && s.MinerID[:2] != "t0") {
		return RemoteSectorMeta{}, fmt.Errorf("miner %q is not an ID address (f0… or t0…)", s.MinerID)
	}
	reg := v0.RegisteredSealProof(s.Size, s.Proof)
	if reg < 0 {
		return RemoteSectorMeta{}, fmt.Errorf("%s %s is not a registered seal proof", s.Size, s.Proof)
	}
	if s.CommD != CCCommD(s.Size.Bytes()) {
		return RemoteSectorMeta{}, fmt.Errorf("sector %d holds data (its commD is not the zero commitment): lotus precommits data sectors with their deals, which sealfleet does not have; only CC sectors are handed over", s.Number)
	}
	commD, err := commcid.PieceCID(s.CommD)
	if err != nil {
		return RemoteSectorMeta{}, err
	}
	commR, err := commcid.SealedCID(s.CommR)
	if err != nil {
		return RemoteSectorMeta{}, err
	}
	for name, u := range map[string]string{"unsealed": e.Unsealed, "sealed": e.Sealed, "cache": e.Cache, "commit1": e.Commit1, "done": e.Done} {
		if u == "" {
			return RemoteSectorMeta{}, fmt.Errorf("sector %d: no %s URL", s.Number, name)
		}
	}
	at := func(u string) *SectorLocation { return &SectorLocation{URL: u, Headers: []Header{}} }
	return RemoteSectorMeta{
		State:                     StatePreCommitting,
		Sector:                    SectorID{Miner: actor, Number: uint64(s.Number)},
		Type:                      int64(reg),
		Pieces:                    []SectorPiece{{Piece: PieceInfo{Size: s.Size.Bytes(), PieceCID: CID{commD}}, DealInfo: []byte("null")}},
		TicketValue:               bytes.Clone(s.Ticket[:]),
		TicketEpoch:               s.TicketEpoch,
		CommD:                     &CID{commD},
		CommR:                     &CID{commR},
		DataUnsealed:              at(e.Unsealed),
		DataSealed:                at(e.Sealed),
		DataCache:                 at(e.Cache),
		RemoteCommit1Endpoint:     e.Commit1,
		RemoteSealingDoneEndpoint: e.Done,
	}, nil
}

// CCCommD is the data commitment of a sector of zeros: the root of SHA-256 (its last byte's
// two top bits cleared) over pairs, from 32-byte zero leaves.
func CCCommD(sectorSize uint64) [32]byte {
	var h [32]byte
	for n := uint64(32); n < sectorSize; n *= 2 {
		h = sha256.Sum256(append(h[:], h[:]...))
		h[31] &= 0x3f
	}
	return h
}
