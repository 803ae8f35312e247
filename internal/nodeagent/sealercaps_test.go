package nodeagent

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/contracts"
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
		img := readSealerCapabilities(c.path)
		engines, gpu := img.PC2Engines, img.GPUEngine
		if !reflect.DeepEqual(engines, c.engines) || !strings.Contains(gpu, c.gpu) || (c.gpu == "" && gpu != "") {
			t.Errorf("%s: got %v %q, want %v and %q", c.name, engines, gpu, c.engines, c.gpu)
		}
	}
}

// The agent reads the capabilities contract's examples (contracts/sealer-capabilities.json,
// which the sealer's tests check its output against), and every key it reads is in them: a
// key renamed on either side fails one of the two tests.
func TestSealerCapabilitiesContract(t *testing.T) {
	ex := contracts.SealerCapabilitiesExamples()
	if len(ex) != 2 {
		t.Fatalf("%d examples, want 2 (a GPU device, none)", len(ex))
	}
	for i, e := range ex {
		p := filepath.Join(t.TempDir(), "caps.json")
		if err := os.WriteFile(p, e, 0o644); err != nil {
			t.Fatal(err)
		}
		img := readSealerCapabilities(p)
		if !reflect.DeepEqual(img.LayerDeviceModes, []sealv1.DeviceMode{sealv1.DeviceModeKernel}) {
			t.Errorf("example %d: layer device modes %v", i, img.LayerDeviceModes)
		}
		wantEngines, wantGPU := []sealv1.PC2Engine{sealv1.PC2EngineCPU, sealv1.PC2EngineGPU}, "OpenCL device 0: NVIDIA H100 80GB HBM3 (gpu, 81559 MiB)"
		if i == 1 {
			wantEngines, wantGPU = []sealv1.PC2Engine{sealv1.PC2EngineCPU}, "unavailable: no usable OpenCL device"
		}
		if !reflect.DeepEqual(img.PC2Engines, wantEngines) || !strings.HasPrefix(img.GPUEngine, wantGPU) {
			t.Errorf("example %d: %+v", i, img)
		}
		// The GPU's memory, which placement sizes the batch's ranges against.
		wantMem, wantAlloc := int64(85520809984), int64(21380202496)
		if i == 1 {
			wantMem, wantAlloc = 0, 0
		}
		if img.GPUMemoryBytes != wantMem || img.GPUMaxAllocBytes != wantAlloc {
			t.Errorf("example %d: GPU memory %d, largest allocation %d; want %d, %d", i, img.GPUMemoryBytes, img.GPUMaxAllocBytes, wantMem, wantAlloc)
		}
	}
	for _, key := range contracts.UnknownKeys(ex, sealerCapabilities{}) {
		t.Errorf("the agent reads %q, which contracts/sealer-capabilities.json does not have", key)
	}
}
