// Command mkimage assembles a single-layer container image from files on this machine and writes
// it as a docker-archive tarball that `ctr images import` (and `docker load`) accept. It needs no
// container engine and no registry: the local cluster's images are built with it.
//
//	mkimage -o out.tar -tag localhost/name:tag -entrypoint /app [-env K=V]... SRC=DEST[:MODE]...
//
// Each SRC=DEST copies the file SRC (symlinks followed) to DEST in the image, with MODE (octal,
// default: SRC's permission bits). Parent directories are created 0755.
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
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

type entry struct {
	src, dest string
	mode      int64
}

func main() {
	out := flag.String("o", "", "output docker-archive tarball")
	tag := flag.String("tag", "", "image reference, e.g. localhost/sealfleet-operator:dev")
	entrypoint := flag.String("entrypoint", "", "entrypoint (space-separated)")
	user := flag.String("user", "", "user the image runs as (empty: root)")
	var env list
	flag.Var(&env, "env", "environment variable K=V (repeatable)")
	flag.Parse()
	if *out == "" || *tag == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: mkimage -o out.tar -tag REF [-entrypoint CMD] [-env K=V]... SRC=DEST[:MODE]...")
		os.Exit(2)
	}
	if err := run(*out, *tag, *entrypoint, *user, env, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
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

func run(out, tag, entrypoint, user string, env []string, args []string) error {
	var entries []entry
	for _, a := range args {
		e, err := parse(a)
		if err != nil {
			return err
		}
		entries = append(entries, e)
	}
	data, err := layer(entries)
	if err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
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
	cf.Config.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, env...)
	if entrypoint != "" {
		cf.Config.Entrypoint = strings.Fields(entrypoint)
	}
	cf.Config.User = user
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
