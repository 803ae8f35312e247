package render

import (
	"encoding/hex"
	"fmt"
	"path"
	"strconv"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// SectorKeysMount is where an update's spec.update.sectorKeys is mounted, read-only.
const SectorKeysMount = "/sector-keys"

// SnapConfig is the sealer's update config (`sealer snap`): the contract with
// sealer-image/crates/sealer-config/src/snap.rs, whose tests parse this package's golden
// (testdata/snap-config.golden.json) and check that every key it reads is rendered.
type SnapConfig struct {
	RegisteredProof string       `json:"registered_proof"`
	Sectors         []SnapSector `json:"sectors"`
	OutputDir       string       `json:"output_dir"`
	// PC2Engine builds the updated replica's tree-r-last (spec.pc2Engine).
	PC2Engine string `json:"pc2_engine"`
}

// SnapSector is one sector to update: its sealed CC replica and cache directory as the pod
// sees them, and the data to encode.
type SnapSector struct {
	SectorID       int64       `json:"sector_id"`
	SectorKey      string      `json:"sector_key"`
	SectorKeyCache string      `json:"sector_key_cache"`
	Data           *SealerData `json:"data"`
	CommD          string      `json:"comm_d,omitempty"`
	// CommROld is the sector key's commR the batch expects (spec.sectors[].commR).
	CommROld string `json:"comm_r_old,omitempty"`
}

// UpdateConfig renders the sealer config of a placed update (spec.update).
func UpdateConfig(b *sealv1.SealBatch, outputDir string) (*SnapConfig, error) {
	u := b.Spec.Update
	if u == nil {
		return nil, fmt.Errorf("spec.update is not set: not an update")
	}
	if !b.Spec.SectorSize.Valid() {
		return nil, fmt.Errorf("spec.sectorSize %q is not supported", b.Spec.SectorSize)
	}
	miner, err := ActorID(b.Spec.MinerID)
	if err != nil {
		return nil, err
	}
	cfg := &SnapConfig{
		RegisteredProof: sealv1.RegisteredProof(b.Spec.SectorSize, b.Spec.ProofTypeOrDefault()),
		OutputDir:       outputDir,
		PC2Engine:       string(b.Spec.PC2EngineOrDefault()),
	}
	for i, s := range b.Spec.Sectors {
		field := fmt.Sprintf("spec.sectors[%d]", i)
		if s.Data == nil {
			return nil, fmt.Errorf("%s.data: an update encodes data into the sector; give its staged file and pieces", field)
		}
		data, err := sectorData(field+".data", s.Data, int64(b.Spec.SectorSize.Bytes()))
		if err != nil {
			return nil, err
		}
		sealed, cache := SectorKeyPaths(u.SectorKeys.Layout, miner, s.Number)
		sec := SnapSector{SectorID: s.Number, SectorKey: sealed, SectorKeyCache: cache, Data: data}
		if s.CommD != "" {
			d, err := CommD(field+".commD", s.CommD)
			if err != nil {
				return nil, err
			}
			sec.CommD = hex.EncodeToString(d[:])
		}
		if s.CommR != "" {
			r, err := CommR(field+".commR", s.CommR)
			if err != nil {
				return nil, err
			}
			sec.CommROld = hex.EncodeToString(r[:])
		}
		cfg.Sectors = append(cfg.Sectors, sec)
	}
	return cfg, nil
}

// LotusSectorName is a sector's file and directory name in the Lotus layout,
// s-t0<actor id>-<number> (lotus writes t0 on every network).
func LotusSectorName(actorID string, sector int64) string {
	return "s-t0" + actorID + "-" + strconv.FormatInt(sector, 10)
}

// SectorKeyPaths is where a sealed sector's replica and cache directory are under the mounted
// sector keys, in the layout spec.output.layout wrote them.
func SectorKeyPaths(layout sealv1.OutputLayout, miner uint64, sector int64) (sealed, cache string) {
	if layout == sealv1.OutputLayoutLotus {
		name := LotusSectorName(strconv.FormatUint(miner, 10), sector)
		return path.Join(SectorKeysMount, "sealed", name), path.Join(SectorKeysMount, "cache", name)
	}
	dir := path.Join(SectorKeysMount, strconv.FormatInt(sector, 10))
	return path.Join(dir, "sealed"), path.Join(dir, "cache")
}
