// runc-opencl is the local cluster's stand-in for NVIDIA's container runtime: containerd runs it
// in place of runc; on `create` it reads the container's OCI config, and when the process
// environment asks for devices (NVIDIA_VISIBLE_DEVICES set, and not void or none, as the
// NVIDIA toolkit reads it) it adds read-only bind mounts of the host's OpenCL stack (the ICD
// files and the libraries the vendor driver needs, pocl in CI), scratch folders and variables
// before handing over to runc.
// Every other call goes to runc unchanged.
//
// Its settings are a JSON file beside it, <binary>.json: the real runc, the host paths to
// bind, writable scratch folders (tmpfs) and variables the driver needs (pocl keeps compiled
// kernels in a cache folder and finds no device without a writable one):
//
//	{"runc": "/usr/sbin/runc", "mounts": ["/usr", "/lib", "/etc/OpenCL"],
//	 "tmpfs": ["/var/cache/pocl"], "env": ["POCL_CACHE_DIR=/var/cache/pocl"]}
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

type settings struct {
	Runc   string   `json:"runc"`
	Mounts []string `json:"mounts"`
	Tmpfs  []string `json:"tmpfs"`
	Env    []string `json:"env"`
}

func main() {
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	raw, err := os.ReadFile(self + ".json")
	if err != nil {
		fail(err)
	}
	var s settings
	if err := json.Unmarshal(raw, &s); err != nil || s.Runc == "" {
		fail(fmt.Errorf("%s.json: %v (want {\"runc\": PATH, \"mounts\": [PATHS]})", self, err))
	}
	if bundle := createBundle(os.Args[1:]); bundle != "" {
		if err := inject(filepath.Join(bundle, "config.json"), s); err != nil {
			fail(err)
		}
	}
	fail(syscall.Exec(s.Runc, append([]string{s.Runc}, os.Args[1:]...), os.Environ()))
}

// createBundle returns the --bundle of a `create` or `run` call, or "".
func createBundle(args []string) string {
	create := false
	for i, a := range args {
		switch {
		case a == "create" || a == "run":
			create = true
		case create && (a == "--bundle" || a == "-b") && i+1 < len(args):
			return args[i+1]
		case create && strings.HasPrefix(a, "--bundle="):
			return strings.TrimPrefix(a, "--bundle=")
		}
	}
	return ""
}

// inject adds the mounts and variables to an OCI config whose process asks for devices; it
// keeps every other field as it was.
func inject(path string, s settings) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !wantsDevices(spec) {
		return nil
	}
	list, _ := spec["mounts"].([]any)
	for _, m := range s.Mounts {
		list = append(list, map[string]any{
			"destination": m, "type": "bind", "source": m, "options": []string{"rbind", "ro", "nosuid", "nodev"},
		})
	}
	for _, m := range s.Tmpfs {
		list = append(list, map[string]any{
			"destination": m, "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=1777", "size=512m"},
		})
	}
	spec["mounts"] = list
	proc := spec["process"].(map[string]any) // wantsDevices found it
	env, _ := proc["env"].([]any)
	for _, e := range s.Env {
		env = append(env, e)
	}
	proc["env"] = env
	out, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

func wantsDevices(spec map[string]any) bool {
	proc, _ := spec["process"].(map[string]any)
	env, _ := proc["env"].([]any)
	for _, e := range env {
		v, ok := strings.CutPrefix(fmt.Sprint(e), "NVIDIA_VISIBLE_DEVICES=")
		if ok && v != "" && v != "void" && v != "none" {
			return true
		}
	}
	return false
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "runc-opencl:", err)
	os.Exit(1)
}
