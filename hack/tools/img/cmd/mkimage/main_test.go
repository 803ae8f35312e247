package main

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sealfleet/sealfleet/hack/tools/img/internal/ociarchive"
)

// TestOCIArchive writes an image with two files and an inline one as an oci-archive, untars
// it, reads it back with layout.FromPath, and checks the index's annotations, the media types,
// the config and every file's contents and mode. A second write gives the same bytes.
func TestOCIArchive(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	must(t, os.WriteFile(a, []byte("#!/bin/sh\necho a\n"), 0o755))
	must(t, os.WriteFile(b, []byte("library b"), 0o600))
	out := filepath.Join(dir, "img.tar")
	o := options{
		out: out, tag: "ghcr.io/sealfleet/test-image:1.2.3", format: ociArchive, entrypoint: "/bin/a",
		env:   []string{"K=V"},
		texts: []string{"/etc/vendors/x.icd=libx.so.1"},
		files: []string{a + "=/bin/a", b + "=/usr/lib/b.so.1:0644"},
	}
	must(t, run(o))

	// The tar: deterministic entries, oci-layout and index.json at its top.
	first, err := os.ReadFile(out)
	must(t, err)
	var names []string
	tr := tar.NewReader(bytes.NewReader(first))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.ModTime.Unix() != 0 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v uid %d gid %d, want the epoch and 0:0", h.Name, h.ModTime, h.Uid, h.Gid)
		}
		names = append(names, h.Name)
	}
	if !slices.IsSorted(names) || !slices.Contains(names, "oci-layout") || !slices.Contains(names, "index.json") || !slices.Contains(names, "blobs/sha256/") {
		t.Errorf("tar entries %v: want sorted, with oci-layout, index.json and blobs/sha256/", names)
	}

	lay := filepath.Join(dir, "layout")
	must(t, os.Mkdir(lay, 0o755))
	must(t, ociarchive.Extract(out, lay))
	lp, err := layout.FromPath(lay)
	must(t, err)
	idx, err := lp.ImageIndex()
	must(t, err)
	im, err := idx.IndexManifest()
	must(t, err)
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json: %d manifests, want 1", len(im.Manifests))
	}
	d := im.Manifests[0]
	if got := d.Annotations["org.opencontainers.image.ref.name"]; got != "1.2.3" {
		t.Errorf("ref.name annotation %q, want the tag 1.2.3", got)
	}
	if got := d.Annotations["io.containerd.image.name"]; got != "ghcr.io/sealfleet/test-image:1.2.3" {
		t.Errorf("io.containerd.image.name annotation %q, want the whole reference", got)
	}
	if d.MediaType != types.OCIManifestSchema1 || d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != "amd64" {
		t.Errorf("descriptor %s %v, want an OCI manifest for linux/amd64", d.MediaType, d.Platform)
	}
	img, err := lp.Image(d.Digest)
	must(t, err)
	m, err := img.Manifest()
	must(t, err)
	if m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("manifest: config %s, layers %v: want OCI media types and one layer", m.Config.MediaType, m.Layers)
	}
	cf, err := img.ConfigFile()
	must(t, err)
	if !slices.Equal(cf.Config.Entrypoint, []string{"/bin/a"}) || !slices.Contains(cf.Config.Env, "K=V") {
		t.Errorf("config: entrypoint %v env %v", cf.Config.Entrypoint, cf.Config.Env)
	}
	hdrs, data, err := ociarchive.ReadFiles(img, "/bin/a", "/usr/lib/b.so.1", "/etc/vendors/x.icd")
	must(t, err)
	for p, want := range map[string]struct {
		body string
		mode int64
	}{
		"/bin/a":             {"#!/bin/sh\necho a\n", 0o755},
		"/usr/lib/b.so.1":    {"library b", 0o644},
		"/etc/vendors/x.icd": {"libx.so.1\n", 0o644},
	} {
		if string(data[p]) != want.body || hdrs[p] == nil || hdrs[p].Mode != want.mode {
			t.Errorf("%s: %q, header %+v; want %q mode %o", p, data[p], hdrs[p], want.body, want.mode)
		}
	}
	for _, p := range []string{"/bin", "/usr", "/usr/lib", "/etc", "/etc/vendors"} {
		if h := hdrs[p]; h == nil || h.Typeflag != tar.TypeDir {
			t.Errorf("%s: no directory entry", p)
		}
	}

	// What the release check runs passes on it, and refuses another tag.
	if _, err := ociarchive.Verify(out, name.MustParseReference("ghcr.io/sealfleet/test-image:1.2.3").(name.Tag), nil); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if _, err := ociarchive.Verify(out, name.MustParseReference("ghcr.io/sealfleet/test-image:1.2.4").(name.Tag), nil); err == nil {
		t.Error("Verify accepted the archive for another tag")
	}

	must(t, run(o))
	second, err := os.ReadFile(out)
	must(t, err)
	if !bytes.Equal(first, second) {
		t.Error("a second write of the same image gave other bytes")
	}
}

func TestParseText(t *testing.T) {
	for _, bad := range []string{"etc/x=a", "/etc/x", "/etc/x:9=a"} {
		if _, err := parseText(bad); err == nil {
			t.Errorf("parseText(%q) accepted", bad)
		}
	}
	e, err := parseText("/etc/x:0600=a=b")
	if err != nil || e.dest != "/etc/x" || e.mode != 0o600 || string(e.text) != "a=b\n" {
		t.Errorf("parseText: %+v %v", e, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
