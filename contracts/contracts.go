// Package contracts holds the shapes the operator and the sealer share, as files both sides'
// tests read (the Rust workspace reads them by path): the exit codes, the sealer's
// capabilities, progress, results and qualification documents, and the seeds file C1 reads.
package contracts

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

//go:embed exit-codes.json
var exitCodesJSON []byte

// ExitCode is one sealer exit code.
type ExitCode struct {
	Code    int32  `json:"code"`
	Name    string `json:"name"`
	Meaning string `json:"meaning"`
	// Operator is what the operator does: complete, retry, fail (the same input fails again)
	// or rebuild-cache (then retry).
	Operator string `json:"operator"`
}

var exitCodes = func() map[int32]ExitCode {
	var doc struct {
		Codes []ExitCode `json:"codes"`
	}
	if err := json.Unmarshal(exitCodesJSON, &doc); err != nil {
		panic(fmt.Sprintf("contracts/exit-codes.json: %v", err))
	}
	m := make(map[int32]ExitCode, len(doc.Codes))
	for _, c := range doc.Codes {
		m[c.Code] = c
	}
	return m
}()

// Exit describes a sealer exit code; ok is false for a code the table lacks (a signal, 137).
func Exit(code int32) (ExitCode, bool) {
	c, ok := exitCodes[code]
	return c, ok
}

// ExitCodes lists the table.
func ExitCodes() []ExitCode {
	out := make([]ExitCode, 0, len(exitCodes))
	for _, c := range exitCodes {
		out = append(out, c)
	}
	return out
}

//go:embed sealer-capabilities.json
var sealerCapabilitiesJSON []byte

// SealerCapabilitiesExamples are the documents `sealer capabilities` writes (a GPU engine
// device opened, and none), each as the node agent reads it.
func SealerCapabilitiesExamples() []json.RawMessage {
	return examples("sealer-capabilities.json", sealerCapabilitiesJSON)
}

//go:embed sealer-results.json
var sealerResultsJSON []byte

// SealerResultsExamples are the sealer's results: a batch's PC2, a SnapDeals update, and the
// termination message of results over 4 KiB (pointing at results.json).
func SealerResultsExamples() []json.RawMessage {
	return examples("sealer-results.json", sealerResultsJSON)
}

//go:embed sealer-progress.json
var sealerProgressJSON []byte

// SealerProgressExamples are the sealer's progress documents: PC1 running (pinned, buffers
// allocated), PC2 running before a rate is known, PC2 failed.
func SealerProgressExamples() []json.RawMessage {
	return examples("sealer-progress.json", sealerProgressJSON)
}

//go:embed sealer-qualification.json
var sealerQualificationJSON []byte

// SealerQualificationExamples are `sealer qualify`'s documents: two layer devices, one with
// its write measured and one without a slot to write in.
func SealerQualificationExamples() []json.RawMessage {
	return examples("sealer-qualification.json", sealerQualificationJSON)
}

func examples(name string, raw []byte) []json.RawMessage {
	var doc struct {
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		panic(fmt.Sprintf("contracts/%s: %v", name, err))
	}
	return doc.Examples
}

// UnknownKeys lists the JSON keys a reader type (a struct, followed into its struct fields
// as "outer.inner" and into slices of structs as "outer[].inner") reads that no example
// holds: a key one side renamed alone.
func UnknownKeys(examples []json.RawMessage, reader any) []string {
	have := map[string]bool{}
	for _, e := range examples {
		var m map[string]json.RawMessage
		if json.Unmarshal(e, &m) != nil {
			continue
		}
		for k, v := range m {
			have[k] = true
			var sub map[string]json.RawMessage
			if json.Unmarshal(v, &sub) == nil {
				for sk := range sub {
					have[k+"."+sk] = true
				}
			}
			var items []map[string]json.RawMessage
			if json.Unmarshal(v, &items) == nil {
				for _, it := range items {
					for sk := range it {
						have[k+"[]."+sk] = true
					}
				}
			}
		}
	}
	var unknown []string
	var walk func(prefix string, ty reflect.Type)
	walk = func(prefix string, ty reflect.Type) {
		for ty.Kind() == reflect.Pointer {
			ty = ty.Elem()
		}
		for f := range ty.Fields() {
			key := prefix + strings.Split(f.Tag.Get("json"), ",")[0]
			if !have[key] {
				unknown = append(unknown, key)
			}
			switch ft := f.Type; {
			case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
				walk(key+".", ft)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(key+"[].", ft.Elem())
			}
		}
	}
	walk("", reflect.TypeOf(reader))
	sort.Strings(unknown)
	return unknown
}

//go:embed synth-costs.json
var synthCostsJSON []byte

// SynthCost is what one SyntheticPoRep sector's synthetic proofs cost with the sealer's
// streaming writer (sealer-proofs `synth::cost`, which holds the same numbers).
type SynthCost struct {
	SectorSize      uint64  `json:"sector_size"`
	Challenges      int64   `json:"challenges"`
	PeakMemoryBytes int64   `json:"peak_memory_bytes"`
	FileBytes       int64   `json:"file_bytes"`
	CPUSeconds      float64 `json:"cpu_seconds"`
}

var synthCosts = func() map[uint64]SynthCost {
	var doc struct {
		Sizes []SynthCost `json:"sizes"`
	}
	if err := json.Unmarshal(synthCostsJSON, &doc); err != nil {
		panic(fmt.Sprintf("contracts/synth-costs.json: %v", err))
	}
	m := make(map[uint64]SynthCost, len(doc.Sizes))
	for _, c := range doc.Sizes {
		m[c.SectorSize] = c
	}
	return m
}()

// SynthCostOf is the synthetic proofs' cost for a sector size in bytes (false for a size the
// sealer does not seal).
func SynthCostOf(sectorBytes uint64) (SynthCost, bool) {
	c, ok := synthCosts[sectorBytes]
	return c, ok
}

//go:embed pc2-gpu-budget.json
var pc2GPUBudgetJSON []byte

// PC2GPUDevice is one GPU in a PC2 GPU budget example: its memory and largest allocation.
type PC2GPUDevice struct {
	MemoryBytes   uint64 `json:"memory_bytes"`
	MaxAllocBytes uint64 `json:"max_alloc_bytes"`
}

// PC2GPUBudgetExample is one batch on some GPUs and the budget the sealer computes for it.
type PC2GPUBudgetExample struct {
	What        string         `json:"what"`
	Devices     []PC2GPUDevice `json:"devices"`
	Leaves      uint64         `json:"leaves"`
	NPP         uint64         `json:"npp"`
	Sectors     int            `json:"sectors"`
	Layers      int            `json:"layers"`
	Range       uint64         `json:"range"`
	Parts       int            `json:"parts"`
	InFlight    int            `json:"in_flight"`
	DeviceBytes uint64         `json:"device_bytes"`
	HostBytes   uint64         `json:"host_bytes"`
}

// PC2GPUBudget is contracts/pc2-gpu-budget.json: the page-locked host memory the sealer's layer
// buffers may take, and examples of the GPU engine's budget (sealer_pc2::engine::gpu_budget).
type PC2GPUBudget struct {
	HostBufferBytes uint64                `json:"host_buffer_bytes"`
	Examples        []PC2GPUBudgetExample `json:"examples"`
}

var pc2GPUBudget = func() PC2GPUBudget {
	var doc PC2GPUBudget
	if err := json.Unmarshal(pc2GPUBudgetJSON, &doc); err != nil {
		panic(fmt.Sprintf("contracts/pc2-gpu-budget.json: %v", err))
	}
	return doc
}()

// PC2GPUBudgetDoc returns contracts/pc2-gpu-budget.json.
func PC2GPUBudgetDoc() PC2GPUBudget { return pc2GPUBudget }

//go:embed pc2-bounds.json
var pc2BoundsJSON []byte

// PC2Model is the model of PC2's four bounds (contracts/pc2-bounds.json; sealer-pc2's
// bounds.rs holds the same constants): the engines' hashing rates and the GPU copy rate.
type PC2Model struct {
	CPUSectorBytesPerCPUSecond float64 `json:"cpu_sector_bytes_per_cpu_second"`
	GPUArity11HashesPerSecond  float64 `json:"gpu_arity11_hashes_per_second"`
	GPUArity8HashesPerSecond   float64 `json:"gpu_arity8_hashes_per_second"`
	GPUCopyBytesPerSecond      float64 `json:"gpu_copy_bytes_per_second"`
}

// PC2BoundsExample is one worked example of the model: a batch, a machine, and its bounds.
type PC2BoundsExample struct {
	Name                string  `json:"name"`
	SectorSize          uint64  `json:"sector_size"`
	Sectors             int     `json:"sectors"`
	Engine              string  `json:"engine"`
	CPUs                int     `json:"cpus"`
	GPUs                int     `json:"gpus"`
	ReadBytesPerSecond  float64 `json:"read_bytes_per_second"`
	WriteBytesPerSecond float64 `json:"write_bytes_per_second"`
	ReadBytes           int64   `json:"read_bytes"`
	WriteBytes          int64   `json:"write_bytes"`
	KernelSeconds       float64 `json:"kernel_seconds"`
	CopySeconds         float64 `json:"copy_seconds"`
	ReadSeconds         float64 `json:"read_seconds"`
	WriteSeconds        float64 `json:"write_seconds"`
	Seconds             float64 `json:"seconds"`
	Bound               string  `json:"bound"`
}

var pc2Bounds = func() (doc struct {
	Model    PC2Model           `json:"model"`
	Examples []PC2BoundsExample `json:"examples"`
}) {
	if err := json.Unmarshal(pc2BoundsJSON, &doc); err != nil {
		panic(fmt.Sprintf("contracts/pc2-bounds.json: %v", err))
	}
	return doc
}()

// PC2 is the model of PC2's bounds.
func PC2() PC2Model { return pc2Bounds.Model }

// PC2BoundsExamples are the contract's worked examples (both sides' tests check them).
func PC2BoundsExamples() []PC2BoundsExample { return pc2Bounds.Examples }
