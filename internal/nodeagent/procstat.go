package nodeagent

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// CPUTimes are one CPU's cumulative jiffies from /proc/stat.
type CPUTimes struct {
	// Busy is user+nice+system+irq+softirq+steal; Idle is idle+iowait.
	Busy, Idle uint64
}

// ParseStat reads the per-CPU lines ("cpuN ...") of /proc/stat.
func ParseStat(r io.Reader) (map[int]CPUTimes, error) {
	out := map[int]CPUTimes{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		id, err := strconv.Atoi(f[0][3:])
		if err != nil {
			continue
		}
		var v [8]uint64
		for i := 1; i < len(f) && i <= 8; i++ {
			v[i-1], _ = strconv.ParseUint(f[i], 10, 64)
		}
		// user nice system idle iowait irq softirq steal (guest time is inside user/nice)
		out[id] = CPUTimes{Busy: v[0] + v[1] + v[2] + v[5] + v[6] + v[7], Idle: v[3] + v[4]}
	}
	return out, sc.Err()
}

// BusyRatio is the fraction of time between two samples that a CPU was busy, in [0,1]; ok is
// false when no time passed (or the counters went backwards, e.g. CPU hotplug).
func BusyRatio(prev, cur CPUTimes) (ratio float64, ok bool) {
	if cur.Busy < prev.Busy || cur.Idle < prev.Idle {
		return 0, false
	}
	busy, idle := cur.Busy-prev.Busy, cur.Idle-prev.Idle
	if busy+idle == 0 {
		return 0, false
	}
	return float64(busy) / float64(busy+idle), true
}
