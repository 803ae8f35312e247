package render

import (
	"encoding/hex"
	"encoding/json"
	"fmt"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// C1Seeds is the seeds file of a batch's C1 (`sealer c1 --seeds`): the sectors of spec.seeds,
// each seed as hex.
func C1Seeds(b *sealv1.SealBatch) ([]byte, error) {
	type seed struct {
		SectorID int64  `json:"sector_id"`
		Seed     string `json:"seed"`
	}
	out := struct {
		Sectors []seed `json:"sectors"`
	}{Sectors: []seed{}}
	for i, s := range b.Spec.Seeds {
		r, err := Bytes32(fmt.Sprintf("spec.seeds[%d].randomness", i), s.Randomness)
		if err != nil {
			return nil, err
		}
		out.Sectors = append(out.Sectors, seed{SectorID: s.Number, Seed: hex.EncodeToString(r[:])})
	}
	return json.Marshal(out)
}
