package ociarchive

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var ref = name.MustParseReference("ghcr.io/sealfleet/x:0.1.0").(name.Tag)

// archive writes a random two-layer OCI image as an oci-archive and returns its path and the
// layout directory it was untarred to (for tampering, then retar).
func archive(t *testing.T) (string, string) {
	t.Helper()
	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "x.tar")
	if err := Write(out, ref, img); err != nil {
		t.Fatal(err)
	}
	lay := filepath.Join(dir, "layout")
	if err := os.Mkdir(lay, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Extract(out, lay); err != nil {
		t.Fatal(err)
	}
	return out, lay
}

func TestVerify(t *testing.T) {
	out, _ := archive(t)
	var files int
	c, err := Verify(out, ref, func(img v1.Image) error {
		hdrs, _, err := ReadFiles(img)
		files = len(hdrs)
		return err
	})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if c.Blobs != 4 || files == 0 {
		t.Errorf("Verify: %d blobs (want manifest, config, 2 layers), %d files", c.Blobs, files)
	}
}

func TestVerifyRefuses(t *testing.T) {
	layerOf := func(t *testing.T, lay string) string {
		t.Helper()
		lp, err := os.ReadDir(filepath.Join(lay, "blobs", "sha256"))
		if err != nil {
			t.Fatal(err)
		}
		// The largest blob is a layer.
		var big string
		var size int64
		for _, e := range lp {
			st, _ := e.Info()
			if st.Size() > size {
				big, size = e.Name(), st.Size()
			}
		}
		return filepath.Join(lay, "blobs", "sha256", big)
	}
	for _, tc := range []struct {
		name, want string
		tamper     func(t *testing.T, lay string)
		ref        name.Tag
	}{
		{"other tag", "ref.name", func(*testing.T, string) {}, name.MustParseReference("ghcr.io/sealfleet/x:0.1.1").(name.Tag)},
		{"other name", "io.containerd.image.name", func(*testing.T, string) {}, name.MustParseReference("ghcr.io/other/x:0.1.0").(name.Tag)},
		{"changed blob", "holds content of digest", func(t *testing.T, lay string) {
			p := layerOf(t, lay)
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 1
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, ref},
		{"missing blob", "missing", func(t *testing.T, lay string) {
			if err := os.Remove(layerOf(t, lay)); err != nil {
				t.Fatal(err)
			}
		}, ref},
		{"no oci-layout", "not an OCI image layout", func(t *testing.T, lay string) {
			if err := os.Remove(filepath.Join(lay, "oci-layout")); err != nil {
				t.Fatal(err)
			}
		}, ref},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, lay := archive(t)
			tc.tamper(t, lay)
			if err := tarDir(lay, out); err != nil {
				t.Fatal(err)
			}
			_, err := Verify(out, tc.ref, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Verify: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestExtractRefusesEscapes(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "evil.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	if err := tw.WriteHeader(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	f.Close()
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Extract(p, out); err == nil || !strings.Contains(err.Error(), "leaves") {
		t.Errorf("Extract: %v, want a refusal", err)
	}
}
