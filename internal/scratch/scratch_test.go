package scratch

import (
	"bytes"
	"os"
	"path/filepath"
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
