#!/usr/bin/env bash
# The operator image's build context holds what its build needs: copy exactly what the
# Dockerfile's build stage COPYs into an empty directory and run the same `go build` there (no
# container engine: the Go toolchain and module cache of this machine). A package imported from
# outside those paths fails here instead of in a user's `docker build`.
# (The sealer image's context is sealer-image/ whole, `COPY . .`; its build is the workspace's.)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dockerfile="$root/Dockerfile"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# COPY lines of the build stage (up to the first FROM after it), not --from copies.
# Docker's rules: a directory's contents go into the destination, a file into it.
awk '/^FROM /{n++} n==1 && /^COPY / && !/--from/' "$dockerfile" | while read -r _ args; do
  read -ra words <<<"$args"
  dest="$tmp/${words[${#words[@]}-1]}"
  mkdir -p "$dest"
  for src in "${words[@]:0:${#words[@]}-1}"; do
    if [ -d "$root/$src" ]; then cp -a "$root/$src/." "$dest/"; else cp -a "$root/$src" "$dest/"; fi
  done
done
# The build stage's commands.
cd "$tmp"
if ! CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath ./cmd/manager ./cmd/node-agent 2>"$tmp/.err"; then
  echo "Dockerfile: the operator image's build context misses what the build imports (add a COPY line):" >&2
  cat "$tmp/.err" >&2
  exit 1
fi
echo "Dockerfile: the build context ($(awk '/^FROM /{n++} n==1 && /^COPY / && !/--from/{for (i = 2; i < NF; i++) printf "%s ", $i}' "$dockerfile")) builds the manager and node-agent"
