package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/render"
	"github.com/sealfleet/sealfleet/internal/testenv"
)

// sample reads config/samples/<name> into obj, refusing fields the API does not have.
func sample(t *testing.T, name string, obj any) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, obj); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return raw
}

// TestSamplesAreAccepted: every sample the docs point users at is accepted by the CRDs'
// validation as written (a server-side dry run), with no field the API does not have.
func TestSamplesAreAccepted(t *testing.T) {
	env := testenv.Start(t)
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "sealfleet_*.yaml"))
	if err != nil || len(files) < 6 {
		t.Fatalf("samples: %v %v", files, err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		typed, err := env.Scheme.New(u.GroupVersionKind())
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := yaml.UnmarshalStrict(raw, typed); err != nil {
			t.Errorf("%s has a field the API does not: %v", filepath.Base(f), err)
		}
		if u.GetKind() == "SealBatch" {
			u.SetNamespace("default")
		}
		if err := env.Client.Create(context.Background(), u, client.DryRunAll); err != nil {
			t.Errorf("%s refused by the API server: %v", filepath.Base(f), err)
		}
	}
}

// TestSamplesShowWhatTheDocsSay: docs/install.md sends a new user to the SealerNode samples
// for layer devices (block and file), hugepages, reservedCPUs, sharedCores, roots and output
// paths; the update sample reads the sector keys where the CC sample writes them, in its layout.
func TestSamplesShowWhatTheDocsSay(t *testing.T) {
	var node, file sealv1.SealerNode
	sample(t, "sealfleet_v1alpha1_sealernode.yaml", &node)
	sample(t, "sealfleet_v1alpha1_sealernode_file.yaml", &file)
	s := node.Spec
	if len(s.LayerDevices) == 0 || !strings.HasPrefix(s.LayerDevices[0].Path, "/dev/") || s.Hugepages1GiPerNUMANode == 0 ||
		s.ReservedCPUs == "" || len(s.HostPathRoots) == 0 || len(s.OutputPaths) == 0 || s.ParentCache == nil {
		t.Errorf("the production SealerNode sample leaves out what install.md says it shows: %+v", s)
	}
	f := file.Spec
	if len(f.LayerDevices) != 1 || strings.HasPrefix(f.LayerDevices[0].Path, "/dev/") || f.LayerDevices[0].Capacity == nil || !f.SharedCores ||
		!strings.HasPrefix(f.LayerDevices[0].Path, f.HostPathRoots[0]+"/") {
		t.Errorf("the file-backed SealerNode sample: want one file under a root, with a capacity, and sharedCores: %+v", f)
	}
	for _, n := range []sealv1.SealerNode{node, file} {
		for _, out := range n.Spec.OutputPaths {
			if !underAny(out, n.Spec.HostPathRoots) {
				t.Errorf("%s: output path %s lies under no root %v", n.Name, out, n.Spec.HostPathRoots)
			}
		}
	}

	var cc, update sealv1.SealBatch
	sample(t, "sealfleet_v1alpha1_sealbatch_cc_8mib.yaml", &cc)
	sample(t, "sealfleet_v1alpha1_sealbatch_update.yaml", &update)
	cc.Namespace = "sealfleet-batches" // where the docs apply it
	// Where the CC batch's pod writes (<mount>/<ns>/<name>) lies at the same place under the
	// default output host path.
	rel, err := filepath.Rel(render.OutputMount, render.OutputDir(&cc))
	if err != nil {
		t.Fatal(err)
	}
	keys := update.Spec.Update.SectorKeys
	if want := filepath.Join(sealv1.DefaultOutputHostPath, rel); keys.HostPath == nil || keys.HostPath.Path != want {
		t.Errorf("the update sample reads sector keys from %+v; the CC sample writes them to %s", keys.HostPath, want)
	}
	written := sealv1.OutputLayout("Sealfleet")
	if cc.Spec.Output != nil && cc.Spec.Output.Layout != "" {
		written = cc.Spec.Output.Layout
	}
	if keys.Layout != written {
		t.Errorf("the update sample reads layout %q; the CC sample writes %q", keys.Layout, written)
	}
	found := false
	for _, sec := range cc.Spec.Sectors {
		found = found || sec.Number == update.Spec.Sectors[0].Number
	}
	if !found {
		t.Errorf("the update sample updates sector %d, which the CC sample does not seal", update.Spec.Sectors[0].Number)
	}
}

func underAny(path string, roots []string) bool {
	for _, r := range roots {
		if strings.HasPrefix(path, r+"/") || path == r {
			return true
		}
	}
	return false
}
