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
		Index       int    `json:"index"`
		Name        string `json:"name"`
		Kind        string `json:"kind"`
		MemoryBytes int64  `json:"memory_bytes"`
	} `json:"gpu_device"`
	GPUUnavailable string `json:"gpu_unavailable"`
}

// readSealerCapabilities reads the engines the node's sealer image reported, and the GPU
// engine's device or why it has none. A missing or unreadable file reports no engines (with
// the reason), never an engine the image did not name.
func readSealerCapabilities(path string) ([]sealv1.PC2Engine, string) {
	if path == "" {
		return nil, ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Sprintf("sealer capabilities not read: %v", err)
	}
	var c sealerCapabilities
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Sprintf("sealer capabilities in %s: %v", path, err)
	}
	var engines []sealv1.PC2Engine
	for _, e := range c.PC2Engines {
		switch e := sealv1.PC2Engine(e); e {
		case sealv1.PC2EngineCPU, sealv1.PC2EngineGPU:
			engines = append(engines, e)
		}
	}
	gpu := "unavailable: " + c.GPUUnavailable
	if d := c.GPUDevice; d != nil {
		gpu = fmt.Sprintf("OpenCL device %d: %s (%s, %d MiB)", d.Index, d.Name, d.Kind, d.MemoryBytes>>20)
	}
	return engines, gpu
}
