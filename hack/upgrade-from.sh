#!/usr/bin/env bash
# The release an upgrade starts from, for the upgrade test (make test-upgrade): the chart and
# the images of an older commit, built the way that commit built them, imported into the local
# cluster's containerd.
#
#   hack/upgrade-from.sh COMMIT OUT   writes OUT/src (the commit's tree), OUT/bin (its manager and
#                                     node agent), imports localhost/sealfleet-operator:upgrade-from
#                                     and localhost/sealfleet-sealer:upgrade-from, and prints the
#                                     chart's directory (OUT/src/charts/sealfleet)
#
# The sealer is not rebuilt (minutes of Rust): the commit's sealer-image/ must be this one's, and
# its binary is this checkout's sealer-image/target/release/sealer; otherwise it refuses, naming
# the commit to pin instead.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
from=${1:?usage: hack/upgrade-from.sh COMMIT OUT}
out=$(mkdir -p "${2:?usage: hack/upgrade-from.sh COMMIT OUT}" && cd "$2" && pwd)
bin=$root/bin
log() { echo "upgrade-from: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=hack/lib-images.sh
source "$root/hack/lib-images.sh"

git -C "$root" cat-file -e "$from^{commit}" 2>/dev/null ||
  die "commit $from is not in this clone: the upgrade test needs the repository's history (a full clone)"
sealer=$root/sealer-image/target/release/sealer
[ -x "$sealer" ] || die "no sealer binary ($sealer): run make sealer"
git -C "$root" diff --quiet "$from" HEAD -- sealer-image ||
  die "sealer-image/ changed since $from: pin a commit whose sealer is this one's (git log -1 -- sealer-image), or build that sealer"

rm -rf "$out/src" "$out/bin" && mkdir -p "$out/src" "$out/bin"
git -C "$root" archive "$from" | tar -x -C "$out/src"
# That commit's `make build` flags.
(cd "$out/src" && CGO_ENABLED=0 go build -trimpath -o "$out/bin/" ./cmd/manager ./cmd/node-agent)
log "built $from's manager and node agent"

gobuild "$root/hack/tools/img" "$bin" ./cmd/mkimage
blkid=$(blkid_bin)
files=()
while read -r f; do files+=("$f"); done < <(operator_files "$out/bin" "$blkid")
"$bin/mkimage" -o "$out/operator.tar" -tag localhost/sealfleet-operator:upgrade-from -entrypoint /manager "${files[@]}"
files=()
while read -r f; do files+=("$f"); done < <(sealer_files "$sealer")
"$bin/mkimage" -o "$out/sealer.tar" -tag localhost/sealfleet-sealer:upgrade-from -entrypoint /sealer "${files[@]}"
sock=${CONTAINERD_ADDRESS:-$root/_out/cluster/run/containerd/containerd.sock}
[ -S "$sock" ] || die "the cluster's containerd is not running ($sock): hack/cluster.sh node"
for f in operator sealer; do
  ctr --address "$sock" -n k8s.io images import "$out/$f.tar" >/dev/null
done
log "imported localhost/sealfleet-{operator,sealer}:upgrade-from ($from)"
echo "$out/src/charts/sealfleet"
