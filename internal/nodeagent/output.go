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
				// Whole MiB: a sealer writing its outputs does not rewrite the status per byte.
				v.CapacityBytes = int64(st.Blocks) * st.Bsize &^ (1<<20 - 1)
				v.AvailableBytes = int64(st.Bavail) * st.Bsize &^ (1<<20 - 1)
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
