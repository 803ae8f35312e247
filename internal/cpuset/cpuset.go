// Package cpuset reads and writes Linux cpu lists ("0-3,8,10-11") as sorted []int, the form
// the layout and placement code works with, on top of k8s.io/utils/cpuset (the kubelet's own
// parser).
package cpuset

import (
	"fmt"
	"regexp"
	"strings"

	kcpuset "k8s.io/utils/cpuset"
)

// hugeID finds a CPU number of six or more digits: no machine has that many CPUs, and a range
// up to it would make the parser allocate one entry per CPU of a user-written list.
var hugeID = regexp.MustCompile(`[0-9]{6,}`)

// Parse reads a Linux cpulist such as "0-3,8,10-11" (as in sysfs cpulist files or the
// kubelet's reservedSystemCPUs). Whitespace and an empty list are accepted. The result is
// sorted and free of duplicates.
func Parse(s string) ([]int, error) {
	compact := strings.Join(strings.Fields(s), "")
	if compact == "" {
		return nil, nil
	}
	if id := hugeID.FindString(compact); id != "" {
		return nil, fmt.Errorf("cpulist %q: cpu %s out of range", s, id)
	}
	set, err := kcpuset.Parse(compact)
	if err != nil {
		return nil, fmt.Errorf("cpulist %q: %w", s, err)
	}
	return set.List(), nil
}

// MustParse is Parse for constant lists in tests; it panics on a malformed list.
func MustParse(s string) []int {
	c, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return c
}

// Format writes cpus as a compact Linux cpulist ("0-3,8"). The input need not be sorted;
// duplicates are dropped.
func Format(cpus []int) string { return kcpuset.New(cpus...).String() }
