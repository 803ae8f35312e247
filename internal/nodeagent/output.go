package nodeagent

import (
	"errors"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// outputVolumes measures the file system of each output path under root. A path that does
// not exist yet is measured where it will be created (its nearest existing parent: the sealer
// pod's hostPath volume creates the directory), so a fresh node reports its disk; but when
// the agent sees the host through a root other than "/" (its pod mounts parts of the host
// under /host) and only that root exists, the path was not mounted into the agent, and
// measuring the agent's own file system would be a lie.
func outputVolumes(root string, paths []string) []sealv1.OutputVolume {
	if len(paths) == 0 {
		paths = []string{sealv1.DefaultOutputHostPath}
	}
	out := make([]sealv1.OutputVolume, 0, len(paths))
	for _, p := range paths {
		v := sealv1.OutputVolume{Path: filepath.Clean(p)}
		var st unix.Statfs_t
		dir := filepath.Join(root, v.Path)
		for {
			err := unix.Statfs(dir, &st)
			if err == nil {
				v.CapacityBytes = int64(st.Blocks) * st.Bsize &^ (1<<20 - 1)
				v.AvailableBytes = roundDown(int64(st.Bavail)*st.Bsize, spaceQuantum(v.CapacityBytes))
				break
			}
			if !errors.Is(err, fs.ErrNotExist) || dir == filepath.Dir(dir) {
				v.Reason = "statfs " + v.Path + ": " + err.Error()
				break
			}
			dir = filepath.Dir(dir)
			if filepath.Clean(root) != "/" && dir == filepath.Clean(root) {
				v.Reason = "not visible to the node agent: add it to the chart's nodeAgent.outputPaths"
				break
			}
		}
		out = append(out, v)
	}
	return out
}

// spaceQuantum is the step free space is reported in: about a thousandth of the volume (a
// power of two, at least 1 MiB). Writers on the volume (a sealer's outputs, anything else on
// a shared disk) then change the status, and wake placement, every few hundred MiB of a
// large disk instead of every MiB; placement sees at most that much less than is free.
func spaceQuantum(capacity int64) int64 {
	q := int64(1 << 20)
	for q*2 <= capacity/1024 {
		q *= 2
	}
	return q
}

func roundDown(n, q int64) int64 { return n - n%q }
