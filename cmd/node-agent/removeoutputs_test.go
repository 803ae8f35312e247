package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoveOutputs: the sector's replica and cache go; its neighbours, and anything a
// symlink or ".." points at outside the root, stay; a second run is fine.
func TestRemoveOutputs(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	for _, f := range []string{"ns/b/sealed/s-t01000-1", "ns/b/cache/s-t01000-1/p_aux", "ns/b/sealed/s-t01000-2", "ns/b/cache/s-t01000-2/p_aux"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "ns/b/cache/link")); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) error {
		cmd := newRemoveOutputs()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetArgs(append([]string{"--root", root}, args...))
		return cmd.Execute()
	}
	for range 2 {
		if err := run("ns/b/sealed/s-t01000-1", "ns/b/cache/s-t01000-1"); err != nil {
			t.Fatal(err)
		}
	}
	for f, want := range map[string]bool{"ns/b/sealed/s-t01000-1": false, "ns/b/cache/s-t01000-1": false, "ns/b/sealed/s-t01000-2": true, "ns/b/cache/s-t01000-2/p_aux": true} {
		if _, err := os.Stat(filepath.Join(root, f)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", f, err == nil, want)
		}
	}
	if err := run("ns/b/cache/link/keep"); err == nil {
		t.Error("removed through a symlink out of the root")
	}
	if err := run("../" + filepath.Base(outside)); err == nil || !strings.Contains(err.Error(), "relative to --root") {
		t.Errorf("a path climbing out: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Errorf("a file outside the root is gone: %v", err)
	}
}
