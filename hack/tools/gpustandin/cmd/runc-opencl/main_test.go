package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestCreateBundle(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--root", "/r", "--log", "l.json", "create", "--bundle", "/b", "--pid-file", "p", "id"}, "/b"},
		{[]string{"create", "--bundle=/b2", "id"}, "/b2"},
		{[]string{"run", "-b", "/b3", "id"}, "/b3"},
		{[]string{"--root", "/r", "start", "id"}, ""},
		{[]string{"--root", "/r", "delete", "--force", "id"}, ""},
		{[]string{"state", "--bundle", "/not-a-create", "id"}, ""},
	} {
		if got := createBundle(c.args); got != c.want {
			t.Errorf("createBundle(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

// inject adds the mounts only to a process that asks for devices, and keeps every other field.
func TestInject(t *testing.T) {
	for _, c := range []struct {
		env    []string
		mounts int
	}{
		{[]string{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=opencl-0"}, 4},
		{[]string{"NVIDIA_VISIBLE_DEVICES=all"}, 4},
		{[]string{"NVIDIA_VISIBLE_DEVICES=void"}, 1},
		{[]string{"NVIDIA_VISIBLE_DEVICES=none"}, 1},
		{[]string{"NVIDIA_VISIBLE_DEVICES="}, 1},
		{[]string{"PATH=/bin"}, 1},
	} {
		path := filepath.Join(t.TempDir(), "config.json")
		spec := map[string]any{
			"ociVersion": "1.0.2", "process": map[string]any{"env": c.env, "cwd": "/"},
			"mounts": []any{map[string]any{"destination": "/proc", "type": "proc", "source": "proc"}},
			"linux":  map[string]any{"namespaces": []any{map[string]any{"type": "pid"}}},
		}
		raw, _ := json.Marshal(spec)
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := inject(path, settings{Mounts: []string{"/etc/OpenCL", "/usr"}, Tmpfs: []string{"/var/cache/pocl"}, Env: []string{"POCL_CACHE_DIR=/var/cache/pocl"}}); err != nil {
			t.Fatal(err)
		}
		raw, _ = os.ReadFile(path)
		var got struct {
			OCIVersion string `json:"ociVersion"`
			Mounts     []struct {
				Destination, Source, Type string
				Options                   []string
			}
			Linux   struct{ Namespaces []map[string]string }
			Process struct{ Env []string }
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Mounts) != c.mounts || got.OCIVersion != "1.0.2" || len(got.Linux.Namespaces) != 1 || got.Mounts[0].Destination != "/proc" {
			t.Errorf("env %q: %s", c.env, raw)
			continue
		}
		added := len(got.Process.Env) - len(c.env)
		if c.mounts == 4 {
			if m := got.Mounts[2]; m.Destination != "/usr" || m.Source != "/usr" || m.Type != "bind" || m.Options[1] != "ro" {
				t.Errorf("env %q: mount %+v", c.env, m)
			}
			if m := got.Mounts[3]; m.Destination != "/var/cache/pocl" || m.Type != "tmpfs" {
				t.Errorf("env %q: mount %+v", c.env, m)
			}
			if added != 1 || got.Process.Env[len(got.Process.Env)-1] != "POCL_CACHE_DIR=/var/cache/pocl" {
				t.Errorf("env %q: process env %q", c.env, got.Process.Env)
			}
		} else if added != 0 {
			t.Errorf("env %q: process env %q", c.env, got.Process.Env)
		}
	}
}
