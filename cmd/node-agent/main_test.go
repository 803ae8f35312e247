package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func run(args ...string) (string, error) {
	var out bytes.Buffer
	c := newRoot()
	c.SetOut(&out)
	c.SetErr(&bytes.Buffer{})
	c.SetArgs(args)
	err := c.Execute()
	return out.String(), err
}

func TestCalcJSON(t *testing.T) {
	out, err := run("calc", "--root", "../../internal/topology/testdata/tr-pro-5975wx", "--batch-size", "64")
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		BatchSize    int  `json:"batch_size"`
		Supported    bool `json:"supported"`
		Coordinators []struct {
			CPU     int `json:"cpu"`
			Hashers []struct{ CPU, Sectors int }
		} `json:"coordinators"`
		Roles map[string]int `json:"roles"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, c := range l.Coordinators {
		for _, h := range c.Hashers {
			sum += h.Sectors
		}
	}
	if !l.Supported || l.BatchSize != 64 || sum != 64 || len(l.Roles) != 8 {
		t.Errorf("calc: %s", out)
	}
	out, err = run("calc", "--root", "../../internal/topology/testdata/tr-pro-5975wx", "-b", "128", "-o", "yaml")
	if !errors.Is(err, errUnsupported) || !bytes.Contains([]byte(out), []byte("supported: false")) {
		t.Errorf("unsupported calc: %v\n%s", err, out)
	}
}

func TestDiscover(t *testing.T) {
	out, err := run("discover", "--root", "../../internal/topology/testdata/epyc-7543-2s", "-o", "yaml")
	if err != nil || !bytes.Contains([]byte(out), []byte("sockets: 2")) {
		t.Fatalf("discover: %v\n%.300s", err, out)
	}
}
