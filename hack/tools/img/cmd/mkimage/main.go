// Command mkimage assembles a single-layer linux/amd64 container image from files on this
// machine and writes it as a docker-archive tarball that `ctr images import` (and `docker load`)
// accept, or with -format oci-archive as a tar of an OCI image layout (`skopeo copy
// oci-archive:FILE …`, `ctr images import`; see internal/ociarchive). It needs no container
// engine and no registry: the local cluster's images and the release's are built with it.
//
//	mkimage -o out.tar -tag localhost/name:tag [-format docker-archive|oci-archive]
//	        [-entrypoint /app] [-env K=V]... [-text DEST[:MODE]=LINE]... SRC=DEST[:MODE]...
//
// Each SRC=DEST copies the file SRC (symlinks followed) to DEST in the image, with MODE (octal,
// default: SRC's permission bits). Each -text DEST=LINE writes a file DEST holding LINE and a
// newline (mode 0644 unless :MODE). Parent directories are created 0755. The docker-archive
// uses Docker's media types, the oci-archive OCI's.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sealfleet/sealfleet/hack/tools/img/internal/ociarchive"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

type entry struct {
	src, dest string
	mode      int64
	text      []byte // the file's contents, when not read from src (-text)
}

// Output formats.
const (
	dockerArchive = "docker-archive"
	ociArchive    = "oci-archive"
)

type options struct {
	out, tag, format, entrypoint, user string
	env, texts, files                  []string
}

func main() {
	var o options
	flag.StringVar(&o.out, "o", "", "output tarball")
	flag.StringVar(&o.tag, "tag", "", "image reference, e.g. localhost/sealfleet-operator:dev")
	flag.StringVar(&o.format, "format", dockerArchive, "output format: docker-archive or oci-archive (an OCI image layout, tarred)")
	flag.StringVar(&o.entrypoint, "entrypoint", "", "entrypoint (space-separated)")
	flag.StringVar(&o.user, "user", "", "user the image runs as (empty: root)")
	var env, texts list
	flag.Var(&env, "env", "environment variable K=V (repeatable)")
	flag.Var(&texts, "text", "a file /DEST[:MODE]=LINE holding LINE and a newline, mode 0644 by default (repeatable)")
	flag.Parse()
	o.env, o.texts, o.files = env, texts, flag.Args()
	if o.out == "" || o.tag == "" || len(o.files)+len(o.texts) == 0 {
		fmt.Fprintln(os.Stderr, "usage: mkimage -o out.tar -tag REF [-format docker-archive|oci-archive] [-entrypoint CMD] [-env K=V]... [-text /DEST[:MODE]=LINE]... SRC=DEST[:MODE]...")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

// parseText parses -text's /DEST[:MODE]=LINE.
func parseText(arg string) (entry, error) {
	dest, line, ok := strings.Cut(arg, "=")
	if !ok {
		return entry{}, fmt.Errorf("-text %q: want /DEST[:MODE]=LINE", arg)
	}
	e, err := parse("-=" + dest)
	if err != nil {
		return entry{}, fmt.Errorf("-text %q: want /DEST[:MODE]=LINE", arg)
	}
	e.src, e.text = "", []byte(line+"\n")
	if e.mode < 0 {
		e.mode = 0o644
	}
	return e, nil
}

func parse(arg string) (entry, error) {
	src, dest, ok := strings.Cut(arg, "=")
	if !ok || src == "" || !strings.HasPrefix(dest, "/") {
		return entry{}, fmt.Errorf("%q: want SRC=/DEST[:MODE]", arg)
	}
	e := entry{src: src, dest: path.Clean(dest), mode: -1}
	if d, m, ok := strings.Cut(dest, ":"); ok {
		v, err := strconv.ParseInt(m, 8, 32)
		if err != nil {
			return entry{}, fmt.Errorf("%q: mode %q is not octal", arg, m)
		}
		e.dest, e.mode = path.Clean(d), v
	}
	return e, nil
}

// layer builds the tar of the entries, deterministic (fixed times, sorted, root-owned).
func layer(entries []entry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	sort.Slice(entries, func(i, j int) bool { return entries[i].dest < entries[j].dest })
	for _, e := range entries {
		var parents []string
		for d := path.Dir(e.dest); d != "/" && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			dirs[parents[i]] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(parents[i], "/") + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return nil, err
			}
		}
		if e.text != nil {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(e.dest, "/"), Mode: e.mode, Size: int64(len(e.text)), ModTime: epoch}); err != nil {
				return nil, err
			}
			if _, err := tw.Write(e.text); err != nil {
				return nil, err
			}
			continue
		}
		f, err := os.Open(e.src)
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		mode := int64(st.Mode().Perm())
		if e.mode >= 0 {
			mode = e.mode
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(e.dest, "/"), Mode: mode, Size: st.Size(), ModTime: epoch}); err != nil {
			f.Close()
			return nil, err
		}
		_, err = io.Copy(tw, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.src, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func run(o options) error {
	if o.format != dockerArchive && o.format != ociArchive {
		return fmt.Errorf("-format %q: want %s or %s", o.format, dockerArchive, ociArchive)
	}
	var entries []entry
	for _, a := range o.files {
		e, err := parse(a)
		if err != nil {
			return err
		}
		entries = append(entries, e)
	}
	for _, a := range o.texts {
		e, err := parseText(a)
		if err != nil {
			return err
		}
		entries = append(entries, e)
	}
	data, err := layer(entries)
	if err != nil {
		return err
	}
	oci := o.format == ociArchive
	var lopts []tarball.LayerOption
	base := empty.Image
	if oci {
		lopts = append(lopts, tarball.WithMediaType(types.OCILayer))
		base = mutate.MediaType(base, types.OCIManifestSchema1)
		base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, lopts...)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(base, l)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, o.env...)
	if o.entrypoint != "" {
		cf.Config.Entrypoint = strings.Fields(o.entrypoint)
	}
	cf.Config.User = o.user
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(o.tag)
	if err != nil {
		return err
	}
	if oci {
		return ociarchive.Write(o.out, ref, img)
	}
	tmp := o.out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		return err
	}
	return os.Rename(tmp, o.out)
}
