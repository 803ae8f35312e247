// Package testutil holds helpers shared by tests: writable copies of fixture trees,
// golden-file comparison, and builders for SealBatches and CPU topologies.
package testutil

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// CopyTree copies a fixture tree (files and relative symlinks) into a temp dir that the test
// may write to, and returns its path.
func CopyTree(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, out)
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copying fixture %s: %v", src, err)
	}
	return dst
}

// Golden compares got with the file at path, or rewrites the file when update is set.
// pkg names the package for the hint printed when the file is missing.
func Golden(t testing.TB, path string, got []byte, update bool, pkg string) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test %s -update)", err, pkg)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from golden; run with -update and review the diff", path)
	}
}

// BlankDevices creates root/dev/<name> as an empty 16 MiB sparse file for each name: a fixture
// tree's block devices, blank, for the node agent's signature probe to open.
func BlankDevices(t testing.TB, root string, names ...string) {
	t.Helper()
	for _, name := range names {
		dev := filepath.Join(root, "dev", name)
		if err := os.MkdirAll(filepath.Dir(dev), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dev, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(dev, 16<<20); err != nil {
			t.Fatal(err)
		}
	}
}
