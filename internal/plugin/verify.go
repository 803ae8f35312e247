package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/render"
)

// The sealer pod's mount points that the batch's volumes hide behind in its config.
const (
	podDataDir       = "/data"
	podSectorKeysDir = "/sector-keys"
)

// defaultParentCache is where rust-fil-proofs keeps parent caches unless
// FIL_PROOFS_PARENT_CACHE says otherwise.
const defaultParentCache = "/var/tmp/filecoin-parents"

// OracleConfig turns the sealer config the operator wrote for the batch into one the oracle
// runs on this host: outputs into outDir, no metrics port or progress file, and the data
// files and sector keys at their host paths (spec.dataSource / spec.update.sectorKeys
// hostPath) instead of the pod's mounts. A sector the batch left out (leftOut: its checks
// failed) is computed as the CC filler the sealer sealed in its place (the sealer runs only
// some batch sizes), and not compared. Every other key is kept as it is.
func OracleConfig(raw []byte, outDir string, spec *sealv1.SealBatchSpec, leftOut map[int64]bool) ([]byte, error) {
	var cfg map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // sector numbers and sizes stay exact
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("the sealer config is not a JSON object: %w", err)
	}
	cfg["output_dir"] = outDir
	delete(cfg, "metrics_port")
	delete(cfg, "progress_file")

	var dataDir, keysDir string
	if ds := spec.DataSource; ds != nil && ds.HostPath != nil {
		dataDir = ds.HostPath.Path
	}
	if u := spec.Update; u != nil && u.SectorKeys.HostPath != nil {
		keysDir = u.SectorKeys.HostPath.Path
	}
	sectors, _ := cfg["sectors"].([]any)
	for i, s := range sectors {
		sector, ok := s.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("the sealer config's sectors[%d] is not an object", i)
		}
		if id, ok := sector["sector_id"].(json.Number); ok && leftOut[numberOf(id)] {
			delete(sector, "data")
			delete(sector, "comm_d")
		}
		if data, ok := sector["data"].(map[string]any); ok && dataDir != "" {
			if p, ok := data["path"].(string); ok {
				data["path"] = dataDir + strings.TrimPrefix(p, podDataDir)
			}
		}
		for _, k := range []string{"sector_key", "sector_key_cache"} {
			if p, ok := sector[k].(string); ok && keysDir != "" {
				sector[k] = keysDir + strings.TrimPrefix(p, podSectorKeysDir)
			}
		}
	}
	return json.Marshal(cfg)
}

// ParseOracleOutput reads the oracle's output, some text and then a JSON object, into each
// sector's expected CommR (comm_r_new for an update), lower-case hex without 0x.
func ParseOracleOutput(out []byte) (map[int64]string, error) {
	i := bytes.IndexByte(out, '{')
	if i < 0 {
		return nil, errors.New("the oracle printed no JSON object")
	}
	var doc struct {
		Sectors []struct {
			SectorID json.Number `json:"sector_id"`
			CommR    string      `json:"comm_r"`
			CommRNew string      `json:"comm_r_new"`
		} `json:"sectors"`
	}
	dec := json.NewDecoder(bytes.NewReader(out[i:]))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("reading the oracle's JSON: %w", err)
	}
	want := make(map[int64]string, len(doc.Sectors))
	for _, s := range doc.Sectors {
		id, err := strconv.ParseInt(s.SectorID.String(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("the oracle's sector_id %q is not a sector number", s.SectorID)
		}
		comm := s.CommRNew
		if comm == "" {
			comm = s.CommR
		}
		want[id] = normalizeHex(comm)
	}
	return want, nil
}

func numberOf(n json.Number) int64 {
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		return -1
	}
	return v
}

func normalizeHex(s string) string { return strings.TrimPrefix(strings.ToLower(s), "0x") }

// CompareCommR prints one line per sector of the status, by number: its CommR and whether
// rust-fil-proofs computed the same (a sector the batch left out: why); it returns the lines
// and how many differ.
func CompareCommR(sectors []sealv1.SectorStatus, want map[int64]string) (lines []string, differing int) {
	sorted := append([]sealv1.SectorStatus{}, sectors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Number < sorted[j].Number })
	for _, s := range sorted {
		got := normalizeHex(s.CommR)
		exp, ok := want[s.Number]
		switch {
		case s.State == "Failed":
			lines = append(lines, fmt.Sprintf("sector %d  left out of the batch: %s", s.Number, s.Reason))
		case ok && got == exp:
			lines = append(lines, fmt.Sprintf("sector %d  commR %s  matches rust-fil-proofs", s.Number, got))
		case ok:
			differing++
			lines = append(lines, fmt.Sprintf("sector %d  commR %s  DIFFERS from rust-fil-proofs %s", s.Number, got, exp))
		default:
			differing++
			lines = append(lines, fmt.Sprintf("sector %d  commR %s  DIFFERS from rust-fil-proofs (no such sector in its output)", s.Number, got))
		}
	}
	return lines, differing
}

// oracleCommand is the sealer invocation that recomputes the batch: oracle-snap for an update
// (encode_into), oracle (a whole seal) otherwise.
func oracleCommand(ctx context.Context, sealer, dir string, update bool, parentCache string) *exec.Cmd {
	cfg := filepath.Join(dir, "oracle.json")
	if update {
		cmd := exec.CommandContext(ctx, sealer, "oracle-snap", "--config", cfg, "--work", filepath.Join(dir, "work"))
		cmd.Dir = dir
		return cmd
	}
	cmd := exec.CommandContext(ctx, sealer, "oracle", "--config", cfg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "FIL_PROOFS_PARENT_CACHE="+parentCache)
	return cmd
}

func (a *app) verifyCommand() *cobra.Command {
	var sealer, parentCache string
	cmd := &cobra.Command{
		Use:   "verify NAME --sealer PATH [--parent-cache DIR]",
		Short: "Recompute a batch's sectors with rust-fil-proofs on this host and compare CommR",
		Long: `Recompute the batch's sectors with rust-fil-proofs on this host (the sealer binary's
oracle subcommand, or oracle-snap for an update) from the config the operator wrote for it
(its sealer-config ConfigMap, where its pods run: status.podNamespace), and compare each sector's CommR in the batch status (for
an update, comm_r_new) with it. Data files and sector keys are read at their host paths
(spec.dataSource and spec.update.sectorKeys hostPath), so run it on the batch's node.

Prints one line per sector; exits 1 when any differs or the status has no sectors.`,
		Example: `  kubectl sealfleet verify -n sealfleet-batches cc-8mib --sealer sealer-image/target/release/sealer`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if sealer == "" {
				return errors.New("--sealer PATH: the sealer binary with the oracle subcommand is needed")
			}
			ctx := cmd.Context()
			c, ns, b, err := a.batchNamed(ctx, args[0])
			if err != nil {
				return err
			}
			key := ns + "/" + b.Name
			if len(b.Status.Sectors) == 0 {
				fmt.Fprintln(a.env.Out, "no sectors in the batch status")
				return notWanted("SealBatch %s has no sector results yet (phase %s): nothing to compare", key, phaseOf(b))
			}
			cm, err := findSealerConfig(ctx, c, b)
			if err != nil {
				return err
			}
			cmName := cm.Namespace + "/" + cm.Name
			raw, ok := cm.Data[render.ConfigKey]
			if !ok {
				return fmt.Errorf("ConfigMap %s has no %s key", cmName, render.ConfigKey)
			}
			dir, err := os.MkdirTemp("", "sealfleet-verify-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			leftOut := map[int64]bool{}
			for _, s := range b.Status.Sectors {
				leftOut[s.Number] = s.State == "Failed"
			}
			cfg, err := OracleConfig([]byte(raw), filepath.Join(dir, "out"), &b.Spec, leftOut)
			if err != nil {
				return fmt.Errorf("ConfigMap %s: %w", cmName, err)
			}
			if err := os.WriteFile(filepath.Join(dir, "oracle.json"), cfg, 0o600); err != nil {
				return err
			}
			run := oracleCommand(ctx, sealer, dir, b.Spec.IsUpdate(), parentCache)
			var stdout bytes.Buffer
			run.Stdout, run.Stderr = &stdout, a.env.Err
			if b.Spec.IsUpdate() {
				fmt.Fprintln(a.env.Err, "computing the same updates with filecoin-proofs encode_into (sealer oracle-snap)")
			} else {
				fmt.Fprintln(a.env.Err, "computing the same sectors with rust-fil-proofs (sealer oracle)")
			}
			if err := run.Run(); err != nil {
				return notWanted("%s failed: %v", strings.Join(run.Args, " "), err)
			}
			want, err := ParseOracleOutput(stdout.Bytes())
			if err != nil {
				return notWanted("%s: %v", strings.Join(run.Args, " "), err)
			}
			lines, differing := CompareCommR(b.Status.Sectors, want)
			for _, l := range lines {
				fmt.Fprintln(a.env.Out, l)
			}
			if differing > 0 {
				return notWanted("%d of %d sectors of %s differ from rust-fil-proofs", differing, len(lines), key)
			}
			return nil
		},
	}
	pc := os.Getenv("FIL_PROOFS_PARENT_CACHE")
	if pc == "" {
		pc = defaultParentCache
	}
	cmd.Flags().StringVar(&sealer, "sealer", "", "the sealer binary (with the oracle subcommand)")
	cmd.Flags().StringVar(&parentCache, "parent-cache", pc, "parent cache directory for rust-fil-proofs (FIL_PROOFS_PARENT_CACHE)")
	return cmd
}

// findSealerConfig finds the batch's sealer config where its pods run (status.podNamespace: the
// operator's sealer namespace, or the batch's own), by the batch's UID label.
func findSealerConfig(ctx context.Context, c client.Client, b *sealv1.SealBatch) (*corev1.ConfigMap, error) {
	ns := b.Status.PodNamespace
	if ns == "" {
		ns = b.Namespace
	}
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{render.LabelBatchUID: string(b.UID)}); err != nil {
		return nil, fmt.Errorf("listing the sealer config of %s/%s in %s (it needs the right to read ConfigMaps there): %w", b.Namespace, b.Name, ns, err)
	}
	for i := range list.Items {
		if strings.HasSuffix(list.Items[i].Name, "-sealer-config") {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no sealer config of %s/%s in %s: the operator writes it when the batch's first pod starts (is it placed? kubectl sealfleet batch -n %s %s)", b.Namespace, b.Name, ns, b.Namespace, b.Name)
}
