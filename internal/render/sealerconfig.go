// Package render turns a placed SealBatch into what runs it: the sealer's batch config
// (JSON, in a ConfigMap) and the sealer Pod. Pure functions: the reconciler only applies them.
package render

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/commcid"
)

// SealerConfig is the sealer's batch config file: the contract between the operator and the
// sealer (sealer-image/crates/sealer-config). The sealer rejects keys it does not read, and its
// tests parse this package's golden config (testdata/sealer-config.golden.json) and check that
// every key it reads from the operator is rendered. The proof's size, porep id, API version and
// features follow from registered_proof on the sealer's side (one proof table, in Rust).
type SealerConfig struct {
	RegisteredProof string         `json:"registered_proof"`
	Sectors         []SealerSector `json:"sectors"`
	Layers          SealerLayers   `json:"layers"`
	OutputDir       string         `json:"output_dir"`
	// Layout is the layout placement recorded in the batch status, in the sealer's form.
	Layout      json.RawMessage `json:"layout"`
	MetricsPort int             `json:"metrics_port"`
	// MetricsAddress is the listen address ("" = the sealer's default, every address).
	MetricsAddress string `json:"metrics_address,omitempty"`
	// Lotus makes the output directory a lotus/Curio storage path (spec.output.layout Lotus).
	Lotus *SealerLotus `json:"lotus,omitempty"`
	// Hugepages1Gi is how many 1 GiB hugepages the pod holds: the sealer maps its buffers there.
	Hugepages1Gi int32 `json:"hugepages_1gi"`
	// ResidentBytes is the resident part of the previous layer (spec.residentLayerPercent),
	// mapped from those hugepages.
	ResidentBytes int64 `json:"resident_bytes,omitempty"`
	// ParentCacheDir is the node's parent-cache directory in the pod (read-only): the sealer
	// takes the verified cache from there and never builds one.
	ParentCacheDir string `json:"parent_cache_dir,omitempty"`
	// PC2Engine is where PC2's Poseidon runs (spec.pc2Engine): cpu, or gpu on the device the
	// pod was given; the sealer refuses gpu without one, never falling back.
	PC2Engine string `json:"pc2_engine"`
}

// SealerLotus names the storage path: the miner whose sector files it holds and the id in
// its sectorstore.json.
type SealerLotus struct {
	Miner     uint64 `json:"miner"`
	StorageID string `json:"storage_id"`
}

// SealerSector is one sector's replica inputs.
type SealerSector struct {
	ProverID string `json:"prover_id"`
	SectorID int64  `json:"sector_id"`
	Ticket   string `json:"ticket"`
	CommD    string `json:"comm_d,omitempty"`
	// Data makes it a data sector: the staged file as the pod sees it, and its pieces.
	Data *SealerData `json:"data,omitempty"`
}

// SealerData is a data sector's staged file and pieces.
type SealerData struct {
	Path   string        `json:"path"`
	Pieces []SealerPiece `json:"pieces"`
}

// SealerPiece is one piece: comm_p as hex, padded size in bytes.
type SealerPiece struct {
	CommP string `json:"comm_p"`
	Size  int64  `json:"size"`
}

// SealerLayers says where the layers live: the allocated devices only, and where the slot
// starts on each, in 4 KiB blocks (the sealer's unit).
type SealerLayers struct {
	Paths      []string `json:"paths"`
	SlotOffset int64    `json:"slot_offset"`
}

// BlockSize is the sealer's page and block size.
const BlockSize = 4096

// ActorID is the actor number of a miner ID address (f01234 → 1234).
func ActorID(minerID string) (uint64, error) {
	if len(minerID) < 3 || (minerID[0] != 'f' && minerID[0] != 't') || minerID[1] != '0' {
		return 0, fmt.Errorf("spec.minerID %q: want an ID address like f01234", minerID)
	}
	id, err := strconv.ParseUint(minerID[2:], 10, 63)
	if err != nil {
		return 0, fmt.Errorf("spec.minerID %q: %w", minerID, err)
	}
	return id, nil
}

// ProverID is the 32-byte prover id of a miner address (f0…/t0…): the actor id as an
// unsigned LEB128 varint (the ID address payload), zero-padded.
func ProverID(minerID string) ([32]byte, error) {
	var out [32]byte
	id, err := ActorID(minerID)
	if err != nil {
		return out, err
	}
	binary.PutUvarint(out[:], id)
	return out, nil
}

// Bytes32 decodes a 32-byte value written as 64 hex characters or 44 base64 characters.
func Bytes32(field, s string) ([32]byte, error) {
	var out [32]byte
	var b []byte
	var err error
	if len(s) == 64 {
		b, err = hex.DecodeString(s)
	} else {
		b, err = base64.StdEncoding.DecodeString(s)
	}
	if err != nil || len(b) != 32 {
		return out, fmt.Errorf("%s: want 32 bytes as 64 hex or 44 base64 characters", field)
	}
	copy(out[:], b)
	return out, nil
}

// CommR decodes a commR given as 64 hex characters or a bagboea… sealed CID.
func CommR(field, s string) ([32]byte, error) {
	return commitment(field, s, "bag", "a sealed CID (bagboea4b5abc…)", commcid.ParseSealedCID)
}

// CommD decodes commD given as 64 hex characters or a baga… piece CID.
func CommD(field, s string) ([32]byte, error) {
	return commitment(field, s, "baga", "a piece CID (baga6ea4seaq…)", commcid.ParsePieceCID)
}

// commitment decodes a commitment as a CID (s starts with prefix) or as 32 bytes.
func commitment(field, s, prefix, kind string, parse func(string) ([32]byte, error)) ([32]byte, error) {
	if !strings.HasPrefix(s, prefix) {
		return Bytes32(field, s)
	}
	c, err := parse(s)
	if err != nil {
		return c, fmt.Errorf("%s: %q is not %s: %w", field, s, kind, err)
	}
	return c, nil
}

// ConfigInput is what the operator decided for the batch.
type ConfigInput struct {
	Batch      *sealv1.SealBatch
	LayerPaths []string
	// SlotOffset is the slot's start on every layer device, in bytes (4 KiB aligned).
	SlotOffset  int64
	Layout      json.RawMessage
	OutputDir   string
	MetricsPort int
	// MetricsAddress is the sealer's listen address ("" = all addresses of the pod).
	MetricsAddress string
	// ParentCacheDir is where the pod sees the node's parent caches ("" = the sealer builds
	// its own, standalone behaviour).
	ParentCacheDir string
}

// Config renders the sealer config for a placed batch.
func Config(in ConfigInput) (*SealerConfig, error) {
	b := in.Batch
	if in.SlotOffset%BlockSize != 0 {
		return nil, fmt.Errorf("slot offset %d is not 4 KiB aligned", in.SlotOffset)
	}
	if !b.Spec.SectorSize.Valid() {
		return nil, fmt.Errorf("spec.sectorSize %q is not supported", b.Spec.SectorSize)
	}
	proof := b.Spec.ProofTypeOrDefault()
	prover, err := ProverID(b.Spec.MinerID)
	if err != nil {
		return nil, err
	}
	cfg := &SealerConfig{
		RegisteredProof: sealv1.RegisteredProof(b.Spec.SectorSize, proof),
		Layers:          SealerLayers{Paths: in.LayerPaths, SlotOffset: in.SlotOffset / BlockSize},
		OutputDir:       in.OutputDir,
		Layout:          in.Layout,
		MetricsPort:     in.MetricsPort,
		MetricsAddress:  in.MetricsAddress,
		Hugepages1Gi:    b.Status.Hugepages1Gi,
		ResidentBytes:   b.Spec.ResidentLayerBytes(),
		ParentCacheDir:  in.ParentCacheDir,
		PC2Engine:       string(b.Spec.PC2EngineOrDefault()),
	}
	if o := b.Spec.Output; o != nil && o.Layout == sealv1.OutputLayoutLotus {
		miner, _ := ActorID(b.Spec.MinerID) // ProverID parsed it
		// The batch UID: unique per storage path, and the same on every retry.
		cfg.Lotus = &SealerLotus{Miner: miner, StorageID: string(b.UID)}
	}
	for i, s := range b.Spec.Sectors {
		t, err := Bytes32(fmt.Sprintf("spec.sectors[%d].ticket", i), s.Ticket)
		if err != nil {
			return nil, err
		}
		sec := SealerSector{ProverID: hex.EncodeToString(prover[:]), SectorID: s.Number, Ticket: hex.EncodeToString(t[:])}
		if s.CommD != "" {
			d, err := CommD(fmt.Sprintf("spec.sectors[%d].commD", i), s.CommD)
			if err != nil {
				return nil, err
			}
			sec.CommD = hex.EncodeToString(d[:])
		}
		if s.Data != nil {
			data, err := sectorData(fmt.Sprintf("spec.sectors[%d].data", i), s.Data, int64(b.Spec.SectorSize.Bytes()))
			if err != nil {
				return nil, err
			}
			sec.Data = data
		}
		cfg.Sectors = append(cfg.Sectors, sec)
	}
	return cfg, nil
}

// sectorData renders a data sector's file (as mounted in the pod) and pieces, refusing pieces
// that do not fit the sector once each is aligned to its size (CEL checks only their sum).
func sectorData(field string, d *sealv1.SectorData, sectorBytes int64) (*SealerData, error) {
	out := &SealerData{Path: path.Join(DataMount, path.Clean("/"+d.File))}
	var end int64
	for j, p := range d.Pieces {
		pf := fmt.Sprintf("%s.pieces[%d]", field, j)
		c, err := CommD(pf+".cid", p.CID)
		if err != nil {
			return nil, err
		}
		if p.Size < 128 || p.Size&(p.Size-1) != 0 {
			return nil, fmt.Errorf("%s.size: %d is not a padded piece size (a power of two of at least 128)", pf, p.Size)
		}
		end = (end+p.Size-1)/p.Size*p.Size + p.Size
		if end > sectorBytes {
			return nil, fmt.Errorf("%s.size: the pieces up to this one need %d bytes with alignment padding; the sector holds %d: move pieces to another sector", pf, end, sectorBytes)
		}
		out.Pieces = append(out.Pieces, SealerPiece{CommP: hex.EncodeToString(c[:]), Size: p.Size})
	}
	return out, nil
}
