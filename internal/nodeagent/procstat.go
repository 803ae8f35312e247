package nodeagent

import (
	"github.com/prometheus/procfs"
)

// CPUTimes are one CPU's cumulative times from /proc/stat, in seconds.
type CPUTimes struct {
	// Busy is user+nice+system+irq+softirq+steal; Idle is idle+iowait (guest time is inside
	// user/nice).
	Busy, Idle float64
}

// ReadStat reads the per-CPU lines of procDir/stat with procfs (node_exporter's parser).
func ReadStat(procDir string) (map[int]CPUTimes, error) {
	fs, err := procfs.NewFS(procDir)
	if err != nil {
		return nil, err
	}
	st, err := fs.Stat()
	if err != nil {
		return nil, err
	}
	out := make(map[int]CPUTimes, len(st.CPU))
	for id, c := range st.CPU {
		out[int(id)] = CPUTimes{Busy: c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal, Idle: c.Idle + c.Iowait}
	}
	return out, nil
}

// BusyRatio is the fraction of time between two samples that a CPU was busy, in [0,1]; ok is
// false when no time passed (or the counters went backwards, e.g. CPU hotplug).
func BusyRatio(prev, cur CPUTimes) (ratio float64, ok bool) {
	if cur.Busy < prev.Busy || cur.Idle < prev.Idle {
		return 0, false
	}
	busy, idle := cur.Busy-prev.Busy, cur.Idle-prev.Idle
	if busy+idle <= 0 {
		return 0, false
	}
	return min(busy/(busy+idle), 1), true
}
