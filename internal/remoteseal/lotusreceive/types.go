// Package lotusreceive speaks lotus-miner's side of an externally sealed sector: the
// RemoteSectorMeta that `Filecoin.SectorReceive` takes (lotus' JSON-RPC API, v1.17.2 and
// later; types as lotus' api/api_storage.go and storage/sealer/storiface define them), the
// Commit1 and sealing-done calls lotus makes back, the unsealed-file format lotus stores, and
// a JSON-RPC client. Only the fields sealfleet fills are declared; lotus reads the others as
// their zero values.
package lotusreceive

import (
	"encoding/json"
	"fmt"
)

// FollowedVersion is the lotus release whose types this package follows.
const FollowedVersion = "v1.36.2"

// StatePreCommitting is the sealing state a sector is handed over in: sealed (CommR known),
// not precommitted; lotus then precommits it, waits for the seed, asks for C1, commits.
const StatePreCommitting = "PreCommitting"

// CID is a CID in lotus' JSON form, {"/": "<cid>"}.
type CID struct {
	Str string `json:"/"`
}

// SectorID is abi.SectorID.
type SectorID struct {
	Miner  uint64 `json:"Miner"`
	Number uint64 `json:"Number"`
}

// PieceInfo is abi.PieceInfo: a padded size and a piece CID.
type PieceInfo struct {
	Size     uint64 `json:"Size"`
	PieceCID CID    `json:"PieceCID"`
}

// SectorPiece is api.SectorPiece; DealInfo stays null (a committed-capacity piece).
type SectorPiece struct {
	Piece    PieceInfo       `json:"Piece"`
	DealInfo json.RawMessage `json:"DealInfo"`
}

// Header is one HTTP header lotus sends when it fetches a location.
type Header struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

// SectorLocation is storiface.SectorLocation: where lotus fetches one of the sector's files
// (an octet stream, or a tar that it unpacks for the cache directory).
type SectorLocation struct {
	Local   bool     `json:"Local"`
	URL     string   `json:"URL"`
	Headers []Header `json:"Headers"`
}

// RemoteSectorMeta is api.RemoteSectorMeta as sealfleet fills it for state PreCommitting.
type RemoteSectorMeta struct {
	State  string        `json:"State"`
	Sector SectorID      `json:"Sector"`
	Type   int64         `json:"Type"`
	Pieces []SectorPiece `json:"Pieces"`

	TicketValue []byte `json:"TicketValue"`
	TicketEpoch int64  `json:"TicketEpoch"`

	CommD *CID `json:"CommD"`
	CommR *CID `json:"CommR"`

	DataUnsealed *SectorLocation `json:"DataUnsealed"`
	DataSealed   *SectorLocation `json:"DataSealed"`
	DataCache    *SectorLocation `json:"DataCache"`

	RemoteCommit1Endpoint     string `json:"RemoteCommit1Endpoint"`
	RemoteCommit2Endpoint     string `json:"RemoteCommit2Endpoint"`
	RemoteSealingDoneEndpoint string `json:"RemoteSealingDoneEndpoint"`
}

// RemoteCommit1Params is what lotus POSTs (JSON) to RemoteCommit1Endpoint; it expects the
// C1 output's bytes in a 200 answer and retries after a cool-down on anything else.
type RemoteCommit1Params struct {
	Ticket    []byte `json:"Ticket"`
	Seed      []byte `json:"Seed"`
	Unsealed  CID    `json:"Unsealed"`
	Sealed    CID    `json:"Sealed"`
	ProofType int64  `json:"ProofType"`
}

// RemoteSealingDoneParams is what lotus POSTs to RemoteSealingDoneEndpoint once the sector
// leaves its sealing pipeline: Proving (or Available) when it is on chain, a failure state
// otherwise.
type RemoteSealingDoneParams struct {
	Successful    bool   `json:"Successful"`
	State         string `json:"State"`
	CommitMessage *CID   `json:"CommitMessage"`
}

// SectorInfo is the part of api.SectorInfo (Filecoin.SectorsStatus) sealfleet reads: whether
// a sector lotus already has is the one sealfleet handed over.
type SectorInfo struct {
	SectorID uint64 `json:"SectorID"`
	State    string `json:"State"`
	CommD    *CID   `json:"CommD"`
	CommR    *CID   `json:"CommR"`
}

// RPCError is a JSON-RPC error lotus answered with.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("lotus-miner: %s (code %d)", e.Message, e.Code) }
