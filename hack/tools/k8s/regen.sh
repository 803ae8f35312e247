#!/usr/bin/env bash
# Regenerates go.mod for the Kubernetes tools module after a version bump in hack/versions.env:
# k8s.io/kubernetes and helm, plus a replace for every staging repo (the kubernetes go.mod points them at
# ./staging, which does not exist in the module zip).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../versions.env"
cd "$here"
modfile=$(go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
{
  echo "module sealfleet.io/hack/tools/k8s"
  echo
  echo "go 1.26"
  echo
  echo "require k8s.io/kubernetes ${KUBERNETES_VERSION}"
  echo
  echo "replace ("
  grep -E '^\s+k8s.io/[a-z0-9-]+ => \./staging/' "$modfile" | awk -v v="$K8S_STAGING_VERSION" '{print "\t" $1 " => " $1 " " v}'
  echo ")"
} > go.mod
# helm builds here too, on the same k8s.io libraries (tools.go imports it).
GOFLAGS=-mod=mod go get "helm.sh/helm/v3@${HELM_VERSION}"
go mod tidy
