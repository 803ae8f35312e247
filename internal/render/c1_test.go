package render

import (
	"path/filepath"
	"strings"
	"testing"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/testutil"
)

// The seeds file C1 reads is the contract contracts/c1-seeds.json: the Rust sealer's tests
// parse that very file with the parser `sealer c1` uses. Seeds given as base64 are written as
// hex like the others.
func TestC1SeedsContract(t *testing.T) {
	b := testutil.Batch("ns", "c1", sealv1.SectorSize8MiB, 2, testutil.NumberedFrom(7))
	b.Spec.Seeds = []sealv1.SectorSeed{
		{Number: 7, Randomness: strings.Repeat("ab", 32)},
		{Number: 8, Randomness: "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="},
	}
	got, err := C1Seeds(b)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("..", "..", "contracts", "c1-seeds.json"), append(got, '\n'), *update, "./internal/render")

	b.Spec.Seeds[1].Randomness = "abc"
	if _, err := C1Seeds(b); err == nil || !strings.Contains(err.Error(), "spec.seeds[1].randomness") {
		t.Errorf("a seed that is not 32 bytes: %v", err)
	}
}
