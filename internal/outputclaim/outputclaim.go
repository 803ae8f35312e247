// Package outputclaim keeps one batch's outputs from being overwritten by another: before a
// sealer writes, the batch claims its output directory with a marker naming its UID. A batch
// re-created under the same name (a new UID), or pointed at a directory another batch filled,
// is refused with the owner's name instead of writing over a completed sector's replica.
package outputclaim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Marker is the file in an output directory that names the batch owning it.
const Marker = ".sealfleet-batch.json"

// Owner is a marker's content.
type Owner struct {
	// Batch is <namespace>/<name>; UID the batch's UID.
	Batch string `json:"batch"`
	UID   string `json:"uid"`
	// Claimed is when the batch first wrote there.
	Claimed time.Time `json:"claimed"`
}

// OwnedError: the directory belongs to another batch, or holds files no batch claimed.
type OwnedError struct {
	Dir   string
	Owner *Owner // nil: files of no recorded batch
	Want  Owner
}

func (e *OwnedError) Error() string {
	if e.Owner == nil {
		return fmt.Sprintf("output directory %s holds files but no %s: they are not batch %s's, and it will not write over them; move them away (or delete them) and re-create the batch (this one has failed), or give it another name or output path",
			e.Dir, Marker, e.Want.Batch)
	}
	return fmt.Sprintf("output directory %s belongs to batch %s (uid %s, claimed %s); batch %s (uid %s) will not overwrite its outputs: take them away and delete the directory, or give this batch another name or output path",
		e.Dir, e.Owner.Batch, e.Owner.UID, e.Owner.Claimed.Format(time.RFC3339), e.Want.Batch, e.Want.UID)
}

// Claim makes dir (and its parents) and claims it for want: a directory already claimed by
// want's UID is fine (a retry, or the batch's C1); one claimed by another UID, or holding files
// without a marker, is an *OwnedError. The marker is created exclusively, so two batches racing
// for one directory cannot both win.
func Claim(dir string, want Owner) error {
	if want.UID == "" || want.Batch == "" {
		return errors.New("claiming an output directory needs the batch's name and UID")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	marker := filepath.Join(dir, Marker)
	if owner, err := read(marker); err == nil {
		if owner.UID == want.UID {
			return nil
		}
		return &OwnedError{Dir: dir, Owner: owner, Want: want}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != "lost+found" { // a fresh ext4 volume's root (a claim output) has one
			return &OwnedError{Dir: dir, Want: want}
		}
	}
	if want.Claimed.IsZero() {
		want.Claimed = time.Now().UTC().Truncate(time.Second)
	}
	data, err := json.Marshal(want)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return Claim(dir, want) // another claimant won the race: read what it wrote
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func read(marker string) (*Owner, error) {
	data, err := os.ReadFile(marker)
	if err != nil {
		return nil, err
	}
	var o Owner
	if err := json.Unmarshal(data, &o); err != nil || o.UID == "" {
		return nil, fmt.Errorf("%s is not a batch marker (%v): remove it if the directory is free", marker, err)
	}
	return &o, nil
}
