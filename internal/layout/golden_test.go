package layout_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sealfleet/sealfleet/internal/testutil"

	"github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/layout"
	"github.com/sealfleet/sealfleet/internal/topology"
)

var update = flag.Bool("update", false, "rewrite golden files")

const fixtureDir = "../topology/testdata"

func fixtures(t *testing.T) []string {
	ents, err := os.ReadDir(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && e.Name() != "gen" && e.Name() != "golden" {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestFixtureLayouts computes every batch size on every fixture machine, checks the layout
// invariants and compares with testdata/<machine>.json (-update rewrites).
func TestFixtureLayouts(t *testing.T) {
	for _, m := range fixtures(t) {
		t.Run(m, func(t *testing.T) {
			topo, err := topology.Discover(filepath.Join(fixtureDir, m))
			if err != nil {
				t.Fatal(err)
			}
			lt := topo.Layout()
			var all []*layout.Layout
			var summary bytes.Buffer
			for _, n := range v1alpha1.SupportedBatchSizes {
				l, err := layout.Calculate(lt, n, layout.Options{})
				if err == nil {
					if verr := l.Validate(lt, layout.Options{}); verr != nil {
						t.Fatalf("batch %d: %v", n, verr)
					}
				}
				all = append(all, l)
				fmt.Fprintf(&summary, "%3d: %s (%d cores)\n", n, l.Summary(), l.PhysicalCores())
			}
			b, _ := json.MarshalIndent(all, "", " ")
			check(t, m+".json", append(b, '\n'))
			check(t, m+".txt", summary.Bytes())
			// Reserving CPU 0's core and a second pipeline's CPUs never breaks the invariants.
			for _, n := range v1alpha1.SupportedBatchSizes {
				o := layout.Options{ReservedCPUs: []int{0}}
				first, err := layout.Calculate(lt, n, o)
				if err != nil {
					continue
				}
				o.ReservedCPUs = append(o.ReservedCPUs, first.CoreCPUs()...)
				if second, err := layout.Calculate(lt, n, o); err == nil {
					if verr := second.Validate(lt, o); verr != nil {
						t.Fatalf("second pipeline batch %d: %v", n, verr)
					}
				}
			}
		})
	}
}

func check(t *testing.T, name string, got []byte) {
	t.Helper()
	testutil.Golden(t, filepath.Join("testdata", name), got, *update, "./internal/layout")
}
