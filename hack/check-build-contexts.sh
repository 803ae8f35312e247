#!/usr/bin/env bash
# Each image's build context holds what its build needs. Without a container engine: take the
# context as docker would send it (its .dockerignore applied), copy exactly what the build
# stage's COPY lines name into an empty directory, and run the build stage's build there with
# this machine's toolchains. A source read from outside those paths fails here, not in a user's
# `docker build`. Every other stage (the images' targets) may copy only from the build stage.
#
#   hack/check-build-contexts.sh operator   Dockerfile: go build of the manager and node agent
#   hack/check-build-contexts.sh sealer     sealer-image/Dockerfile (targets runtime and gpu):
#                                           cargo build of the sealer into sealer-image/target
#                                           (`make sealer` builds this way, so the binary the
#                                           local cluster runs comes from the image's context)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

fail() { echo "$dockerfile: $*" >&2; exit 1; }

# stage_copies DOCKERFILE: the build stage's COPY lines (not --from); fails on a COPY/ADD of the
# context in any other stage.
stage_copies() {
  awk -v f="$1" '
    /^FROM /{build = ($0 ~ / [Aa][Ss] build$/)}
    /^(COPY|ADD) / && !/--from=/ {
      if (build && /^COPY /) print; else { print f ": line " NR " copies from the context outside the build stage: " $0 > "/dev/stderr"; bad = 1 }
    }
    END{exit bad}' "$1"
}

# context DIR: the context docker sends from DIR, into $tmp/context (.dockerignore's plain
# patterns applied; its exceptions (!) are not supported here).
context() {
  local -a excludes=()
  local p
  if [ -f "$1/.dockerignore" ]; then
    while read -r p; do
      p=${p%/}
      case "$p" in '' | '#'*) continue ;; '!'*) fail ".dockerignore exception '$p' is not supported by this check" ;; esac
      excludes+=("--exclude=./${p#/}")
    done <"$1/.dockerignore"
  fi
  mkdir -p "$tmp/context" "$tmp/work"
  tar -C "$1" "${excludes[@]}" -cf - . | tar -C "$tmp/context" -xf -
}

# apply_copies: the build stage's COPY lines, from $tmp/context into $tmp/work (docker's rules:
# a directory's contents go into the destination, a file into it).
apply_copies() {
  local args src dest
  local -a words
  while read -r _ args; do
    read -ra words <<<"$args"
    dest="$tmp/work/${words[${#words[@]}-1]}"
    mkdir -p "$dest"
    for src in "${words[@]:0:${#words[@]}-1}"; do
      [ -e "$tmp/context/$src" ] || fail "COPY $src: not in the build context (excluded by .dockerignore?)"
      if [ -d "$tmp/context/$src" ]; then cp -a "$tmp/context/$src/." "$dest/"; else cp -a "$tmp/context/$src" "$dest/"; fi
    done
  done <<<"$copies"
}

# build_uses COMMAND: the Dockerfile's build stage runs COMMAND (so this check runs what it runs).
build_uses() {
  grep -qF -- "$1" "$dockerfile" || fail "its build no longer runs '$1': update hack/check-build-contexts.sh to run what it runs"
}

case "${1:-operator}" in
  operator)
    dockerfile="$root/Dockerfile"
    copies=$(stage_copies "$dockerfile")
    context "$root"
    apply_copies
    build_uses "go build -trimpath -o /out/manager ./cmd/manager"
    build_uses "go build -trimpath -o /out/node-agent ./cmd/node-agent"
    if ! (cd "$tmp/work" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -o "$tmp/out/" ./cmd/manager ./cmd/node-agent) 2>"$tmp/err"; then
      echo "$dockerfile: the operator image's build context misses what the build imports (add a COPY line):" >&2
      cat "$tmp/err" >&2
      exit 1
    fi
    echo "Dockerfile: the build context ($(awk '{for (i = 2; i < NF; i++) printf "%s ", $i}' <<<"$copies")) builds the manager and node-agent"
    ;;
  sealer)
    dockerfile="$root/sealer-image/Dockerfile"
    copies=$(stage_copies "$dockerfile")
    context "$root/sealer-image"
    apply_copies
    build_uses "cargo build --release --locked -p sealer"
    # The repository's target directory: cargo keys path crates by their place in the workspace
    # and their files' times (kept by the copy), so this shares and reuses the in-tree build.
    if ! (cd "$tmp/work" && CARGO_TARGET_DIR="$root/sealer-image/target" cargo build --release --locked -p sealer) 2>"$tmp/err"; then
      echo "$dockerfile: the sealer image's build context misses what the build reads (it is sealer-image/ less its .dockerignore):" >&2
      cat "$tmp/err" >&2
      exit 1
    fi
    echo "sealer-image/Dockerfile: the build context (sealer-image/ less .dockerignore) builds the sealer; targets $(awk '/^FROM .* [Aa][Ss] /{if ($NF != "build") printf "%s ", $NF}' "$dockerfile")copy only from it"
    ;;
  *) echo "usage: hack/check-build-contexts.sh [operator|sealer]" >&2; exit 2 ;;
esac
