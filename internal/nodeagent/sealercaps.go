package nodeagent

import (
	"encoding/json"
	"fmt"
	"os"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// sealerCapabilities is the part of `sealer capabilities`' document the agent publishes
// (sealer-image/crates/sealer/src/main.rs writes it).
type sealerCapabilities struct {
	PC2Engines []string `json:"pc2_engines"`
	GPUDevice  *struct {
		Index         int    `json:"index"`
		Name          string `json:"name"`
		Kind          string `json:"kind"`
		MemoryBytes   int64  `json:"memory_bytes"`
		MaxAllocBytes int64  `json:"max_alloc_bytes"`
	} `json:"gpu_device"`
	GPUUnavailable   string   `json:"gpu_unavailable"`
	LayerDeviceModes []string `json:"layer_device_modes"`
}

// imageCapabilities is what the agent publishes of them.
type imageCapabilities struct {
	PC2Engines       []sealv1.PC2Engine
	GPUEngine        string
	LayerDeviceModes []sealv1.DeviceMode
	// GPUMemoryBytes and GPUMaxAllocBytes are the GPU engine's device's (0: no device).
	GPUMemoryBytes, GPUMaxAllocBytes int64
}

// readSealerCapabilities reads the engines and layer device modes the node's sealer image
// reported, and the GPU engine's device or why it has none. A missing or unreadable file
// reports nothing (with the reason), never an engine or mode the image did not name.
func readSealerCapabilities(path string) imageCapabilities {
	if path == "" {
		return imageCapabilities{}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return imageCapabilities{GPUEngine: fmt.Sprintf("sealer capabilities not read: %v", err)}
	}
	var c sealerCapabilities
	if err := json.Unmarshal(b, &c); err != nil {
		return imageCapabilities{GPUEngine: fmt.Sprintf("sealer capabilities in %s: %v", path, err)}
	}
	var modes []sealv1.DeviceMode
	for _, m := range c.LayerDeviceModes {
		switch m := sealv1.DeviceMode(m); m {
		case sealv1.DeviceModeKernel, sealv1.DeviceModeVFIO:
			modes = append(modes, m)
		}
	}
	var engines []sealv1.PC2Engine
	for _, e := range c.PC2Engines {
		switch e := sealv1.PC2Engine(e); e {
		case sealv1.PC2EngineCPU, sealv1.PC2EngineGPU:
			engines = append(engines, e)
		}
	}
	caps := imageCapabilities{PC2Engines: engines, GPUEngine: "unavailable: " + c.GPUUnavailable, LayerDeviceModes: modes}
	if d := c.GPUDevice; d != nil {
		caps.GPUEngine = fmt.Sprintf("OpenCL device %d: %s (%s, %d MiB)", d.Index, d.Name, d.Kind, d.MemoryBytes>>20)
		caps.GPUMemoryBytes, caps.GPUMaxAllocBytes = d.MemoryBytes, d.MaxAllocBytes
	}
	return caps
}
