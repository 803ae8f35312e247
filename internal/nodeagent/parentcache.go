package nodeagent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// cacheManifest is the part of a parent-cache manifest (`<proof>.json`, written by `sealer
// parent-cache`) the agent reads.
type cacheManifest struct {
	Name     string  `json:"name"`
	File     string  `json:"file"`
	Bytes    int64   `json:"bytes"`
	Verified bool    `json:"verified"`
	Building bool    `json:"building"`
	Percent  float64 `json:"percent"`
}

// parentCacheDirHidden says why the agent cannot see the node's cache directory ("" when it
// can): under a root other than "/" (the agent's pod mounts parts of the host under /host) a
// missing directory was not mounted (the chart mounts it with DirectoryOrCreate).
func parentCacheDirHidden(root, dir string) string {
	if filepath.Clean(root) == "/" {
		return "" // the host itself: a missing directory just holds no cache yet
	}
	if _, err := os.Stat(filepath.Join(root, dir)); err != nil {
		return fmt.Sprintf("parent-cache directory %s (spec.parentCache.path) is not visible to the node agent: set the chart's nodeAgent.parentCachePath to it", dir)
	}
	return ""
}

// parentCaches reports the caches in the node's parent-cache directory (under root). A cache
// counts as verified only while its file still has the size its manifest recorded: a cheap
// check every scan catches truncation; the sealer checks the digest before each use.
func parentCaches(root, dir string) []sealv1.ParentCacheStatus {
	full := filepath.Join(root, dir)
	names, _ := filepath.Glob(filepath.Join(full, "*.json"))
	var out []sealv1.ParentCacheStatus
	for _, n := range names {
		raw, err := os.ReadFile(n)
		if err != nil {
			continue
		}
		var m cacheManifest
		proof := strings.TrimSuffix(filepath.Base(n), ".json")
		st := sealv1.ParentCacheStatus{Proof: proof}
		switch {
		case json.Unmarshal(raw, &m) != nil || m.Name != proof:
			st.Reason = "unreadable manifest " + filepath.Base(n)
		case m.Building:
			st.Building, st.Percent = true, int32(m.Percent)
		case !m.Verified || m.File == "":
			st.Reason = "not verified: its build did not finish"
		default:
			fi, err := os.Stat(filepath.Join(full, filepath.Base(m.File)))
			switch {
			case err != nil:
				st.Reason = "cache file missing: " + err.Error()
			case fi.Size() != m.Bytes:
				st.Reason = fmt.Sprintf("cache file has %d bytes, its manifest recorded %d: truncated or replaced", fi.Size(), m.Bytes)
			default:
				st.Verified, st.Bytes = true, m.Bytes
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Proof < out[j].Proof })
	return out
}
