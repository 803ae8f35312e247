// Package ociarchive writes and checks "oci-archive" files: a tar of an OCI image layout
// directory (oci-layout, index.json, blobs/sha256/…) holding one image, as `skopeo copy
// oci-archive:FILE` and `ctr images import` read them.
//
// The index's one manifest descriptor carries the platform and two annotations:
// org.opencontainers.image.ref.name, the reference's tag (what `skopeo copy
// oci-archive:FILE:TAG` selects by), and io.containerd.image.name, the whole reference (the name
// `ctr images import` gives the image). The tar is deterministic: entries sorted, directories
// 0755 and files 0644, owned by 0:0, all at the Unix epoch.
package ociarchive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

const (
	// RefNameAnnotation is the OCI annotation that names an index entry (its tag).
	RefNameAnnotation = "org.opencontainers.image.ref.name"
	// ImageNameAnnotation is containerd's annotation for the entry's whole image name.
	ImageNameAnnotation = "io.containerd.image.name"
)

// Write writes img as an oci-archive tarball at out (through out.tmp, renamed when complete).
func Write(out string, ref name.Tag, img v1.Image) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(filepath.Dir(out), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	err = lp.AppendImage(img,
		layout.WithPlatform(v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}),
		layout.WithAnnotations(map[string]string{
			RefNameAnnotation:   ref.TagStr(),
			ImageNameAnnotation: ref.Name(),
		}))
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}

// tarDir writes the tree under dir as a deterministic tar at out.
func tarDir(dir, out string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			rel += "/"
		case !d.Type().IsRegular():
			return fmt.Errorf("%s: not a regular file", p)
		}
		names = append(names, rel)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	epoch := time.Unix(0, 0)
	for _, n := range names {
		h := &tar.Header{Name: n, ModTime: epoch, Format: tar.FormatPAX}
		if strings.HasSuffix(n, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
			if err := tw.WriteHeader(h); err != nil {
				f.Close()
				return err
			}
			continue
		}
		src, err := os.Open(filepath.Join(dir, filepath.FromSlash(n)))
		if err != nil {
			f.Close()
			return err
		}
		st, err := src.Stat()
		if err == nil {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, st.Size()
			err = tw.WriteHeader(h)
		}
		if err == nil {
			_, err = io.Copy(tw, src)
		}
		src.Close()
		if err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Extract unpacks the tar archive at file into dir (which must exist). Only directories and
// regular files are accepted, and no entry may leave dir.
func Extract(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		clean := path.Clean(h.Name)
		if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("%s: entry %q leaves the archive's directory", file, h.Name)
		}
		dest := filepath.Join(dir, filepath.FromSlash(clean))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dest, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
				return err
			}
			w, err := os.OpenFile(dest, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, tr)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: entry %q is neither a file nor a directory (type %q)", file, h.Name, h.Typeflag)
		}
	}
}

// Checked is what Verify found in an archive.
type Checked struct {
	Descriptor v1.Descriptor // the index's manifest descriptor
	Blobs      int           // blobs under blobs/sha256, each checked against its name
	BlobBytes  int64         // their total size
}

// Verify untars the oci-archive at file into a temporary directory and checks it: an OCI image
// layout (oci-layout's version, index.json) whose index holds exactly one image manifest,
// annotated with ref's tag (org.opencontainers.image.ref.name) and name
// (io.containerd.image.name); every blob under blobs/sha256 hashes to its name, the manifest's
// config and layers are present with the digests and sizes it names, and the layers' diff IDs
// are the config's (go-containerregistry's validate.Image). inspect, when not nil, is called
// with the image (read from the layout) for further checks before the temporary directory
// is removed.
func Verify(file string, ref name.Tag, inspect func(v1.Image) error) (*Checked, error) {
	dir, err := os.MkdirTemp("", "ocicheck-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := Extract(file, dir); err != nil {
		return nil, err
	}
	c := &Checked{}
	raw, err := os.ReadFile(filepath.Join(dir, "oci-layout"))
	if err != nil {
		return nil, fmt.Errorf("not an OCI image layout: %w", err)
	}
	var ol struct {
		Version string `json:"imageLayoutVersion"`
	}
	if err := json.Unmarshal(raw, &ol); err != nil || ol.Version != "1.0.0" {
		return nil, fmt.Errorf("oci-layout: want imageLayoutVersion 1.0.0, got %q (%v)", raw, err)
	}
	// Every blob is named after its content's digest.
	blobs := filepath.Join(dir, "blobs", "sha256")
	ents, err := os.ReadDir(blobs)
	if err != nil {
		return nil, fmt.Errorf("blobs: %w", err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(blobs, e.Name()))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != e.Name() {
			return nil, fmt.Errorf("blob sha256:%s holds content of digest sha256:%s", e.Name(), got)
		}
		c.Blobs++
		c.BlobBytes += int64(len(b))
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	if len(im.Manifests) != 1 {
		return nil, fmt.Errorf("index.json: want 1 manifest, found %d", len(im.Manifests))
	}
	d := im.Manifests[0]
	c.Descriptor = d
	if !d.MediaType.IsImage() {
		return nil, fmt.Errorf("index.json: the manifest's media type %q is not an image's", d.MediaType)
	}
	if got := d.Annotations[RefNameAnnotation]; got != ref.TagStr() {
		return nil, fmt.Errorf("index.json: %s is %q, want %q", RefNameAnnotation, got, ref.TagStr())
	}
	if got := d.Annotations[ImageNameAnnotation]; got != ref.Name() {
		return nil, fmt.Errorf("index.json: %s is %q, want %q", ImageNameAnnotation, got, ref.Name())
	}
	mb, err := lp.Bytes(d.Digest)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", d.Digest, err)
	}
	if int64(len(mb)) != d.Size {
		return nil, fmt.Errorf("manifest %s: %d bytes, index.json says %d", d.Digest, len(mb), d.Size)
	}
	img, err := lp.Image(d.Digest)
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	for _, b := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		st, err := os.Stat(filepath.Join(blobs, b.Digest.Hex))
		if err != nil || b.Digest.Algorithm != "sha256" {
			return nil, fmt.Errorf("blob %s (%s) named by the manifest is missing", b.Digest, b.MediaType)
		}
		if st.Size() != b.Size {
			return nil, fmt.Errorf("blob %s: %d bytes, the manifest says %d", b.Digest, st.Size(), b.Size)
		}
	}
	if err := validate.Image(img); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	if d.Platform == nil || d.Platform.OS != cf.OS || d.Platform.Architecture != cf.Architecture {
		return nil, fmt.Errorf("index.json: platform %v, the config says %s/%s", d.Platform, cf.OS, cf.Architecture)
	}
	if inspect != nil {
		if err := inspect(img); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ReadFiles reads the image's layers in order: every entry's header by absolute path, and the
// contents of the named files (absolute paths).
func ReadFiles(img v1.Image, names ...string) (map[string]*tar.Header, map[string][]byte, error) {
	want := map[string]bool{}
	for _, p := range names {
		want[p] = true
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, nil, err
	}
	hdrs := map[string]*tar.Header{}
	data := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, nil, err
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rc.Close()
				return nil, nil, err
			}
			p := "/" + strings.TrimSuffix(path.Clean(h.Name), "/")
			hdrs[p] = h
			if want[p] {
				var b bytes.Buffer
				if _, err := io.Copy(&b, tr); err != nil {
					rc.Close()
					return nil, nil, err
				}
				data[p] = b.Bytes()
			}
		}
		rc.Close()
	}
	return hdrs, data, nil
}
