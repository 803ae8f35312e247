# shellcheck shell=bash
# Functions hack/images.sh (the local cluster's images) and hack/release.sh (the release's OCI
# archives) share: what goes into the operator and sealer images, and how their binaries are
# built. Sourced, not run: the caller sets root (the repository), out (its output folder; gobuild
# stages under it) and log (a function printing to stderr), and runs under set -euo pipefail.

# stale TARGET INPUTS...: true when TARGET is missing or was built from other inputs (by content,
# so a rebuilt but identical binary does not rebuild the image); `fresh TARGET` records them.
stale() {
  local t=$1; shift
  sum=$(cat "$@" | sha256sum | cut -c1-64)
  [ ! -f "$t" ] || [ "$(cat "$t.inputs" 2>/dev/null)" != "$sum" ]
}
fresh() { echo "$sum" > "$1.inputs"; }

# gobuild DIR OUT PKG...: go build into a staging folder and replace OUT/<name> only when the
# binary changed, so unchanged inputs keep their mtime and the images are not rebuilt.
gobuild() {
  local dir=$1 dest=$2; shift 2
  local stage=$out/.bin; mkdir -p "$stage"
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -o "$stage/" "$@")  # the flags of `make build`
  local f
  for f in "$stage"/*; do
    cmp -s "$f" "$dest/$(basename "$f")" || cp "$f" "$dest/"
  done
  rm -rf "$stage"
}

# withlibs BIN=PATH...: the file arguments of mkimage for dynamically linked binaries: each
# binary at its path, and each library ldd resolves (and the loader) at the same path.
withlibs() {
  local arg lib
  for arg in "$@"; do
    echo "$arg"
    ldd "${arg%%=*}" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
  done | awk -F= '!seen[$1]++ {print ($2 == "" ? $1 "=" $1 : $0)}'
}

# blkid_bin: this machine's util-linux blkid, which the operator image carries (the node agent
# probes disks with it before preparing them); fails when it is not installed.
blkid_bin() {
  local blkid; blkid=$(command -v blkid || echo /usr/sbin/blkid)
  [ -x "$blkid" ] || { log "blkid (util-linux) not found: run hack/host-deps.sh"; return 1; }
  echo "$blkid"
}

# operator_files BINDIR BLKID: mkimage's file arguments of the operator image, one a line:
# /manager and /node-agent from BINDIR, and BLKID at /usr/sbin/blkid with its libraries.
operator_files() {
  echo "$1/manager=/manager:0755"
  echo "$1/node-agent=/node-agent:0755"
  withlibs "$2=/usr/sbin/blkid:0755"
}

# sealer_files SEALER [LIB=PATH...]: mkimage's file arguments of the sealer image, one a line:
# the sealer at /sealer, and the shared libraries and loader it links against (glibc
# dynamically); each LIB (the GPU image's OpenCL loader) at PATH with its own libraries, each
# file once.
sealer_files() {
  withlibs "$1=/sealer:0755" "${@:2}"
}
