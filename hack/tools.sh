#!/usr/bin/env bash
# Builds the pinned tools the project needs from the Go module proxy into bin/ (no downloads
# from release buckets). Idempotent: a tool whose binary already reports the pinned version is
# not rebuilt.
#
#   hack/tools.sh k8s              kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, etcd
#   hack/tools.sh kubectl          kubectl (same module and version as k8s)
#   hack/tools.sh controller-gen
#   hack/tools.sh crd-ref-docs     the API reference generator (make docs)
#   hack/tools.sh golangci-lint    the Go linters (make lint)
#   hack/tools.sh helm-docs        the chart README generator (hack/chart-readme.sh)
#   hack/tools.sh actionlint       the GitHub Actions workflow linter (.github/workflows)
#   hack/tools.sh kwok | helm      (same module as k8s: one build for all that are missing)
#   hack/tools.sh kube-proxy       (same module and version as k8s) the real node's Service routing
#   hack/tools.sh coredns          the cluster DNS (CoreDNS with the plugins hack/coredns.yaml uses),
#                                  from hack/tools/coredns
#   hack/tools.sh envtest-assets   k8s + the KUBEBUILDER_ASSETS folder (bin/envtest)
#   hack/tools.sh monitoring       bin/monitoring/: prometheus-operator, prometheus-config-reloader,
#                                  prometheus (Kubernetes service discovery only) and the
#                                  operator's CRDs (crds/), from hack/tools/monitoring
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/hack/versions.env"
bin="$root/bin"
mkdir -p "$bin"
export GOFLAGS=-mod=mod
export CGO_ENABLED=${CGO_ENABLED:-0}

log() { echo "hack/tools.sh: $*" >&2; }

# has_version BINARY ARGS... -- WANT: true when BINARY exists and its version output contains WANT.
has_version() {
  local want=${*: -1} out
  [ -x "$1" ] || return 1
  out=$("${@:1:$#-1}" 2>&1 || true)
  [[ "$out" == *"$want"* ]]
}

# k8s_ldflags: version stamps for binaries built from k8s.io/kubernetes (module zips carry no git
# data, so the commit is a stable hash of the version).
k8s_ldflags() {
  local k=$KUBERNETES_VERSION
  local minor=${k#v1.}; minor=${minor%%.*}
  local commit; commit=$(printf '%s' "kubernetes-$k" | sha1sum | cut -c1-40)
  local date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  local ld="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$k -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitCommit=$commit"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  echo "$ld"
}

# The Kubernetes binaries, kubectl, helm and kwok come from one module (hack/tools/k8s) and
# build in one `go build`: the k8s.io libraries they share compile once, and their links run
# side by side. That module selects the same version of every module it shares with the
# project's own go.mod (hack/tools/k8s/regen.sh keeps them so), so `make build` reuses those
# compiled packages too. Each wanted tool that does not report its pinned version is queued here.
k8s_module_pkgs=()

check_k8s_module_pins() {
  local mod="$root/hack/tools/k8s/go.mod" m v
  for m in "helm.sh/helm/v3 $HELM_VERSION" "sigs.k8s.io/kwok $KWOK_VERSION"; do
    v=$(awk -v m="${m% *}" '$1==m{print $2}' "$mod")
    [ "$v" = "${m#* }" ] || { echo "hack/tools.sh: hack/versions.env pins ${m% *} ${m#* }, hack/tools/k8s/go.mod has '$v': run hack/tools/k8s/regen.sh" >&2; exit 1; }
  done
}

want_k8s() {
  local k=$KUBERNETES_VERSION
  local etcd_v
  etcd_v=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2}' "$root/hack/tools/k8s/go.mod")
  if has_version "$bin/kube-apiserver" --version "Kubernetes $k" &&
     has_version "$bin/kube-controller-manager" --version "Kubernetes $k" &&
     has_version "$bin/kube-scheduler" --version "Kubernetes $k" &&
     has_version "$bin/kubelet" --version "Kubernetes $k" &&
     has_version "$bin/etcd" --version "etcd Version: ${etcd_v#v}"; then
    return 0
  fi
  k8s_module_pkgs+=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet ./cmd/etcd)
}

want_kubectl() {
  has_version "$bin/kubectl" version --client "Client Version: $KUBERNETES_VERSION" ||
    k8s_module_pkgs+=(k8s.io/kubernetes/cmd/kubectl)
}

want_kube_proxy() {
  has_version "$bin/kube-proxy" --version "Kubernetes $KUBERNETES_VERSION" || k8s_module_pkgs+=(k8s.io/kubernetes/cmd/kube-proxy)
}

want_kwok() {
  has_version "$bin/kwok" --version "$KWOK_VERSION" || k8s_module_pkgs+=(sigs.k8s.io/kwok/cmd/kwok)
}

want_helm() {
  has_version "$bin/helm" version --short "$HELM_VERSION" || k8s_module_pkgs+=(helm.sh/helm/v3/cmd/helm)
}

build_k8s_module() {
  [ ${#k8s_module_pkgs[@]} -gt 0 ] || return 0
  check_k8s_module_pins
  log "building ${k8s_module_pkgs[*]##*/} (Kubernetes $KUBERNETES_VERSION, helm $HELM_VERSION, kwok $KWOK_VERSION; several minutes when cold)"
  local ld
  ld="$(k8s_ldflags) -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
  (cd "$root/hack/tools/k8s" && go build -trimpath -o "$bin/" -ldflags "$ld" "${k8s_module_pkgs[@]}")
  k8s_module_pkgs=()
}

build_controller_gen() {
  has_version "$bin/controller-gen" --version "$CONTROLLER_TOOLS_VERSION" && return 0
  log "building controller-gen $CONTROLLER_TOOLS_VERSION"
  GOBIN="$bin" go install -trimpath "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION"
}

build_crd_ref_docs() {
  # It reports no version of its own: the stamp file beside it names the one built.
  [ -x "$bin/crd-ref-docs" ] && [ "$(cat "$bin/crd-ref-docs.version" 2>/dev/null)" = "$CRD_REF_DOCS_VERSION" ] && return 0
  log "building crd-ref-docs $CRD_REF_DOCS_VERSION"
  GOBIN="$bin" go install -trimpath "github.com/elastic/crd-ref-docs@$CRD_REF_DOCS_VERSION"
  echo "$CRD_REF_DOCS_VERSION" > "$bin/crd-ref-docs.version"
}

build_golangci_lint() {
  [ -x "$bin/golangci-lint" ] && "$bin/golangci-lint" version 2>/dev/null | grep -q "version ${GOLANGCI_LINT_VERSION#v} " && return 0
  log "building golangci-lint $GOLANGCI_LINT_VERSION"
  GOBIN="$bin" go install -trimpath -ldflags "-X main.version=${GOLANGCI_LINT_VERSION#v}" \
    "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION"
}

build_helm_docs() {
  [ -x "$bin/helm-docs" ] && "$bin/helm-docs" --version 2>/dev/null | grep -q "version ${HELM_DOCS_VERSION#v}$" && return 0
  log "building helm-docs $HELM_DOCS_VERSION"
  GOBIN="$bin" go install -trimpath -ldflags "-X main.version=${HELM_DOCS_VERSION#v}" \
    "github.com/norwoodj/helm-docs/cmd/helm-docs@$HELM_DOCS_VERSION"
}

build_actionlint() {
  has_version "$bin/actionlint" -version "$ACTIONLINT_VERSION" && return 0
  log "building actionlint $ACTIONLINT_VERSION"
  GOBIN="$bin" go install -trimpath "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
}

# build_monitoring: prometheus-operator, its config reloader and Prometheus from one module, so
# the client libraries they share compile once. Prometheus keeps only Kubernetes service
# discovery (the one the operator's configuration uses) and serves no web UI (the module zip
# has no UI assets; the HTTP API is whole). Two links: each reports its own version.
build_monitoring() {
  local mod="$root/hack/tools/monitoring" out="$bin/monitoring" m v
  for m in "github.com/prometheus-operator/prometheus-operator $PROMETHEUS_OPERATOR_VERSION" "github.com/prometheus/prometheus $PROMETHEUS_VERSION"; do
    v=$(awk -v m="${m% *}" '$1==m{print $2}' "$mod/go.mod")
    [ "$v" = "${m#* }" ] || { echo "hack/tools.sh: hack/versions.env pins ${m% *} ${m#* }, hack/tools/monitoring/go.mod has '$v'" >&2; exit 1; }
  done
  local op=${PROMETHEUS_OPERATOR_VERSION#v} prom; prom=3.${PROMETHEUS_VERSION#v0.3}
  if has_version "$out/prometheus-operator" --version "version $op " &&
     has_version "$out/prometheus-config-reloader" --version "version $op " &&
     has_version "$out/prometheus" --version "version $prom " && [ -d "$out/crds" ]; then
    return 0
  fi
  log "building prometheus-operator $PROMETHEUS_OPERATOR_VERSION, its config reloader and Prometheus $prom (several minutes when cold)"
  local ver=github.com/prometheus/common/version
  mkdir -p "$out"
  (cd "$mod" && go build -trimpath -ldflags "-s -w -X $ver.Version=$op -X $ver.Branch=release -X $ver.Revision=$PROMETHEUS_OPERATOR_VERSION" -o "$out/" \
      github.com/prometheus-operator/prometheus-operator/cmd/operator \
      github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader &&
    mv "$out/operator" "$out/prometheus-operator" &&
    go build -trimpath -tags remove_all_sd,enable_kubernetes_sd -ldflags "-s -w -X $ver.Version=$prom -X $ver.Branch=release -X $ver.Revision=$PROMETHEUS_VERSION" \
      -o "$out/" github.com/prometheus/prometheus/cmd/prometheus)
  # The CRDs of the same release, from its module (example/prometheus-operator-crd).
  local dir; dir=$(cd "$mod" && go list -m -f '{{.Dir}}' github.com/prometheus-operator/prometheus-operator)
  rm -rf "$out/crds" && mkdir -p "$out/crds" && cp "$dir"/example/prometheus-operator-crd/*.yaml "$out/crds/" && chmod -R u+w "$out/crds"
}

# build_coredns: CoreDNS from its module with only the plugins the local cluster's Corefile uses
# (hack/tools/coredns/main.go); the version stamp is CoreDNS's own (coremain.CoreVersion).
build_coredns() {
  local mod="$root/hack/tools/coredns" v
  v=$(cd "$mod" && go list -m -f '{{.Version}}' github.com/coredns/coredns)
  [ "$v" = "$COREDNS_VERSION" ] || { echo "hack/tools.sh: hack/versions.env pins CoreDNS $COREDNS_VERSION, hack/tools/coredns/go.mod has '$v'" >&2; exit 1; }
  has_version "$bin/coredns" -version "CoreDNS-${COREDNS_VERSION#v}" && return 0
  log "building CoreDNS $COREDNS_VERSION"
  (cd "$mod" && go build -trimpath -ldflags "-s -w" -o "$bin/coredns" .)
}

# envtest_assets: the KUBEBUILDER_ASSETS folder, once k8s is built.
envtest_assets() {
  mkdir -p "$bin/envtest"
  ln -sf ../kube-apiserver "$bin/envtest/kube-apiserver"
  ln -sf ../etcd "$bin/envtest/etcd"
}

[ $# -gt 0 ] || set -- k8s controller-gen
envtest_assets_wanted=
for t in "$@"; do
  case "$t" in
    k8s) want_k8s ;;
    kubectl) want_kubectl ;;
    controller-gen) build_controller_gen ;;
    crd-ref-docs) build_crd_ref_docs ;;
    golangci-lint) build_golangci_lint ;;
    helm-docs) build_helm_docs ;;
    actionlint) build_actionlint ;;
    kwok) want_kwok ;;
    kube-proxy) want_kube_proxy ;;
    coredns) build_coredns ;;
    helm) want_helm ;;
    envtest-assets) want_k8s; envtest_assets_wanted=1 ;;
    monitoring) build_monitoring ;;
    *) echo "hack/tools.sh: unknown tool '$t' (k8s, kubectl, controller-gen, crd-ref-docs, golangci-lint, helm-docs, actionlint, kwok, helm, kube-proxy, coredns, envtest-assets, monitoring)" >&2; exit 2 ;;
  esac
done
build_k8s_module
[ -z "$envtest_assets_wanted" ] || envtest_assets
