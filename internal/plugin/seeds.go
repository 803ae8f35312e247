package plugin

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// seedInput is one seed as a file gives it; pointers tell a missing field from a zero.
type seedInput struct {
	Number     *int64 `json:"number"`
	Randomness string `json:"randomness"`
	Epoch      *int64 `json:"epoch"`
}

// The two spellings the API accepts for 32 bytes (see SectorSeed.randomness).
var (
	hexRandomness    = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	base64Randomness = regexp.MustCompile(`^[A-Za-z0-9+/]{43}=$`)
)

// normalizeRandomness strips a 0x prefix and checks the value is 32 bytes as 64 hex or 44
// base64 characters; it returns the value to store and the bytes it stands for.
func normalizeRandomness(s string) (string, []byte, error) {
	v := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	switch {
	case hexRandomness.MatchString(v):
		b, err := hex.DecodeString(v)
		return v, b, err
	case base64Randomness.MatchString(s):
		b, err := base64.StdEncoding.DecodeString(s)
		if err == nil && len(b) == 32 {
			return s, b, nil
		}
	}
	return "", nil, fmt.Errorf("must be 32 bytes: 64 hex characters (0x allowed) or 44 characters of base64 ending in '=', got %d characters", len(s))
}

// ParseSeeds reads a seeds file, YAML or JSON: a list of {number, randomness, epoch}, or an
// object whose seeds field is that list. Every problem is reported, each naming the entry.
func ParseSeeds(data []byte) ([]sealv1.SectorSeed, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	var in []seedInput
	first := byte(0)
	if t := bytes.TrimSpace(js); len(t) > 0 {
		first = t[0]
	}
	switch first {
	case '[':
		err = yaml.UnmarshalStrict(data, &in)
	case '{':
		var doc struct {
			Seeds []seedInput `json:"seeds"`
		}
		err = yaml.UnmarshalStrict(data, &doc)
		in = doc.Seeds
	default:
		return nil, errors.New("no seeds: give a list of {number, randomness, epoch}, or {seeds: [...]}")
	}
	if err != nil {
		return nil, fmt.Errorf("reading the seeds: %w (each seed has number, randomness and epoch)", err)
	}
	if len(in) == 0 {
		return nil, errors.New("no seeds: the list is empty")
	}
	var errs []error
	out := make([]sealv1.SectorSeed, 0, len(in))
	for i, s := range in {
		where := fmt.Sprintf("seeds[%d]", i)
		if s.Number == nil {
			errs = append(errs, fmt.Errorf("%s: number: missing (the sector number)", where))
			continue
		}
		where = fmt.Sprintf("sector %d", *s.Number)
		if *s.Number < 0 {
			errs = append(errs, fmt.Errorf("%s: number: must not be negative", where))
		}
		r, _, err := normalizeRandomness(s.Randomness)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: randomness: %w", where, err))
		}
		switch {
		case s.Epoch == nil:
			errs = append(errs, fmt.Errorf("%s: epoch: missing (the chain epoch the seed was drawn at)", where))
		case *s.Epoch < 0:
			errs = append(errs, fmt.Errorf("%s: epoch: must not be negative, got %d", where, *s.Epoch))
		default:
			out = append(out, sealv1.SectorSeed{Number: *s.Number, Randomness: r, Epoch: *s.Epoch})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// sameSeed compares by value: the same bytes (hex or base64) drawn at the same epoch.
func sameSeed(a, b sealv1.SectorSeed) bool {
	_, ab, errA := normalizeRandomness(a.Randomness)
	_, bb, errB := normalizeRandomness(b.Randomness)
	return errA == nil && errB == nil && a.Epoch == b.Epoch && bytes.Equal(ab, bb)
}

// SeedMerge is spec.seeds with the given seeds added.
type SeedMerge struct {
	Seeds []sealv1.SectorSeed
	// Added are the sectors given a seed now; Skipped those that already had the same one.
	Added, Skipped []int64
}

// MergeSeeds checks seeds against the batch (every seed for one of its sectors; a sector's
// seed, once written, never changes, as the API's validation insists) and returns the
// existing seeds followed by the new ones, by sector number.
func MergeSeeds(b *sealv1.SealBatch, given []sealv1.SectorSeed) (SeedMerge, error) {
	key := b.Namespace + "/" + b.Name
	if !b.Spec.FromSlot() {
		return SeedMerge{}, fmt.Errorf("SealBatch %s has spec.commit1 %q: seeds are only read with commit1 FromSlot (with LayerFiles your lotus or Curio runs C1 and takes the seed itself)", key, b.Spec.Commit1)
	}
	sectors := map[int64]bool{}
	for _, s := range b.Spec.Sectors {
		sectors[s.Number] = true
	}
	existing := map[int64]sealv1.SectorSeed{}
	for _, s := range b.Spec.Seeds {
		existing[s.Number] = s
	}
	m := SeedMerge{Seeds: append([]sealv1.SectorSeed{}, b.Spec.Seeds...)}
	fresh := map[int64]sealv1.SectorSeed{}
	var errs []error
	for _, s := range given {
		switch old, had := existing[s.Number]; {
		case !sectors[s.Number]:
			errs = append(errs, fmt.Errorf("sector %d: number: not in spec.sectors of %s (its sectors: %s)", s.Number, key, sectorList(b)))
		case had && sameSeed(old, s):
			m.Skipped = append(m.Skipped, s.Number)
		case had:
			errs = append(errs, fmt.Errorf("sector %d: randomness/epoch: %s already has a different seed for it (epoch %d, randomness %s); a seed once written cannot change", s.Number, key, old.Epoch, old.Randomness))
		default:
			if prev, twice := fresh[s.Number]; twice && !sameSeed(prev, s) {
				errs = append(errs, fmt.Errorf("sector %d: given twice with different seeds", s.Number))
				continue
			}
			fresh[s.Number] = s
		}
	}
	if len(errs) > 0 {
		return SeedMerge{}, errors.Join(errs...)
	}
	for n := range fresh {
		m.Added = append(m.Added, n)
	}
	sort.Slice(m.Added, func(i, j int) bool { return m.Added[i] < m.Added[j] })
	sort.Slice(m.Skipped, func(i, j int) bool { return m.Skipped[i] < m.Skipped[j] })
	for _, n := range m.Added {
		m.Seeds = append(m.Seeds, fresh[n])
	}
	return m, nil
}

func sectorList(b *sealv1.SealBatch) string {
	s := make([]string, len(b.Spec.Sectors))
	for i, sec := range b.Spec.Sectors {
		s[i] = fmt.Sprint(sec.Number)
	}
	return strings.Join(s, ", ")
}

// RandomSeeds draws a random seed for every sector of the batch that has none yet, at epochs
// epoch, epoch+1, ... in spec.sectors order. For demos and tests: real seeds come from the
// chain.
func RandomSeeds(b *sealv1.SealBatch, epoch int64, rnd io.Reader) ([]sealv1.SectorSeed, error) {
	have := map[int64]bool{}
	for _, s := range b.Spec.Seeds {
		have[s.Number] = true
	}
	var out []sealv1.SectorSeed
	for _, s := range b.Spec.Sectors {
		if have[s.Number] {
			continue
		}
		r := make([]byte, 32)
		if _, err := io.ReadFull(rnd, r); err != nil {
			return nil, fmt.Errorf("drawing random seeds: %w", err)
		}
		out = append(out, sealv1.SectorSeed{Number: s.Number, Randomness: hex.EncodeToString(r), Epoch: epoch})
		epoch++
	}
	return out, nil
}

// seedsPatch is a JSON merge patch that sets spec.seeds, conditional on the resourceVersion
// read: another writer in between makes it fail instead of dropping that writer's seeds.
func seedsPatch(resourceVersion string, seeds []sealv1.SectorSeed) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"spec":     map[string]any{"seeds": seeds},
	})
}

func joinNumbers(ns []int64) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

func (a *app) seedsCommand() *cobra.Command {
	var file string
	var random bool
	var epoch int64
	cmd := &cobra.Command{
		Use:   "seeds NAME (-f FILE | -f - | --random [--epoch N])",
		Short: "Add interactive PoRep seeds to a commit1 FromSlot batch (spec.seeds)",
		Long: `Add the sectors' interactive PoRep seeds to a SealBatch with spec.commit1 FromSlot; the
operator runs C1 from the slot for them at once (seeds added together share one C1 pod) while
the slot stays held for the sectors still waiting for theirs.

-f FILE (or - for stdin) is YAML or JSON: a list of {number, randomness, epoch}, or an
object {seeds: [...]}. randomness is 32 bytes as 64 hex characters (a 0x prefix is
stripped) or 44 characters of base64. Seeds are checked before anything is written: each
must be for a sector of the batch, and a sector that already has a seed keeps it (the same
seed again is skipped; a different one is an error, as seeds never change).

--random draws random randomness (crypto/rand) for every sector without a seed, at epochs
--epoch, --epoch+1, ...: for demos and tests only, as real seeds come from the chain.`,
		Example: `  kubectl sealfleet seeds -n sealfleet-batches c1-8mib -f seeds.yaml
  kubectl sealfleet seeds -n sealfleet-batches c1-8mib --random --epoch 4000`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (file == "") == !random {
				return fmt.Errorf("give the seeds with -f FILE (- for stdin), or --random to draw them (demos and tests)")
			}
			if cmd.Flags().Changed("epoch") && !random {
				return fmt.Errorf("--epoch is for --random; a seeds file gives each seed's epoch")
			}
			var given []sealv1.SectorSeed
			if file != "" {
				data, err := readInput(a.env.In, file)
				if err != nil {
					return err
				}
				if given, err = ParseSeeds(data); err != nil {
					return fmt.Errorf("%s: %w", displayName(file), err)
				}
			}
			ctx := cmd.Context()
			c, ns, b, err := a.batchNamed(ctx, args[0])
			if err != nil {
				return err
			}
			key := ns + "/" + b.Name
			if random {
				if given, err = RandomSeeds(b, epoch, rand.Reader); err != nil {
					return err
				}
			}
			m, err := MergeSeeds(b, given)
			if err != nil {
				return err
			}
			if len(m.Skipped) > 0 {
				fmt.Fprintf(a.env.Err, "sectors %s already have these seeds: skipped\n", joinNumbers(m.Skipped))
			}
			if len(m.Added) == 0 {
				fmt.Fprintf(a.env.Out, "no new seeds for %s: every sector given already has its seed\n", key)
				return nil
			}
			patch, err := seedsPatch(b.ResourceVersion, m.Seeds)
			if err != nil {
				return err
			}
			if err := c.Patch(ctx, b, client.RawPatch(types.MergePatchType, patch)); err != nil {
				if apierrors.IsConflict(err) {
					return fmt.Errorf("SealBatch %s changed while the seeds were being written: run the command again", key)
				}
				return fmt.Errorf("writing spec.seeds of SealBatch %s: %w", key, err)
			}
			fmt.Fprintf(a.env.Out, "seeds written for sectors %s of %s\n", joinNumbers(m.Added), key)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "YAML or JSON file with the seeds (- for stdin)")
	cmd.Flags().BoolVar(&random, "random", false, "draw random seeds for every sector without one (demos and tests only)")
	cmd.Flags().Int64Var(&epoch, "epoch", 0, "with --random: the first sector's seed epoch; the next get epoch+1, ...")
	return cmd
}

// readInput reads a file, or stdin for "-".
func readInput(stdin io.Reader, file string) ([]byte, error) {
	if file == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		return data, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the seeds file: %w", err)
	}
	return data, nil
}

func displayName(file string) string {
	if file == "-" {
		return "stdin"
	}
	return file
}
