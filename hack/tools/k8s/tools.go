//go:build tools

// Package tools pins the commands this module builds, so that go mod tidy keeps their
// dependencies. Helm and kwok live here too: built against the same k8s.io libraries as the
// Kubernetes binaries, those compile once for all of them (a cold build's largest share).
package tools

import (
	_ "helm.sh/helm/v3/pkg/action"
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-proxy/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
	_ "sigs.k8s.io/kwok/pkg/kwok/cmd"
)
