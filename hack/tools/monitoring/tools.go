//go:build tools

// Package tools pins the monitoring stack the local cluster runs (prometheus-operator, its config
// reloader, and Prometheus with Kubernetes service discovery) so `go mod tidy` records their deps.
package tools

import (
	_ "github.com/prometheus-operator/prometheus-operator/cmd/operator"
	_ "github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader"
	_ "github.com/prometheus/prometheus/cmd/prometheus"
)
