package nodeprep

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// blkidPaths are where util-linux blkid is looked for: PATH first, then where Debian and
// the node agent's image put it (sbin is not on every PATH).
var blkidPaths = []string{"blkid", "/usr/sbin/blkid", "/sbin/blkid"}

// probe is the signature probe Prepare uses (tests replace it to prove it fails closed).
var probe = Probe

// Probe reports the signatures on a block device or image the way wipefs sees them: util-linux
// blkid in low-level mode (-p reads the superblocks and partition tables on the device itself,
// no cache), so every format blkid knows counts, md RAID members with metadata 0.90/1.0 at
// the end of the device included. It returns "" for a blank device and an error when it cannot
// tell (then the device must not be prepared).
func Probe(path string) (string, error) {
	// blkid reports a device it cannot open as blank (exit 2): open it first.
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot open it to probe for signatures: %w", err)
	}
	f.Close()
	bin := ""
	for _, c := range blkidPaths {
		if p, err := exec.LookPath(c); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		return "", fmt.Errorf("blkid (util-linux) not found: the agent cannot prove %s carries no signature", path)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-p", "-o", "export", "--", path)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 2: // nothing found
		return "", nil
	case errors.As(err, &exit) && exit.ExitCode() == 8:
		return "several conflicting signatures (blkid: ambivalent probe result)", nil
	case err != nil:
		return "", fmt.Errorf("blkid -p %s: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	return describe(out), nil
}

// describe names what blkid's export output found, e.g. "linux_raid_member (raid, 1.0)" or
// "gpt partition table".
func describe(export []byte) string {
	kv := map[string]string{}
	for _, line := range strings.Split(string(export), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			kv[k] = v
		}
	}
	var found []string
	if t := kv["TYPE"]; t != "" {
		detail := []string{}
		for _, k := range []string{"USAGE", "VERSION"} {
			if kv[k] != "" {
				detail = append(detail, kv[k])
			}
		}
		if len(detail) > 0 {
			t += " (" + strings.Join(detail, ", ") + ")"
		}
		found = append(found, t)
	}
	if pt := kv["PTTYPE"]; pt != "" {
		found = append(found, pt+" partition table")
	}
	if len(found) == 0 {
		return "an unnamed signature (blkid found one)"
	}
	return strings.Join(found, " and ")
}

// signature probes root/dev/<name>.
func (p *prep) signature(name string) (string, error) {
	return probe(filepath.Join(p.root, "dev", name))
}
