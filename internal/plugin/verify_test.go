package plugin

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/render"
)

const sealerConfig = `{
  "proof": "StackedDrg8MiBV1_1",
  "output_dir": "/output",
  "metrics_port": 9464,
  "progress_file": "/output/progress.json",
  "prover_id": 18446744073709551615,
  "layer_devices": [{"path": "/dev/nvme1n1", "offset": 0}],
  "sectors": [
    {"sector_id": 9223372036854775807, "ticket": "01", "data": {"path": "/data/staged/1001", "pieces": [{"cid": "x", "size": 8388608}]}},
    {"sector_id": 1002, "ticket": "02"},
    {"sector_id": 1003, "sector_key": "/sector-keys/1003/sealed", "sector_key_cache": "/sector-keys/1003/cache", "data": {"path": "/data/u/1003"}}
  ]
}`

func TestOracleConfig(t *testing.T) {
	spec := &sealv1.SealBatchSpec{
		DataSource: &sealv1.DataSource{HostPath: &sealv1.HostPathData{Path: "/var/lib/sealfleet/deals"}},
		Update:     &sealv1.SnapUpdate{SectorKeys: sealv1.SectorKeySource{HostPath: &sealv1.HostPathData{Path: "/var/lib/sealfleet/output/ns/cc"}}},
	}
	out, err := OracleConfig([]byte(sealerConfig), "/tmp/x/out", spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{
  "proof": "StackedDrg8MiBV1_1",
  "output_dir": "/tmp/x/out",
  "prover_id": 18446744073709551615,
  "layer_devices": [{"path": "/dev/nvme1n1", "offset": 0}],
  "sectors": [
    {"sector_id": 9223372036854775807, "ticket": "01", "data": {"path": "/var/lib/sealfleet/deals/staged/1001", "pieces": [{"cid": "x", "size": 8388608}]}},
    {"sector_id": 1002, "ticket": "02"},
    {"sector_id": 1003, "sector_key": "/var/lib/sealfleet/output/ns/cc/1003/sealed", "sector_key_cache": "/var/lib/sealfleet/output/ns/cc/1003/cache", "data": {"path": "/var/lib/sealfleet/deals/u/1003"}}
  ]
}`), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("oracle config\n got %s", out)
	}
	// Integers keep every digit (a float64 round trip would not).
	for _, digits := range []string{"18446744073709551615", "9223372036854775807"} {
		if !contains(string(out), digits) {
			t.Errorf("oracle config lost %s: %s", digits, out)
		}
	}

	// Without hostPath volumes the pod paths stay (the oracle then reads them as given).
	out, err = OracleConfig([]byte(sealerConfig), "/o", &sealv1.SealBatchSpec{}, nil)
	if err != nil || !contains(string(out), `"/data/staged/1001"`) || !contains(string(out), `"/sector-keys/1003/sealed"`) {
		t.Errorf("no hostPaths: %s %v", out, err)
	}
	// A sector the batch left out is computed as the CC filler sealed in its place.
	out, err = OracleConfig([]byte(sealerConfig), "/o", spec, map[int64]bool{9223372036854775807: true})
	if err != nil || contains(string(out), "staged/1001") || !contains(string(out), `"/var/lib/sealfleet/deals/u/1003"`) {
		t.Errorf("a left-out sector: %s %v", out, err)
	}
	if _, err := OracleConfig([]byte(`[1]`), "/o", &sealv1.SealBatchSpec{}, nil); err == nil {
		t.Error("a config that is not an object must be refused")
	}
}

func TestParseOracleOutput(t *testing.T) {
	out := []byte("building parent cache...\nlabelling layer 1/2\n" + `{"sectors": [
	  {"sector_id": 1001, "comm_r": "0xABCDEF", "comm_d": "00"},
	  {"sector_id": "1002", "comm_r": "1111", "comm_r_new": "2222"}
	]}` + "\n")
	got, err := ParseOracleOutput(out)
	if want := map[int64]string{1001: "abcdef", 1002: "2222"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("oracle output: %v %v, want %v", got, err, want)
	}
	if _, err := ParseOracleOutput([]byte("panicked at src/main.rs")); err == nil {
		t.Error("output without JSON must be an error")
	}
}

func TestCompareCommR(t *testing.T) {
	sectors := []sealv1.SectorStatus{{Number: 1002, CommR: "0xBEEF"}, {Number: 1001, CommR: "abcd"}, {Number: 1003, CommR: "ffff"}}
	lines, differing := CompareCommR(sectors, map[int64]string{1001: "abcd", 1002: "beee"})
	want := []string{
		"sector 1001  commR abcd  matches rust-fil-proofs",
		"sector 1002  commR beef  DIFFERS from rust-fil-proofs beee",
		"sector 1003  commR ffff  DIFFERS from rust-fil-proofs (no such sector in its output)",
	}
	if differing != 2 || !reflect.DeepEqual(lines, want) {
		t.Errorf("compare: %d\n%q\nwant %q", differing, lines, want)
	}
	left := []sealv1.SectorStatus{{Number: 1001, CommR: "abcd"}, {Number: 1004, State: "Failed", Reason: "sector 1004: its data /d/1004 is not fr32-padded"}}
	if lines, differing := CompareCommR(left, map[int64]string{1001: "abcd", 1004: "0000"}); differing != 0 ||
		lines[1] != "sector 1004  left out of the batch: sector 1004: its data /d/1004 is not fr32-padded" {
		t.Errorf("a left-out sector: %d %q", differing, lines)
	}
	if lines, differing := CompareCommR(sectors[1:2], map[int64]string{1001: "abcd"}); differing != 0 || len(lines) != 1 {
		t.Errorf("a match: %d %q", differing, lines)
	}
}

func TestVerifyWithoutSectorsFails(t *testing.T) {
	b := batch("b", placedAt("n1", 0, sealv1.PhasePC1, 0))
	out, errOut, code := run(t, fakeClient(&b), "", "verify", "b", "--sealer", "/nonexistent/sealer")
	if code != ExitNotWanted || out != "no sectors in the batch status\n" || !contains(errOut, "has no sector results yet") {
		t.Errorf("exit %d %q %q", code, out, errOut)
	}
}

func TestOracleCommand(t *testing.T) {
	seal := oracleCommand(t.Context(), "/bin/sealer", "/tmp/v", false, "/cache")
	if want := []string{"/bin/sealer", "oracle", "--config", "/tmp/v/oracle.json"}; !reflect.DeepEqual(seal.Args, want) || seal.Dir != "/tmp/v" {
		t.Errorf("oracle: %q in %s", seal.Args, seal.Dir)
	}
	if env := seal.Env; len(env) == 0 || env[len(env)-1] != "FIL_PROOFS_PARENT_CACHE=/cache" {
		t.Errorf("oracle env ends %q", env[len(env)-1:])
	}
	snap := oracleCommand(t.Context(), "/bin/sealer", "/tmp/v", true, "/cache")
	if want := []string{"/bin/sealer", "oracle-snap", "--config", "/tmp/v/oracle.json", "--work", "/tmp/v/work"}; !reflect.DeepEqual(snap.Args, want) {
		t.Errorf("oracle-snap: %q", snap.Args)
	}
}

// The sealer config is found where the batch's pods run (status.podNamespace), by its UID.
func TestFindSealerConfig(t *testing.T) {
	b := &sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "b", UID: "u-1"}}
	b.Status.PodNamespace = "sealfleet-system"
	cm := func(ns, name, uid string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{render.LabelBatchUID: uid}}}
	}
	c := fake.NewClientBuilder().WithObjects(
		cm("sealfleet-system", "b-u-1-sealer-config", "u-1"),
		cm("sealfleet-system", "b-u-1-c1-seeds", "u-1"),
		cm("sealfleet-system", "b-u-2-sealer-config", "u-2"),
		cm("tenant", "b-sealer-config", "u-1"),
	).Build()
	got, err := findSealerConfig(context.Background(), c, b)
	if err != nil || got.Namespace != "sealfleet-system" || got.Name != "b-u-1-sealer-config" {
		t.Errorf("found %v, %v", got, err)
	}
	b.Status.PodNamespace = ""
	if got, err := findSealerConfig(context.Background(), c, b); err != nil || got.Namespace != "tenant" {
		t.Errorf("without podNamespace: %v, %v", got, err)
	}
	b.UID = "u-3"
	if _, err := findSealerConfig(context.Background(), c, b); err == nil || !strings.Contains(err.Error(), "no sealer config of tenant/b") {
		t.Errorf("missing: %v", err)
	}
}
