// Package cpuset parses and formats Linux cpu lists ("0-3,8,10-11").
package cpuset

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Parse reads a Linux cpulist such as "0-3,8,10-11" (as in sysfs cpulist files or the
// kubelet's reservedSystemCPUs). Whitespace and an empty list are accepted. The result is
// sorted and free of duplicates.
func Parse(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cpulist %q: bad cpu %q", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return nil, fmt.Errorf("cpulist %q: bad range %q", s, part)
			}
		}
		if b-a > 1<<16 {
			return nil, fmt.Errorf("cpulist %q: range %q too large", s, part)
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	out := make([]int, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Ints(out)
	return out, nil
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
func Format(cpus []int) string {
	if len(cpus) == 0 {
		return ""
	}
	c := append([]int(nil), cpus...)
	sort.Ints(c)
	var b strings.Builder
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && (c[j+1] == c[j]+1 || c[j+1] == c[j]) {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if c[i] == c[j] {
			b.WriteString(strconv.Itoa(c[i]))
		} else {
			fmt.Fprintf(&b, "%d-%d", c[i], c[j])
		}
		i = j + 1
	}
	return b.String()
}
