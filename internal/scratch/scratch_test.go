package scratch

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestDiscardPunchesTheRangeOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "layers.img")
	const mib = 1 << 20
	data := bytes.Repeat([]byte{0xab}, 4*mib)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Discard(path, mib, 2*mib); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(data) {
		t.Fatalf("size changed: %d", len(got))
	}
	if !bytes.Equal(got[:mib], data[:mib]) || !bytes.Equal(got[3*mib:], data[3*mib:]) {
		t.Fatal("bytes outside the range changed")
	}
	if !bytes.Equal(got[mib:3*mib], make([]byte, 2*mib)) {
		t.Fatal("the range still holds data")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 3*mib {
		t.Errorf("space not returned: %d bytes allocated", st.Blocks*512)
	}
}

func TestDiscardClipsAndTolerates(t *testing.T) {
	dir := t.TempDir()
	if err := Discard(filepath.Join(dir, "missing"), 0, 10); err != nil {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(dir, "small")
	if err := os.WriteFile(p, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Discard(p, 5, 1<<30); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	if string(got[:5]) != "01234" || !bytes.Equal(got[5:], make([]byte, 5)) {
		t.Errorf("got %q", got)
	}
	if err := Discard(p, -1, 1); err == nil {
		t.Error("negative offset accepted")
	}
}

// TestDiscardConfinedStaysUnderTheRoot: a layer file under its root is scrubbed; a symlink
// under the root that leads outside it, a path outside every root, a character device under
// /dev/ and a directory are refused, and the file a symlink points at keeps its bytes. The
// fallback without openat2 refuses the escape too.
func TestDiscardConfinedStaysUnderTheRoot(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	data := bytes.Repeat([]byte{0xcd}, 1<<20)
	inside, victim := filepath.Join(root, "layers.img"), filepath.Join(outside, "precious")
	for _, p := range []string{inside, victim} {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := DiscardConfined(inside, []string{"/nowhere", root}, 0, 1<<20); err != nil {
		t.Fatalf("file under its root: %v", err)
	}
	if got, _ := os.ReadFile(inside); !bytes.Equal(got, make([]byte, len(data))) {
		t.Error("the file under the root was not scrubbed")
	}
	link := filepath.Join(root, "sub", "layers.img")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	dirLink := filepath.Join(root, "escape")
	if err := os.Symlink(outside, dirLink); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{link, "outside its root"},
		{filepath.Join(dirLink, "precious"), "outside its root"},
		{victim, "outside the node's hostPathRoots"},
		{"/dev/null", "not a block device"},
		{filepath.Join(root, "sub"), "is a directory"},
	} {
		err := DiscardConfined(tc.path, []string{root}, 0, 1<<20)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want refusal %q, got %v", tc.path, tc.want, err)
		}
	}
	if got, _ := os.ReadFile(victim); !bytes.Equal(got, data) {
		t.Fatal("a file outside the root was scrubbed")
	}
	if _, err := openResolved(link, root); err == nil || !strings.Contains(err.Error(), "outside its root") {
		t.Errorf("fallback without openat2: %v", err)
	}
	if err := DiscardConfined(filepath.Join(root, "missing"), []string{root}, 0, 1); err != nil {
		t.Errorf("a missing file has nothing to scrub: %v", err)
	}
}
