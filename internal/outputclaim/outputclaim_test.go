package outputclaim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestClaim: a fresh directory is claimed; the same UID may come back (a retry, C1); another
// UID under the same name, or files without a marker, are refused naming the owner and the fix.
func TestClaim(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ns", "b")
	first := Owner{Batch: "ns/b", UID: "uid-1"}
	if err := Claim(dir, first); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sealed"), []byte("replica"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Claim(dir, first); err != nil {
		t.Errorf("the owner coming back: %v", err)
	}
	err := Claim(dir, Owner{Batch: "ns/b", UID: "uid-2"})
	var owned *OwnedError
	if !errors.As(err, &owned) || owned.Owner == nil || owned.Owner.UID != "uid-1" ||
		!strings.Contains(err.Error(), "belongs to batch ns/b (uid uid-1") || !strings.Contains(err.Error(), "will not overwrite") {
		t.Errorf("a re-created batch: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "sealed")); string(got) != "replica" {
		t.Error("the owner's output changed")
	}

	stray := t.TempDir()
	if err := os.WriteFile(filepath.Join(stray, "s-t01000-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Claim(stray, first); !errors.As(err, &owned) || owned.Owner != nil || !strings.Contains(err.Error(), "holds files but no "+Marker) {
		t.Errorf("files of no recorded batch: %v", err)
	}
	volume := t.TempDir()
	if err := os.Mkdir(filepath.Join(volume, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Claim(volume, first); err != nil {
		t.Errorf("a fresh volume's root: %v", err)
	}
	if err := Claim(t.TempDir(), Owner{Batch: "ns/b"}); err == nil {
		t.Error("a claim without a UID")
	}
}

// Two batches racing for one directory: exactly one wins.
func TestClaimRace(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = Claim(dir, Owner{Batch: "ns/b", UID: string(rune('a' + i))})
		}(i)
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		}
	}
	if won != 1 {
		t.Errorf("%d claimants won: %v", won, errs)
	}
}
