package nodeagent

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

func TestReadSealerCapabilities(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, path string
		engines    []sealv1.PC2Engine
		gpu        string
	}{
		{"not configured", "", nil, ""},
		{"missing file", filepath.Join(dir, "none.json"), nil, "not read"},
		{"not JSON", write("bad.json", "{"), nil, "bad.json"},
		{"cpu only", write("cpu.json", `{"pc2_engines":["cpu"],"gpu_unavailable":"no usable OpenCL device: no OpenCL GPU"}`),
			[]sealv1.PC2Engine{sealv1.PC2EngineCPU}, "unavailable: no usable OpenCL device"},
		{"gpu", write("gpu.json", `{"pc2_engines":["cpu","gpu"],"gpu_device":{"index":0,"name":"NVIDIA H100 80GB HBM3","kind":"gpu","memory_bytes":85520809984}}`),
			[]sealv1.PC2Engine{sealv1.PC2EngineCPU, sealv1.PC2EngineGPU}, "OpenCL device 0: NVIDIA H100 80GB HBM3 (gpu, 81559 MiB)"},
		{"unknown engines are not published", write("fpga.json", `{"pc2_engines":["cpu","fpga"]}`),
			[]sealv1.PC2Engine{sealv1.PC2EngineCPU}, "unavailable"},
	}
	for _, c := range cases {
		engines, gpu := readSealerCapabilities(c.path)
		if !reflect.DeepEqual(engines, c.engines) || !strings.Contains(gpu, c.gpu) || (c.gpu == "" && gpu != "") {
			t.Errorf("%s: got %v %q, want %v and %q", c.name, engines, gpu, c.engines, c.gpu)
		}
	}
}
