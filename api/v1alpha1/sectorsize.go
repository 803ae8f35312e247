package v1alpha1

import "fmt"

// SectorSize is a Filecoin sector size written the way the proofs name it.
// +kubebuilder:validation:Enum="2KiB";"8MiB";"512MiB";"32GiB";"64GiB"
type SectorSize string

// The sector sizes the sealer supports. 2KiB, 8MiB and 512MiB are test sizes.
const (
	SectorSize2KiB   SectorSize = "2KiB"
	SectorSize8MiB   SectorSize = "8MiB"
	SectorSize512MiB SectorSize = "512MiB"
	SectorSize32GiB  SectorSize = "32GiB"
	SectorSize64GiB  SectorSize = "64GiB"
)

// sectorSizeInfo is what the proofs fix per sector size.
type sectorSizeInfo struct {
	bytes     uint64
	layers    int
	baseTrees int
}

var sectorSizes = map[SectorSize]sectorSizeInfo{
	SectorSize2KiB:   {2 << 10, 2, 1},
	SectorSize8MiB:   {8 << 20, 2, 1},
	SectorSize512MiB: {512 << 20, 2, 1},
	SectorSize32GiB:  {32 << 30, 11, 8},
	SectorSize64GiB:  {64 << 30, 11, 16},
}

// Bytes is the sector size in bytes, or 0 for an unknown size.
func (s SectorSize) Bytes() uint64 { return sectorSizes[s].bytes }

// Layers is the number of SDR layers rust-fil-proofs uses for this size.
func (s SectorSize) Layers() int { return sectorSizes[s].layers }

// BaseTrees is how many base trees tree-c and tree-r-last have (one per 4 GiB of a 32 or
// 64 GiB sector, else one), or 0 for an unknown size.
func (s SectorSize) BaseTrees() int { return sectorSizes[s].baseTrees }

// Valid reports whether s is a supported size.
func (s SectorSize) Valid() bool { _, ok := sectorSizes[s]; return ok }

// ProofType is the proof version and features of a RegisteredSealProof, without the sector
// size: StackedDrg<sectorSize><proofType> is the full name (e.g. StackedDrg32GiBV1_1).
// +kubebuilder:validation:Enum=V1;V1_1;V1_1_Feat_SyntheticPoRep;V1_2_Feat_NonInteractivePoRep
type ProofType string

// The proof types, oldest first.
const (
	ProofTypeV1             ProofType = "V1"
	ProofTypeV1_1           ProofType = "V1_1"
	ProofTypeSyntheticPoRep ProofType = "V1_1_Feat_SyntheticPoRep"
	ProofTypeNIPoRep        ProofType = "V1_2_Feat_NonInteractivePoRep"
)

// RegisteredProof is the full RegisteredSealProof name, e.g. StackedDrg32GiBV1_1.
func RegisteredProof(size SectorSize, proof ProofType) string {
	return fmt.Sprintf("StackedDrg%s%s", size, proof)
}

// SupportedBatchSizes are the batch sizes the sealer accepts: every 4 KiB page holds the same
// node of every sector, so the batch must divide 128 (4096 / 32-byte labels).
var SupportedBatchSizes = []int{1, 2, 4, 8, 16, 32, 64, 128}

// BatchSizeSupported reports whether n sectors form a batch the sealer accepts.
func BatchSizeSupported(n int) bool {
	for _, s := range SupportedBatchSizes {
		if s == n {
			return true
		}
	}
	return false
}

// AllRegisteredProofs lists every registered proof name sealfleet seals, by size then type.
func AllRegisteredProofs() []string {
	var out []string
	for _, s := range []SectorSize{SectorSize2KiB, SectorSize8MiB, SectorSize512MiB, SectorSize32GiB, SectorSize64GiB} {
		for _, p := range []ProofType{ProofTypeV1, ProofTypeV1_1, ProofTypeSyntheticPoRep, ProofTypeNIPoRep} {
			out = append(out, RegisteredProof(s, p))
		}
	}
	return out
}
