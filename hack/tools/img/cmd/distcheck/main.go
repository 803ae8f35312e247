// Command distcheck checks release artifacts (hack/release.sh check):
//
//	distcheck oci FILE REF [CHECK]...
//	    FILE is a valid oci-archive of REF (internal/ociarchive.Verify: the OCI layout, every
//	    blob's digest, the manifest's config and layers, the ref annotations) and its image
//	    passes each CHECK: /PATH (a regular file there), text:/PATH=LINE (a file holding LINE
//	    and a newline), basename:NAME (a regular file of that name in some directory),
//	    env:K=V (in its environment), entrypoint:CMD (its entrypoint, space-separated).
//	distcheck exec TARBALL OS/ARCH NAME
//	    the gzipped TARBALL holds NAME, an executable file for OS/ARCH (linux: a static ELF of
//	    the architecture; darwin: a Mach-O executable of it).
//
// Each prints one line of what it found and exits 1 with the reason when a check fails.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"debug/macho"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sealfleet/sealfleet/hack/tools/img/internal/ociarchive"
)

func main() {
	var err error
	switch {
	case len(os.Args) >= 4 && os.Args[1] == "oci":
		err = checkOCI(os.Args[2], os.Args[3], os.Args[4:])
	case len(os.Args) == 5 && os.Args[1] == "exec":
		err = checkExec(os.Args[2], os.Args[3], os.Args[4])
	default:
		fmt.Fprintln(os.Stderr, "usage: distcheck oci FILE REF [/PATH | text:/PATH=LINE | basename:NAME | env:K=V | entrypoint:CMD]... | distcheck exec TARBALL OS/ARCH NAME")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "distcheck: %s: %v\n", os.Args[2], err)
		os.Exit(1)
	}
}

func checkOCI(file, refArg string, wants []string) error {
	ref, err := name.NewTag(refArg, name.StrictValidation)
	if err != nil {
		return err
	}
	var files, layers int
	var texts []string
	for _, w := range wants {
		if p, _, ok := strings.Cut(strings.TrimPrefix(w, "text:"), "="); ok && strings.HasPrefix(w, "text:") {
			texts = append(texts, p)
		}
	}
	c, err := ociarchive.Verify(file, ref, func(img v1.Image) error {
		hdrs, data, err := ociarchive.ReadFiles(img, texts...)
		if err != nil {
			return err
		}
		ls, err := img.Layers()
		if err != nil {
			return err
		}
		layers = len(ls)
		for _, h := range hdrs {
			if h.Typeflag == tar.TypeReg {
				files++
			}
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		for _, w := range wants {
			switch {
			case strings.HasPrefix(w, "/"):
				if h := hdrs[w]; h == nil || h.Typeflag != tar.TypeReg {
					return fmt.Errorf("the image has no file %s", w)
				}
			case strings.HasPrefix(w, "text:"):
				p, line, _ := strings.Cut(strings.TrimPrefix(w, "text:"), "=")
				if h := hdrs[p]; h == nil || h.Typeflag != tar.TypeReg || string(data[p]) != line+"\n" {
					return fmt.Errorf("the image's %s holds %q, want %q", p, data[p], line+"\n")
				}
			case strings.HasPrefix(w, "basename:"):
				found := false
				for p, h := range hdrs {
					found = found || (h.Typeflag == tar.TypeReg && path.Base(p) == strings.TrimPrefix(w, "basename:"))
				}
				if !found {
					return fmt.Errorf("the image has no file named %s", strings.TrimPrefix(w, "basename:"))
				}
			case strings.HasPrefix(w, "env:"):
				if !slices.Contains(cf.Config.Env, strings.TrimPrefix(w, "env:")) {
					return fmt.Errorf("the image's environment %v lacks %s", cf.Config.Env, strings.TrimPrefix(w, "env:"))
				}
			case strings.HasPrefix(w, "entrypoint:"):
				if got, want := strings.Join(cf.Config.Entrypoint, " "), strings.TrimPrefix(w, "entrypoint:"); got != want {
					return fmt.Errorf("the image's entrypoint is %q, want %q", got, want)
				}
			default:
				return fmt.Errorf("unknown check %q (want /PATH, text:/PATH=LINE, basename:NAME, env:K=V or entrypoint:CMD)", w)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s %s (%s/%s), %d blobs (%d bytes) with the digests they are named by, %d layer(s), %d files, %d checks\n",
		file, ref.Name(), c.Descriptor.Digest, c.Descriptor.Platform.OS, c.Descriptor.Platform.Architecture,
		c.Blobs, c.BlobBytes, layers, files, len(wants))
	return nil
}

func checkExec(tarball, platform, want string) error {
	goos, goarch, ok := strings.Cut(platform, "/")
	if !ok {
		return fmt.Errorf("platform %q: want OS/ARCH", platform)
	}
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	var body []byte
	var entries []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		entries = append(entries, h.Name)
		if strings.TrimPrefix(h.Name, "./") != want {
			continue
		}
		if h.Typeflag != tar.TypeReg || h.Mode&0o111 != 0o111 {
			return fmt.Errorf("%s: not an executable file (type %q, mode %o)", h.Name, h.Typeflag, h.Mode)
		}
		if body, err = io.ReadAll(tr); err != nil {
			return err
		}
	}
	if body == nil {
		return fmt.Errorf("no %s in %v", want, entries)
	}
	format, err := binaryFormat(body, goos, goarch)
	if err != nil {
		return fmt.Errorf("%s: %w", want, err)
	}
	fmt.Printf("%s: %s is %s (%d bytes); entries %s\n", tarball, want, format, len(body), strings.Join(entries, ", "))
	return nil
}

var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
var machoCPU = map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}

// binaryFormat checks that b is an executable for goos/goarch and says what it is.
func binaryFormat(b []byte, goos, goarch string) (string, error) {
	switch goos {
	case "linux":
		want, ok := elfMachine[goarch]
		if !ok {
			return "", fmt.Errorf("no check for linux/%s", goarch)
		}
		ef, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			return "", fmt.Errorf("not an ELF file: %w", err)
		}
		if ef.Class != elf.ELFCLASS64 || ef.Machine != want || (ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN) {
			return "", fmt.Errorf("ELF %s %s %s, want a 64-bit %s executable", ef.Class, ef.Machine, ef.Type, want)
		}
		for _, p := range ef.Progs {
			if p.Type == elf.PT_INTERP {
				return "", errors.New("dynamically linked (it has an interpreter): want a static binary (CGO_ENABLED=0)")
			}
		}
		return fmt.Sprintf("a static ELF %s %s", ef.Machine, ef.Type), nil
	case "darwin":
		want, ok := machoCPU[goarch]
		if !ok {
			return "", fmt.Errorf("no check for darwin/%s", goarch)
		}
		mf, err := macho.NewFile(bytes.NewReader(b))
		if err != nil {
			return "", fmt.Errorf("not a (thin) Mach-O file: %w", err)
		}
		if mf.Cpu != want || mf.Type != macho.TypeExec {
			return "", fmt.Errorf("Mach-O %s %s, want a %s executable", mf.Cpu, mf.Type, want)
		}
		return fmt.Sprintf("a Mach-O %s %s", mf.Cpu, mf.Type), nil
	}
	return "", fmt.Errorf("no check for %s", goos)
}
