package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/testenv"
)

const ticketA = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"

// batch builds a SealBatch manifest around a spec written in YAML.
func batch(t *testing.T, name, specYAML string) *unstructured.Unstructured {
	t.Helper()
	var spec map[string]any
	if err := yaml.Unmarshal([]byte(specYAML), &spec); err != nil {
		t.Fatalf("bad test YAML for %s: %v", name, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(testenv.SealBatchGVK)
	u.SetName(name)
	u.SetNamespace("default")
	return u
}

// dataSectors is n data sectors of `pieces` pieces each (the API's limits, for CEL's cost).
func dataSectors(n, pieces int) string {
	var b strings.Builder
	b.WriteString("sectors:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "- {number: %d, ticket: %q, data: {file: s-%d, pieces: [", 1000+i, ticketA, i)
		for j := 0; j < pieces; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{cid: %s, size: 268435456}", pieceCID)
		}
		b.WriteString("]}}\n")
	}
	return b.String()
}

func sectorsYAML(n int) string {
	var b strings.Builder
	b.WriteString("sectors:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "- {number: %d, ticket: %q}\n", 1000+i, ticketA)
	}
	return b.String()
}

const okBase = "sectorSize: 8MiB\nminerID: t01000\n"

// A batch handed to lotus: hostPath output in the Lotus layout, CC sectors with ticket epochs.
const (
	handoffOut     = "output: {hostPath: {path: /var/lib/sealfleet/output}, layout: Lotus}\n"
	handoffSectors = "sectors:\n- {number: 1, ticket: \"" + ticketA + "\", ticketEpoch: 4000}\n"
)

const (
	pieceCID = "baga6ea4seaqao7s73y24kcutaosvacpdjgfe5pw76ooefnyqw4ynr3d2y6x2mpq"
	dataSrc  = "dataSource: {hostPath: {path: /deals}}\n"
)

// An update's pieces: its sector keys on a node it is pinned to, and one sector with data and
// no ticket.
const (
	updateKeys   = "update: {sectorKeys: {hostPath: {path: /var/lib/sealfleet/output/default/cc}, layout: Lotus}}\n"
	pinned       = "placement: {nodeName: n1}\n"
	updateSector = "sectors:\n- {number: 1, data: {file: s1, pieces: [{cid: " + pieceCID + ", size: 8388608}]}}\n"
)

// dataSector is one data sector's YAML with its file and pieces (flow-style piece list).
func dataSector(file, pieces string) string {
	return fmt.Sprintf("sectors:\n- {number: 1, ticket: %q, data: {file: %q, pieces: [%s]}}\n", ticketA, file, pieces)
}

func TestSealBatchValidation(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()

	bad := []struct {
		name string
		spec string
		want []string // substrings the API server's error must contain (field + fix)
	}{
		{"unknown-sector-size", "sectorSize: 16GiB\nminerID: t01000\n" + sectorsYAML(1),
			[]string{"spec.sectorSize", "supported values", "32GiB"}},
		{"batch-size-3", okBase + sectorsYAML(3),
			[]string{"spec.sectors", "1, 2, 4, 8, 16, 32, 64 or 128"}},
		{"batch-size-0", okBase + "sectors: []\n",
			[]string{"spec.sectors", "at least 1"}},
		{"batch-size-256", okBase + sectorsYAML(129),
			[]string{"spec.sectors", "at most 128"}},
		{"duplicate-sectors", okBase + "sectors:\n- {number: 7, ticket: \"" + ticketA + "\"}\n- {number: 7, ticket: \"" + ticketA + "\"}\n",
			[]string{"spec.sectors", "unique", "renumber"}},
		{"ticket-short", okBase + "sectors:\n- {number: 1, ticket: \"abcd\"}\n",
			[]string{"spec.sectors[0].ticket", "32 bytes", "64 hex"}},
		{"ticket-not-hex", okBase + "sectors:\n- {number: 1, ticket: \"" + strings.Repeat("zz", 32) + "\"}\n",
			[]string{"spec.sectors[0].ticket", "64 hex"}},
		{"ticket-base64-wrong-length", okBase + "sectors:\n- {number: 1, ticket: \"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0e\"}\n",
			[]string{"spec.sectors[0].ticket", "base64"}},
		{"commd-malformed", okBase + "sectors:\n- {number: 1, ticket: \"" + ticketA + "\", commD: \"bafy123\"}\n",
			[]string{"spec.sectors[0].commD", "baga6ea4seaq", "64 hex"}},
		// A well-formed commD without the sector's data is refused: the replica could never be
		// proven (a second sector shows the error names the right one).
		{"commd-hex-without-data", okBase + "sectors:\n- {number: 1, ticket: \"" + ticketA + "\"}\n- {number: 2, ticket: \"" + ticketA + "\", commD: \"" + strings.Repeat("ab", 32) + "\"}\n",
			[]string{"spec.sectors[1].commD", "needs the sector's data", "omit commD"}},
		{"commd-cid-without-data", okBase + "sectors:\n- {number: 1, ticket: \"" + ticketA + "\", commD: \"baga6ea4seaqao7s73y24kcutaosvacpdjgfe5pw76ooefnyqw4ynr3d2y6x2mpq\"}\n",
			[]string{"spec.sectors[0].commD", "needs the sector's data"}},
		{"data-without-source", okBase + dataSector("s1", "{cid: "+pieceCID+", size: 8388608}"),
			[]string{"spec.dataSource", "hostPath or persistentVolumeClaim"}},
		{"source-without-data", okBase + "dataSource: {hostPath: {path: /deals}}\n" + sectorsYAML(1),
			[]string{"spec.dataSource", "only read for sectors with data"}},
		{"source-both", okBase + "dataSource: {hostPath: {path: /deals}, persistentVolumeClaim: {claimName: c}}\n" + dataSector("s1", "{cid: "+pieceCID+", size: 128}"),
			[]string{"spec.dataSource", "exactly one"}},
		{"data-file-absolute", okBase + dataSrc + dataSector("/etc/passwd", "{cid: "+pieceCID+", size: 128}"),
			[]string{"spec.sectors[0].data.file", "relative"}},
		{"data-file-climbs", okBase + dataSrc + dataSector("a/../../b", "{cid: "+pieceCID+", size: 128}"),
			[]string{"spec.sectors[0].data.file", "'..'"}},
		{"data-no-pieces", okBase + dataSrc + "sectors:\n- {number: 1, ticket: \"" + ticketA + "\", data: {file: s1, pieces: []}}\n",
			[]string{"spec.sectors[0].data.pieces", "at least 1"}},
		{"piece-size-not-padded", okBase + dataSrc + dataSector("s1", "{cid: "+pieceCID+", size: 127}"),
			[]string{"spec.sectors[0].data.pieces[0].size", "power of two"}},
		{"piece-cid-not-piece", okBase + dataSrc + dataSector("s1", "{cid: bafy123, size: 128}"),
			[]string{"spec.sectors[0].data.pieces[0].cid", "baga6ea4seaq"}},
		{"pieces-larger-than-sector", okBase + dataSrc + dataSector("s1", "{cid: "+pieceCID+", size: 8388608}, {cid: "+pieceCID+", size: 128}"),
			[]string{"spec.sectors", "larger than spec.sectorSize"}},
		{"miner-id-bad", "sectorSize: 8MiB\nminerID: f1abc\n" + sectorsYAML(1),
			[]string{"spec.minerID", "should match"}},
		{"miner-id-leading-zero", "sectorSize: 8MiB\nminerID: f0012\n" + sectorsYAML(1),
			[]string{"spec.minerID"}},
		{"negative-sector-number", okBase + "sectors:\n- {number: -1, ticket: \"" + ticketA + "\"}\n",
			[]string{"spec.sectors[0].number", "greater than or equal to 0"}},
		{"proof-type-unknown", okBase + "proofType: V2\n" + sectorsYAML(1),
			[]string{"spec.proofType", "V1_1"}},
		{"node-name-and-selector", okBase + "placement: {nodeName: n1, nodeSelector: {a: b}}\n" + sectorsYAML(1),
			[]string{"spec.placement", "either nodeName", "not both"}},
		{"output-both", okBase + "output: {hostPath: {path: /x}, persistentVolumeClaim: {claimName: c}}\n" + sectorsYAML(1),
			[]string{"spec.output", "exactly one"}},
		{"output-relative-path", okBase + "output: {hostPath: {path: x/y}}\n" + sectorsYAML(1),
			[]string{"spec.output.hostPath.path"}},
		{"output-dotdot", okBase + "output: {hostPath: {path: /var/lib/sealfleet/output/../../../etc}}\n" + sectorsYAML(1),
			[]string{"spec.output.hostPath.path", "without . or .. segments"}},
		{"source-dotdot", okBase + "dataSource: {hostPath: {path: /var/lib/sealfleet/deals/..}}\n" + dataSector("s1", "{cid: "+pieceCID+", size: 128}"),
			[]string{"spec.dataSource.hostPath.path", "without . or .. segments", "hostPathRoots"}},
		{"keys-double-slash", okBase + "placement: {nodeName: n1}\nupdate: {sectorKeys: {hostPath: {path: /var/lib//x}, layout: Lotus}}\n" + sectorsYAML(1),
			[]string{"spec.update.sectorKeys.hostPath.path", "//"}},
		{"ttl-without-policy", okBase + "releaseTTL: 1h\n" + sectorsYAML(1),
			[]string{"spec.releaseTTL", "AfterTTL"}},
		{"policy-without-ttl", okBase + "releasePolicy: AfterTTL\n" + sectorsYAML(1),
			[]string{"releaseTTL"}},
		{"ttl-absurd", okBase + "releasePolicy: AfterTTL\nreleaseTTL: 9000h\n" + sectorsYAML(1),
			[]string{"spec.releaseTTL", "720h"}},
		{"retries-negative", okBase + "maxRetries: -1\n" + sectorsYAML(1),
			[]string{"spec.maxRetries", "greater than or equal to 0"}},
		{"retries-absurd", okBase + "maxRetries: 1000\n" + sectorsYAML(1),
			[]string{"spec.maxRetries", "less than or equal to 10"}},
		{"priority-absurd", okBase + "priority: 100000\n" + sectorsYAML(1),
			[]string{"spec.priority"}},
		{"pc2-engine-unknown", okBase + "pc2Engine: fpga\n" + sectorsYAML(1),
			[]string{"spec.pc2Engine", "cpu", "gpu"}},
		{"release-policy-unknown", okBase + "releasePolicy: Never\n" + sectorsYAML(1),
			[]string{"spec.releasePolicy", "OnCompletion"}},
		{"seal-without-ticket", okBase + "sectors:\n- {number: 1}\n",
			[]string{"spec.sectors[].ticket", "needs its ticket"}},
		{"update-with-ticket", okBase + updateKeys + pinned + dataSrc + dataSector("s1", "{cid: "+pieceCID+", size: 8388608}"),
			[]string{"spec.sectors", "no ticket"}},
		{"update-without-data", okBase + updateKeys + pinned + "sectors:\n- {number: 1}\n",
			[]string{"spec.sectors", "needs its data"}},
		{"gpus-on-the-cpu", okBase + "gpus: 2\n" + sectorsYAML(1),
			[]string{"spec.gpus", "only pc2Engine gpu"}},
		{"gpus-zero", okBase + "pc2Engine: gpu\ngpus: 0\n" + sectorsYAML(1),
			[]string{"spec.gpus", "a count from 1 to 16, or All"}},
		{"gpus-17", okBase + "pc2Engine: gpu\ngpus: 17\n" + sectorsYAML(1),
			[]string{"spec.gpus", "a count from 1 to 16, or All"}},
		{"gpus-some", okBase + "pc2Engine: gpu\ngpus: some\n" + sectorsYAML(1),
			[]string{"spec.gpus", "a count from 1 to 16, or All"}},
		{"gpus-all-on-the-cpu", okBase + "gpus: All\n" + sectorsYAML(1),
			[]string{"spec.gpus", "only pc2Engine gpu"}},
		{"commr-in-a-seal", okBase + "sectors:\n- {number: 1, ticket: \"" + ticketA + "\", commR: " + ticketA + "}\n",
			[]string{"spec.sectors[].commR", "only an update"}},
		{"update-commr-piece-cid", okBase + updateKeys + pinned + dataSrc +
			"sectors:\n- {number: 1, commR: " + pieceCID + ", data: {file: s1, pieces: [{cid: " + pieceCID + ", size: 8388608}]}}\n",
			[]string{"spec.sectors[0].commR", "bagboea4b5abc"}},
		{"update-hostpath-not-pinned", okBase + updateKeys + dataSrc + updateSector,
			[]string{"spec.placement.nodeName", "pin the update"}},
		{"update-gpu", okBase + updateKeys + pinned + "pc2Engine: gpu\n" + dataSrc + updateSector,
			[]string{"spec.pc2Engine", "on the CPU"}},
		{"update-lotus-output", okBase + updateKeys + pinned + "output: {hostPath: {path: /o}, layout: Lotus}\n" + dataSrc + updateSector,
			[]string{"spec.output.layout", "update-cache"}},
		{"update-keys-both", okBase + "update: {sectorKeys: {hostPath: {path: /k}, persistentVolumeClaim: {claimName: c}}}\n" + pinned + dataSrc + updateSector,
			[]string{"spec.update.sectorKeys", "exactly one"}},
		{"from-slot-synthetic", okBase + "proofType: V1_1_Feat_SyntheticPoRep\ncommit1: FromSlot\n" + sectorsYAML(1),
			[]string{"spec.commit1", "interactive proofs"}},
		{"seeds-without-from-slot", okBase + "seeds: [{number: 1000, randomness: \"" + ticketA + "\", epoch: 1}]\n" + sectorsYAML(1),
			[]string{"spec.seeds", "commit1 FromSlot"}},
		{"seed-for-another-sector", okBase + "commit1: FromSlot\nseeds: [{number: 7, randomness: \"" + ticketA + "\", epoch: 1}]\n" + sectorsYAML(1),
			[]string{"spec.seeds", "a sector of the batch"}},
		{"seed-not-32-bytes", okBase + "commit1: FromSlot\nseeds: [{number: 1000, randomness: abcd, epoch: 1}]\n" + sectorsYAML(1),
			[]string{"spec.seeds[0].randomness", "32 bytes"}},
		{"seed-timeout-without-from-slot", okBase + "seedTimeout: 1h\n" + sectorsYAML(1),
			[]string{"spec.seedTimeout", "FromSlot"}},
		{"abandoned-without-from-slot", okBase + "abandonedSectors: [1000]\n" + sectorsYAML(1),
			[]string{"spec.abandonedSectors", "commit1 FromSlot"}},
		{"abandoned-another-sector", okBase + "commit1: FromSlot\nabandonedSectors: [7]\n" + sectorsYAML(1),
			[]string{"spec.abandonedSectors", "a sector of the batch"}},
		{"resident-over-100", okBase + "residentLayerPercent: 101\n" + sectorsYAML(1),
			[]string{"spec.residentLayerPercent", "less than or equal to 100"}},
		{"resident-in-update", okBase + updateKeys + pinned + "residentLayerPercent: 50\n" + dataSrc + updateSector,
			[]string{"spec.residentLayerPercent", "an update labels no layers"}},
		{"commit1-unknown", okBase + "commit1: Later\n" + sectorsYAML(1),
			[]string{"spec.commit1", "LayerFiles"}},
		{"handoff-without-from-slot", okBase + handoffOut + "handoff: {lotusMiner: m1}\n" + handoffSectors,
			[]string{"spec.handoff", "commit1: FromSlot", "V1_1"}},
		{"handoff-without-ticket-epoch", okBase + handoffOut + "commit1: FromSlot\nhandoff: {lotusMiner: m1}\n" + sectorsYAML(1),
			[]string{"spec.sectors", "ticketEpoch", "lotus checks the ticket"}},
		{"handoff-data-sector", okBase + handoffOut + "commit1: FromSlot\nhandoff: {lotusMiner: m1}\n" + dataSrc + dataSector("s1", "{cid: "+pieceCID+", size: 128}"),
			[]string{"spec.sectors", "data sectors are not handed over"}},
		{"handoff-sealfleet-layout", okBase + "commit1: FromSlot\nhandoff: {lotusMiner: m1}\n" + handoffSectors,
			[]string{"spec.output", "layout Lotus"}},
		{"handoff-no-miner", okBase + handoffOut + "commit1: FromSlot\nhandoff: {lotusMiner: \"\"}\n" + handoffSectors,
			[]string{"spec.handoff.lotusMiner"}},
		{"ticket-epoch-negative", okBase + "sectors:\n- {number: 1, ticket: \"" + ticketA + "\", ticketEpoch: -5}\n",
			[]string{"spec.sectors[0].ticketEpoch", "greater than or equal to 0"}},
		{"update-keys-layout-unknown", okBase + "update: {sectorKeys: {persistentVolumeClaim: {claimName: c}, layout: Boost}}\n" + dataSrc + updateSector,
			[]string{"spec.update.sectorKeys.layout", "Lotus"}},
	}
	// A name whose pods could not carry it as their sealfleet.io/batch label is refused before
	// it is stored (it used to be placed, hold the node's slot and never get a pod); 63 is fine.
	t.Run("rejects/name-over-63", func(t *testing.T) {
		err := env.Client.Create(ctx, batch(t, strings.Repeat("n", 64), okBase+sectorsYAML(1)))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name: at most 63 characters") {
			t.Fatalf("a 64-character name: want Invalid naming metadata.name and the limit, got %v", err)
		}
	})
	t.Run("accepts/name-of-63", func(t *testing.T) {
		if err := env.Client.Create(ctx, batch(t, strings.Repeat("m", 63), okBase+sectorsYAML(1))); err != nil {
			t.Fatalf("a 63-character name: %v", err)
		}
	})
	for _, tc := range bad {
		t.Run("rejects/"+tc.name, func(t *testing.T) {
			err := env.Client.Create(ctx, batch(t, tc.name, tc.spec))
			if err == nil {
				t.Fatalf("the API server accepted an invalid SealBatch (%s)", tc.name)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}

	t.Run("defaults", func(t *testing.T) {
		u := batch(t, "defaults", okBase+sectorsYAML(2))
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		var got sealv1.SealBatch
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), &got); err != nil {
			t.Fatal(err)
		}
		s := got.Spec
		if s.ProofType != sealv1.ProofTypeV1_1 || s.PC2Engine != sealv1.PC2EngineCPU ||
			s.ReleasePolicy != sealv1.ReleaseOnCompletion || s.Retries() != sealv1.DefaultMaxRetries || s.MaxRetries == nil || s.Priority != 0 {
			t.Errorf("defaults not applied: %+v", s)
		}
		if s.Output == nil || s.Output.HostPath == nil || s.Output.HostPath.Path != "/var/lib/sealfleet/output" {
			t.Errorf("output default not applied: %+v", s.Output)
		}
	})

	t.Run("accepts", func(t *testing.T) {
		good := map[string]string{
			"base64-ticket":  okBase + "sectors:\n- {number: 1, ticket: \"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=\"}\n",
			"batch-128":      "sectorSize: 2KiB\nminerID: f099\n" + sectorsYAML(128),
			"ttl":            okBase + "releasePolicy: AfterTTL\nreleaseTTL: 24h\n" + sectorsYAML(1),
			"synthetic-64g":  "sectorSize: 64GiB\nproofType: V1_1_Feat_SyntheticPoRep\nminerID: f01\n" + sectorsYAML(16),
			"max-sector-num": okBase + "sectors:\n- {number: 9007199254740992, ticket: \"" + ticketA + "\"}\n",
			// A data sector (commD optional) beside a CC one, from a claim.
			"data-and-cc": okBase + "dataSource: {persistentVolumeClaim: {claimName: deals}}\nsectors:\n" +
				"- {number: 1, ticket: \"" + ticketA + "\", commD: " + pieceCID + ", data: {file: staged/s-1, pieces: [{cid: " + pieceCID + ", size: 4194304}, {cid: " + strings.Repeat("0c", 32) + ", size: 4194304}]}}\n" +
				"- {number: 2, ticket: \"" + ticketA + "\"}\n",
			"data-128-sectors-full": "sectorSize: 64GiB\nminerID: f01\n" + dataSrc + dataSectors(128, 64),
			"update-pinned":         okBase + updateKeys + pinned + dataSrc + updateSector,
			"four-gpus":             okBase + "pc2Engine: gpu\ngpus: 4\n" + sectorsYAML(2),
			"all-gpus":              okBase + "pc2Engine: gpu\ngpus: All\n" + sectorsYAML(2),
			"update-commr": okBase + updateKeys + pinned + dataSrc + "sectors:\n" +
				"- {number: 1, commR: bagboea4b5abcaaahbykryizkge4d6rsnkrnwe2lqo57ildettkq2rl5wxxcmxuwz, data: {file: s1, pieces: [{cid: " + pieceCID + ", size: 8388608}]}}\n" +
				"- {number: 2, commR: " + ticketA + ", data: {file: s2, pieces: [{cid: " + pieceCID + ", size: 8388608}]}}\n",
			"resident-half":       "sectorSize: 32GiB\nminerID: f01\nresidentLayerPercent: 50\n" + sectorsYAML(32),
			"handoff-to-lotus":    okBase + handoffOut + "commit1: FromSlot\nhandoff: {lotusMiner: m1}\n" + handoffSectors,
			"from-slot-seeded":    okBase + "commit1: FromSlot\nseedTimeout: 48h\nseeds: [{number: 1001, randomness: \"" + ticketA + "\", epoch: 4242}]\n" + sectorsYAML(2),
			"from-slot-abandoned": okBase + "commit1: FromSlot\nabandonedSectors: [1000]\nseeds: [{number: 1001, randomness: \"" + ticketA + "\", epoch: 4242}]\n" + sectorsYAML(2),
			"synthetic-seeded":    okBase + "proofType: V1_1_Feat_SyntheticPoRep\nseeds: [{number: 1000, randomness: \"" + ticketA + "\", epoch: 4242}]\n" + sectorsYAML(2),
			"update-from-claim": okBase + "update: {sectorKeys: {persistentVolumeClaim: {claimName: cc}, layout: Lotus}}\n" +
				"dataSource: {persistentVolumeClaim: {claimName: deals}}\n" + updateSector,
		}
		for name, spec := range good {
			if err := env.Client.Create(ctx, batch(t, name, spec)); err != nil {
				t.Errorf("%s rejected: %v", name, err)
			}
		}
	})

	t.Run("immutable-after-placement", func(t *testing.T) {
		u := batch(t, "placed", okBase+sectorsYAML(2))
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		key := types.NamespacedName{Namespace: "default", Name: "placed"}
		var b sealv1.SealBatch
		if err := env.Client.Get(ctx, key, &b); err != nil {
			t.Fatal(err)
		}
		// Before placement the sectors may still be edited.
		b.Spec.Sectors[1].Number = 4242
		if err := env.Client.Update(ctx, &b); err != nil {
			t.Fatalf("edit before placement rejected: %v", err)
		}
		b.Status.Node = "node-a"
		if err := env.Client.Status().Update(ctx, &b); err != nil {
			t.Fatal(err)
		}
		edits := map[string]func(*sealv1.SealBatch){
			"spec.sectors":    func(b *sealv1.SealBatch) { b.Spec.Sectors[0].Ticket = strings.Repeat("cd", 32) },
			"spec.sectorSize": func(b *sealv1.SealBatch) { b.Spec.SectorSize = sealv1.SectorSize2KiB },
			"spec.proofType":  func(b *sealv1.SealBatch) { b.Spec.ProofType = sealv1.ProofTypeSyntheticPoRep },
			"spec.minerID":    func(b *sealv1.SealBatch) { b.Spec.MinerID = "t02000" },
			"spec.handoff":    func(b *sealv1.SealBatch) { b.Spec.Handoff = &sealv1.Handoff{LotusMiner: "m1"} },
			"spec.dataSource": func(b *sealv1.SealBatch) {
				b.Spec.DataSource = &sealv1.DataSource{HostPath: &sealv1.HostPathData{Path: "/deals"}}
				b.Spec.Sectors[0].Data = &sealv1.SectorData{File: "s", Pieces: []sealv1.Piece{{CID: strings.Repeat("0c", 32), Size: 128}}}
			},
		}
		for field, edit := range edits {
			var cur sealv1.SealBatch
			if err := env.Client.Get(ctx, key, &cur); err != nil {
				t.Fatal(err)
			}
			edit(&cur)
			err := env.Client.Update(ctx, &cur)
			if err == nil || !strings.Contains(err.Error(), field+" cannot change after the batch is placed") {
				t.Errorf("edit of %s after placement: want rejection naming the field, got %v", field, err)
			}
		}
		// Seeds are added after placement; one given cannot change.
		var seeded sealv1.SealBatch
		u2 := batch(t, "seeded", okBase+"commit1: FromSlot\n"+sectorsYAML(2))
		if err := env.Client.Create(ctx, u2); err != nil {
			t.Fatal(err)
		}
		k2 := types.NamespacedName{Namespace: "default", Name: "seeded"}
		if err := env.Client.Get(ctx, k2, &seeded); err != nil {
			t.Fatal(err)
		}
		seeded.Status.Node = "node-a"
		if err := env.Client.Status().Update(ctx, &seeded); err != nil {
			t.Fatal(err)
		}
		seeded.Spec.Seeds = []sealv1.SectorSeed{{Number: 1000, Randomness: ticketA, Epoch: 10}}
		if err := env.Client.Update(ctx, &seeded); err != nil {
			t.Fatalf("adding a seed after placement rejected: %v", err)
		}
		seeded.Spec.Seeds = append(seeded.Spec.Seeds, sealv1.SectorSeed{Number: 1001, Randomness: ticketA, Epoch: 11})
		if err := env.Client.Update(ctx, &seeded); err != nil {
			t.Fatalf("adding a second seed rejected: %v", err)
		}
		seeded.Spec.Seeds[0].Epoch = 12
		if err := env.Client.Update(ctx, &seeded); err == nil || !strings.Contains(err.Error(), "a seed once given cannot change") {
			t.Errorf("changing a seed: %v", err)
		}
		if err := env.Client.Get(ctx, k2, &seeded); err != nil {
			t.Fatal(err)
		}
		seeded.Spec.Commit1 = sealv1.Commit1LayerFiles
		seeded.Spec.Seeds = nil
		if err := env.Client.Update(ctx, &seeded); err == nil || !strings.Contains(err.Error(), "spec.commit1 cannot change") {
			t.Errorf("changing commit1 after placement: %v", err)
		}
		// Fields that are not frozen still change.
		var cur sealv1.SealBatch
		if err := env.Client.Get(ctx, key, &cur); err != nil {
			t.Fatal(err)
		}
		cur.Spec.OutputsTaken = true
		if err := env.Client.Update(ctx, &cur); err != nil {
			t.Errorf("outputsTaken edit after placement rejected: %v", err)
		}
	})

	t.Run("sealernode", func(t *testing.T) {
		bad := map[string]struct {
			spec string
			want string
		}{
			"vfio-with-path":   {"deviceMode: vfio\nlayerDevices:\n- {path: /dev/nvme0n1}\n", "deviceMode vfio needs every device given by pciAddress"},
			"device-both":      {"layerDevices:\n- {path: /dev/nvme0n1, pciAddress: \"0000:41:00.0\"}\n", "exactly one of pciAddress or path"},
			"device-neither":   {"layerDevices:\n- {}\n", "exactly one of pciAddress or path"},
			"bad-bdf":          {"layerDevices:\n- {pciAddress: \"41:00.0\"}\n", "spec.layerDevices[0].pciAddress"},
			"pipelines-3":      {"pipelines: 3\n", "spec.pipelines"},
			"hugepages-absurd": {"hugepages1GiPerNUMANode: 100000\n", "spec.hugepages1GiPerNUMANode"},
			"reserved-garbage": {"reservedCPUs: \"0-1,x\"\n", "spec.reservedCPUs"},
			"hpc-3":            {"hashersPerCore: 3\n", "spec.hashersPerCore"},
			"root-slash":       {"hostPathRoots: [/]\n", "spec.hostPathRoots[0]"},
			"root-dotdot":      {"hostPathRoots: [/var/lib/sealfleet/..]\n", "without . or .. segments"},
			"output-outside":   {"outputPaths: [/etc]\n", "spec.outputPaths: every output path must lie under one of spec.hostPathRoots"},
			"output-prefix":    {"outputPaths: [/var/lib/sealfleet-other]\n", "spec.outputPaths"},
			"cache-outside":    {"hostPathRoots: [/srv/sealing]\noutputPaths: [/srv/sealing/out]\n", "spec.parentCache.path"},
			"layer-file-out":   {"layerDevices:\n- {path: /etc/shadow}\n", "file-backed layer device must lie under one of spec.hostPathRoots"},
		}
		for name, tc := range bad {
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
			u.SetGroupVersionKind(testenv.SealerNodeGVK)
			u.SetName(name)
			err := env.Client.Create(ctx, u)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: want rejection mentioning %q, got %v", name, tc.want, err)
			}
		}
	})

	t.Run("samples", func(t *testing.T) {
		files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "sealfleet_*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no samples found: %v", err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(data, &u.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if u.GetNamespace() == "" && u.GetKind() == "SealBatch" {
				u.SetNamespace("default")
			}
			if err := env.Client.Create(ctx, u); err != nil {
				t.Errorf("sample %s rejected: %v", filepath.Base(f), err)
			}
		}
	})
}
