// Package delegatedv0 is Curio's delegated remote-seal protocol, version 0, as a provider
// serves it: the wire types, the HTTP routes under /remoteseal/delegated/v0/, their status
// codes, and the two calls a provider makes on its client (the ticket and the completion
// notice). It follows Curio's pull request #971 (branch feat/remote-seal) at commit
// 18f25e2fc6e25f3dbc97e013a242d4c441a463d1 (market/sealmarket/sealapi.go for the provider,
// tasks/remoteseal/ for the client). Nothing here knows about Kubernetes: what an order,
// a slot or a sector is to sealfleet is the Backend's business, so this package can follow
// the protocol when the pull request changes or merges, and a v1 can live beside it.
package delegatedv0

import (
	"fmt"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// FollowedCommit is the Curio commit whose protocol this package speaks.
const FollowedCommit = "18f25e2fc6e25f3dbc97e013a242d4c441a463d1"

// BasePath prefixes every route, on the provider and on the client alike.
const BasePath = "/remoteseal/delegated/v0/"

// The states /status reports. Curio's client acts on complete, failed and gone; any other
// value means "poll again".
const (
	StatePending  = "pending"
	StateSDR      = "sdr"
	StateTrees    = "trees"
	StateComplete = "complete"
	StateFailed   = "failed"
	StateGone     = "gone"
)

// SlotTTL is how long an /available reservation holds before /order must use it.
const SlotTTL = 30 // seconds

// CapabilitiesResponse answers GET capabilities.
type CapabilitiesResponse struct {
	SupportedProofs       []int64 `json:"supported_proofs"`
	MaxBatchSize          int     `json:"max_batch_size"`
	SupportsRangeRequests bool    `json:"supports_range_requests"`
}

// AuthorizeRequest is the body of authorize and available.
type AuthorizeRequest struct {
	PartnerToken string `json:"partner_token"`
}

// AuthorizeResponse answers authorize; an unknown token is authorized: false, not an error.
type AuthorizeResponse struct {
	Authorized         bool   `json:"authorized"`
	PartnerName        string `json:"partner_name"`
	AllowanceRemaining int64  `json:"allowance_remaining"`
}

// AvailableResponse answers available: a single-use slot token valid for SlotTTL seconds.
type AvailableResponse struct {
	Available bool   `json:"available"`
	SlotToken string `json:"slot_token,omitempty"`
}

// OrderRequest asks the provider to seal one CC sector of the client's miner.
type OrderRequest struct {
	PartnerToken string `json:"partner_token"`
	SlotToken    string `json:"slot_token"`
	SpID         int64  `json:"sp_id"`
	SectorNumber int64  `json:"sector_number"`
	RegSealProof int    `json:"reg_seal_proof"`
}

// OrderResponse answers order; a refusal is 200 with accepted: false and the reason.
type OrderResponse struct {
	Accepted     bool   `json:"accepted"`
	RejectReason string `json:"reject_reason,omitempty"`
}

// SectorRequest is the body of status, finalize and cleanup (Curio's StatusRequest,
// FinalizeRequest and CleanupRequest share it).
type SectorRequest struct {
	PartnerToken string `json:"partner_token"`
	SpID         int64  `json:"sp_id"`
	SectorNumber int64  `json:"sector_number"`
}

// StatusResponse answers status. A complete sector carries both CIDs and the ticket.
type StatusResponse struct {
	State       string `json:"state"`
	TreeDCid    string `json:"tree_d_cid,omitempty"`
	TreeRCid    string `json:"tree_r_cid,omitempty"`
	TicketEpoch int64  `json:"ticket_epoch,omitempty"`
	TicketValue []byte `json:"ticket_value,omitempty"`
	FailReason  string `json:"fail_reason,omitempty"`
}

// Commit1Request asks for a sector's C1 output with its interactive seed. Curio's client
// sends no seed_epoch.
type Commit1Request struct {
	PartnerToken string `json:"partner_token"`
	SpID         int64  `json:"sp_id"`
	SectorNumber int64  `json:"sector_number"`
	SeedEpoch    int64  `json:"seed_epoch"`
	SeedValue    []byte `json:"seed_value"`
}

// CompleteNotification is what the provider POSTs to the client's complete route, with the
// partner's own token.
type CompleteNotification struct {
	PartnerToken string `json:"partner_token"`
	SpID         int64  `json:"sp_id"`
	SectorNumber int64  `json:"sector_number"`
	TreeDCid     string `json:"tree_d_cid"`
	TreeRCid     string `json:"tree_r_cid"`
	TicketEpoch  int64  `json:"ticket_epoch"`
	TicketValue  []byte `json:"ticket_value"`
}

// TicketResponse is the client's answer to GET ticket: seal randomness and its epoch.
type TicketResponse struct {
	Ticket []byte `json:"ticket"`
	Epoch  int64  `json:"epoch"`
}

// SectorID names a sector of the client's miner.
type SectorID struct {
	SpID   int64
	Number int64
}

func (s SectorID) String() string { return fmt.Sprintf("f0%d sector %d", s.SpID, s.Number) }

// registeredSizes and registeredTypes order abi.RegisteredSealProof: the number is the size's
// index plus five times the type's (StackedDrg2KiBV1 = 0 … StackedDrg64GiBV1_2_Feat_NiPoRep = 19).
var (
	registeredSizes = []sealv1.SectorSize{sealv1.SectorSize2KiB, sealv1.SectorSize8MiB, sealv1.SectorSize512MiB, sealv1.SectorSize32GiB, sealv1.SectorSize64GiB}
	registeredTypes = []sealv1.ProofType{sealv1.ProofTypeV1, sealv1.ProofTypeV1_1, sealv1.ProofTypeSyntheticPoRep, sealv1.ProofTypeNIPoRep}
)

// ProofOf decodes an abi.RegisteredSealProof number into the sector size and proof type a
// SealBatch names.
func ProofOf(regSealProof int) (sealv1.SectorSize, sealv1.ProofType, error) {
	if regSealProof < 0 || regSealProof >= len(registeredSizes)*len(registeredTypes) {
		return "", "", fmt.Errorf("reg_seal_proof %d is not a registered seal proof (0-%d)", regSealProof, len(registeredSizes)*len(registeredTypes)-1)
	}
	return registeredSizes[regSealProof%len(registeredSizes)], registeredTypes[regSealProof/len(registeredSizes)], nil
}

// RegisteredSealProof is ProofOf's inverse; -1 for a size or type the table lacks.
func RegisteredSealProof(size sealv1.SectorSize, proof sealv1.ProofType) int {
	for t, p := range registeredTypes {
		for s, z := range registeredSizes {
			if z == size && p == proof {
				return s + t*len(registeredSizes)
			}
		}
	}
	return -1
}
