// Command kubectl-sealfleet is the `kubectl sealfleet` plugin: put it on PATH and kubectl
// finds it. Exit codes: 0 ok, 1 not as wanted, 2 timeout, 3 usage or API error.
package main

import (
	"os"

	"github.com/sealfleet/sealfleet/internal/plugin"
)

func main() {
	os.Exit(plugin.Execute(os.Args[1:]))
}
