#!/usr/bin/env bash
# Regenerates go.mod for the Kubernetes tools module after a version bump in hack/versions.env:
# k8s.io/kubernetes, helm and kwok, plus a replace for every staging repo (the kubernetes go.mod
# points them at ./staging, which does not exist in the module zip). Then aligns this module with
# the project's go.mod: every module both select ends at the same version in both (the higher of
# the two), so the packages they share compile once for the tools and for `make build`.
#
#   hack/tools/k8s/regen.sh          regenerate, then align
#   hack/tools/k8s/regen.sh align    align only
#   hack/tools/k8s/regen.sh check    exit 1 and name the modules where the two differ
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
source "$root/hack/versions.env"
export GOFLAGS=-mod=mod LC_ALL=C

regen() {
  cd "$here"
  local modfile
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
  # helm and kwok build here too, on the same k8s.io libraries (tools.go imports them).
  go get "helm.sh/helm/v3@${HELM_VERSION}" "sigs.k8s.io/kwok@${KWOK_VERSION}"
  go mod tidy
}

# built DIR PKGS...: "path version" of each module that provides a package PKGS compile
# (a replacement's version where one replaces it): versions elsewhere in the graph do not matter.
built() {
  local dir=$1; shift
  (cd "$dir" && go list -tags tools -deps -f '{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}' "$@") |
    awk 'NF == 2' | sort -u
}

# differences: "path tools-version project-version" of each module both compile at different
# versions (the tools: what tools.go imports, and etcd).
differences() {
  join <(built "$here" . ./cmd/etcd) <(built "$root" ./...) | awk '$2 != $3'
}

# higher A B: the higher of two module versions by semantic versioning (a pre-release, such as
# a pseudo-version, is lower than its release; pre-releases compare as strings).
higher() {
  awk -v a="$1" -v b="$2" 'function key(v,  core, pre, n, p) {
      sub(/\+incompatible$/, "", v); sub(/^v/, "", v)
      core = v; pre = ""
      if ((n = index(v, "-")) > 0) { core = substr(v, 1, n - 1); pre = substr(v, n + 1) }
      split(core, p, ".")
      return sprintf("%09d.%09d.%09d.%s", p[1], p[2], p[3], pre == "" ? "~" : pre)
    }
    BEGIN { print (key(a) >= key(b)) ? a : b }'
}

align() {
  local round diff path tv pv
  for round in 1 2 3 4 5; do
    diff=$(differences)
    [ -n "$diff" ] || { echo "hack/tools/k8s/regen.sh: the tools module and go.mod select the same versions" >&2; return 0; }
    # The side that selects the lower version requires the higher one.
    while read -r path tv pv; do
      if [ "$(higher "$tv" "$pv")" = "$tv" ]; then
        (cd "$root" && go mod edit -require="$path@$tv")
      else
        (cd "$here" && go mod edit -require="$path@$pv")
      fi
    done <<< "$diff"
    (cd "$here" && go mod tidy)
    (cd "$root" && go mod tidy)
  done
  echo "hack/tools/k8s/regen.sh: still different after 5 rounds:" >&2
  differences >&2
  return 1
}

case "${1:-}" in
  "") regen; align ;;
  align) align ;;
  check)
    diff=$(differences)
    [ -z "$diff" ] || { printf 'hack/tools/k8s and go.mod select different versions (module, tools, project):\n%s\nrun hack/tools/k8s/regen.sh align\n' "$diff" >&2; exit 1; } ;;
  *) echo "usage: hack/tools/k8s/regen.sh [align|check]" >&2; exit 2 ;;
esac
