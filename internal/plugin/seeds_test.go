package plugin

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

const (
	hexA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hexB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	// b64A is hexA's 32 bytes in base64.
	b64A = "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqo="
)

func fromSlot(b *sealv1.SealBatch) { b.Spec.Commit1 = sealv1.Commit1FromSlot }

func withSeeds(seeds ...sealv1.SectorSeed) func(*sealv1.SealBatch) {
	return func(b *sealv1.SealBatch) { b.Spec.Seeds = seeds }
}

func TestParseSeeds(t *testing.T) {
	// YAML list; hex with 0x (stripped), base64 as given.
	got, err := ParseSeeds([]byte("- {number: 100, randomness: 0x" + hexA + ", epoch: 4000}\n- {number: 101, randomness: \"" + b64A + "\", epoch: 4001}\n"))
	want := []sealv1.SectorSeed{{Number: 100, Randomness: hexA, Epoch: 4000}, {Number: 101, Randomness: b64A, Epoch: 4001}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("YAML list: %+v, %v; want %+v", got, err, want)
	}
	// JSON object with seeds.
	got, err = ParseSeeds([]byte(`{"seeds": [{"number": 101, "randomness": "` + hexB + `", "epoch": 7}]}`))
	if err != nil || !reflect.DeepEqual(got, []sealv1.SectorSeed{{Number: 101, Randomness: hexB, Epoch: 7}}) {
		t.Errorf("JSON object: %+v, %v", got, err)
	}

	for name, tc := range map[string]struct{ in, want string }{
		"short hex":        {`[{"number": 100, "randomness": "abcd", "epoch": 1}]`, "sector 100: randomness: must be 32 bytes"},
		"bad base64":       {`[{"number": 100, "randomness": "!!!!qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqo=", "epoch": 1}]`, "sector 100: randomness"},
		"no epoch":         {`[{"number": 100, "randomness": "` + hexA + `"}]`, "sector 100: epoch: missing"},
		"negative epoch":   {`[{"number": 100, "randomness": "` + hexA + `", "epoch": -1}]`, "sector 100: epoch: must not be negative"},
		"no number":        {`[{"randomness": "` + hexA + `", "epoch": 1}]`, "seeds[0]: number: missing"},
		"unknown field":    {`[{"number": 100, "seed": "` + hexA + `", "epoch": 1}]`, `unknown field "seed"`},
		"empty":            {``, "no seeds"},
		"empty list":       {`[]`, "no seeds: the list is empty"},
		"second bad entry": {`[{"number": 100, "randomness": "` + hexA + `", "epoch": 1}, {"number": 102, "randomness": "0x12", "epoch": 1}]`, "sector 102: randomness"},
	} {
		if _, err := ParseSeeds([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

func TestMergeSeeds(t *testing.T) {
	b := batch("c1", fromSlot, withSeeds(sealv1.SectorSeed{Number: 100, Randomness: hexA, Epoch: 4000}))

	// The same seed again (here spelled in base64) is skipped; a new sector's is added.
	m, err := MergeSeeds(&b, []sealv1.SectorSeed{{Number: 101, Randomness: hexB, Epoch: 4001}, {Number: 100, Randomness: b64A, Epoch: 4000}})
	if err != nil {
		t.Fatal(err)
	}
	wantSeeds := []sealv1.SectorSeed{{Number: 100, Randomness: hexA, Epoch: 4000}, {Number: 101, Randomness: hexB, Epoch: 4001}}
	if !reflect.DeepEqual(m.Seeds, wantSeeds) || !reflect.DeepEqual(m.Added, []int64{101}) || !reflect.DeepEqual(m.Skipped, []int64{100}) {
		t.Errorf("merge: %+v", m)
	}

	for name, tc := range map[string]struct {
		given []sealv1.SectorSeed
		want  string
	}{
		"conflicting randomness": {[]sealv1.SectorSeed{{Number: 100, Randomness: hexB, Epoch: 4000}}, "sector 100: randomness/epoch: ns/c1 already has a different seed for it (epoch 4000"},
		"conflicting epoch":      {[]sealv1.SectorSeed{{Number: 100, Randomness: hexA, Epoch: 4001}}, "sector 100: randomness/epoch"},
		"unknown sector":         {[]sealv1.SectorSeed{{Number: 999, Randomness: hexA, Epoch: 1}}, "sector 999: number: not in spec.sectors of ns/c1 (its sectors: 100, 101)"},
		"given twice":            {[]sealv1.SectorSeed{{Number: 101, Randomness: hexA, Epoch: 1}, {Number: 101, Randomness: hexB, Epoch: 1}}, "sector 101: given twice"},
	} {
		if _, err := MergeSeeds(&b, tc.given); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}

	layerFiles := batch("lf")
	if _, err := MergeSeeds(&layerFiles, wantSeeds); err == nil || !strings.Contains(err.Error(), "only read with commit1 FromSlot") {
		t.Errorf("a LayerFiles batch takes no seeds: error %v", err)
	}
}

func TestRandomSeedsFillOnlyMissing(t *testing.T) {
	b := *fromSlotBatch4(withSeeds(sealv1.SectorSeed{Number: 101, Randomness: hexA, Epoch: 1}))
	rnd := bytes.NewReader(bytes.Repeat([]byte{0xcd}, 3*32))
	seeds, err := RandomSeeds(&b, 500, rnd)
	if err != nil {
		t.Fatal(err)
	}
	cd := strings.Repeat("cd", 32)
	want := []sealv1.SectorSeed{{Number: 100, Randomness: cd, Epoch: 500}, {Number: 102, Randomness: cd, Epoch: 501}, {Number: 103, Randomness: cd, Epoch: 502}}
	if !reflect.DeepEqual(seeds, want) {
		t.Errorf("random seeds %+v, want %+v", seeds, want)
	}
	if _, err := RandomSeeds(&b, 0, bytes.NewReader(nil)); err == nil {
		t.Error("a failing random source must be an error")
	}
}

// fromSlotBatch4 is a FromSlot batch of sectors 100-103.
func fromSlotBatch4(opts ...func(*sealv1.SealBatch)) *sealv1.SealBatch {
	b := batch("four", fromSlot)
	b.Spec.Sectors = append(b.Spec.Sectors, sealv1.SectorSpec{Number: 102}, sealv1.SectorSpec{Number: 103})
	for _, o := range opts {
		o(&b)
	}
	return &b
}

func TestSeedsCommand(t *testing.T) {
	b := batch("c1", fromSlot, withSeeds(sealv1.SectorSeed{Number: 100, Randomness: hexA, Epoch: 4000}))
	c := fakeClient(&b)

	in := "seeds:\n- {number: 100, randomness: " + hexA + ", epoch: 4000}\n- {number: 101, randomness: 0x" + hexB + ", epoch: 4001}\n"
	out, errOut, code := run(t, c, in, "seeds", "c1", "-f", "-")
	if code != 0 || out != "seeds written for sectors 101 of ns/c1\n" || !strings.Contains(errOut, "sectors 100 already have these seeds: skipped") {
		t.Fatalf("seeds -f - (exit %d): %q %q", code, out, errOut)
	}
	got := &sealv1.SealBatch{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "c1"}, got); err != nil {
		t.Fatal(err)
	}
	want := []sealv1.SectorSeed{{Number: 100, Randomness: hexA, Epoch: 4000}, {Number: 101, Randomness: hexB, Epoch: 4001}}
	if !reflect.DeepEqual(got.Spec.Seeds, want) {
		t.Errorf("spec.seeds after the patch: %+v, want %+v", got.Spec.Seeds, want)
	}

	// Every sector has its seed now: --random has nothing to add.
	out, _, code = run(t, c, "", "seeds", "c1", "--random")
	if code != 0 || !strings.Contains(out, "no new seeds for ns/c1") {
		t.Errorf("--random on a full batch (exit %d): %q", code, out)
	}

	// A conflicting seed is refused before anything is written.
	_, errOut, code = run(t, c, `[{"number": 101, "randomness": "`+hexA+`", "epoch": 4001}]`, "seeds", "c1", "-f", "-")
	if code != ExitError || !strings.Contains(errOut, "sector 101: randomness/epoch") {
		t.Errorf("conflicting seed: exit %d, %q", code, errOut)
	}

	_, errOut, code = run(t, c, "", "seeds", "c1")
	if code != ExitError || !strings.Contains(errOut, "give the seeds with -f FILE") {
		t.Errorf("no -f nor --random: exit %d, %q", code, errOut)
	}
	_, errOut, code = run(t, c, "", "seeds", "missing", "--random")
	if code != ExitError || !strings.Contains(errOut, "SealBatch ns/missing not found: kubectl get sealbatches -A lists them") {
		t.Errorf("unknown batch: exit %d, %q", code, errOut)
	}
}

func TestSeedsRandomCommand(t *testing.T) {
	b := fromSlotBatch4()
	c := fakeClient(b)
	out, errOut, code := run(t, c, "", "seeds", "four", "--random", "--epoch", "4000")
	if code != 0 || out != "seeds written for sectors 100, 101, 102, 103 of ns/four\n" {
		t.Fatalf("--random (exit %d): %q %q", code, out, errOut)
	}
	got := &sealv1.SealBatch{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "four"}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Seeds) != 4 || got.Spec.Seeds[3].Epoch != 4003 || got.Spec.Seeds[0].Randomness == got.Spec.Seeds[1].Randomness {
		t.Errorf("random seeds written: %+v", got.Spec.Seeds)
	}
	for _, s := range got.Spec.Seeds {
		if _, _, err := normalizeRandomness(s.Randomness); err != nil {
			t.Errorf("sector %d: %v", s.Number, err)
		}
	}
}
