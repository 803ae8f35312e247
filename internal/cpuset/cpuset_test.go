package cpuset

import (
	"reflect"
	"testing"
)

func TestParseFormat(t *testing.T) {
	cases := []struct {
		in   string
		want []int
		out  string
	}{
		{"", nil, ""},
		{"0", []int{0}, "0"},
		{"0-3,8,10-11\n", []int{0, 1, 2, 3, 8, 10, 11}, "0-3,8,10-11"},
		{"5,1-2,2", []int{1, 2, 5}, "1-2,5"},
		{" 0-1 , 64-65 ", []int{0, 1, 64, 65}, "0-1,64-65"},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.in, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Parse(%q) = %v, want %v", c.in, got, c.want)
		}
		if f := Format(got); f != c.out {
			t.Errorf("Format(%v) = %q, want %q", got, f, c.out)
		}
	}
	for _, bad := range []string{"a", "3-1", "-1", "1-x", "0-99999999", "1,,2"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
