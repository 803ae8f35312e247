// Package contracts holds the shapes the operator and the sealer share, as files both sides'
// tests read (the Rust workspace reads them by path): the exit codes and the sealer's
// capabilities document.
package contracts

import (
	_ "embed"
	"encoding/json"
	"fmt"
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
	var doc struct {
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(sealerCapabilitiesJSON, &doc); err != nil {
		panic(fmt.Sprintf("contracts/sealer-capabilities.json: %v", err))
	}
	return doc.Examples
}
