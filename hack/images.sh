#!/usr/bin/env bash
# Container images for the local cluster, without a container engine or a registry: the built
# binaries are assembled into docker-archive tarballs by hack/tools/img/cmd/mkimage
# (go-containerregistry) and imported into the local cluster's containerd.
#
#   hack/images.sh build    _out/images/{pause,operator,sealer}.tar (each only when its inputs changed)
#   hack/images.sh import   build, then `ctr -n k8s.io images import` into the cluster's containerd
#
# Images: localhost/pause:local (/pause), localhost/sealfleet-operator:dev (/manager, /node-agent),
# localhost/sealfleet-sealer:dev (/sealer and the shared libraries and loader it links against),
# and, once `hack/tools.sh monitoring` built them, localhost/prometheus:local (/bin/prometheus)
# and localhost/prometheus-config-reloader:local for the Prometheus that prometheus-operator runs
# (hack/demo.sh prom), and localhost/coredns:local (/coredns, once `hack/tools.sh coredns` built
# it) for the cluster DNS (hack/coredns.yaml).
# The sealer image is skipped, with a message, while sealer-image/target/release/sealer is not built
# (`make sealer`). Users with a container engine build the same images from Dockerfile and
# sealer-image/Dockerfile instead.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
C=${CLUSTER_DIR:-$root/_out/cluster}
out=$root/_out/images
bin=$root/bin
mkdir -p "$out" "$bin"
log() { echo "images: $*" >&2; }

# stale, fresh, gobuild, withlibs, and what the operator and sealer images hold (shared with
# hack/release.sh).
source "$root/hack/lib-images.sh"

tools() {
  gobuild "$root/hack/tools/img" "$bin" ./cmd/mkimage ./cmd/pause
}

build() {
  tools
  if stale "$out/pause.tar" "$bin/pause"; then
    "$bin/mkimage" -o "$out/pause.tar" -tag localhost/pause:local -entrypoint /pause "$bin/pause=/pause:0755"
    fresh "$out/pause.tar"; log "built localhost/pause:local"
  fi
  gobuild "$root" "$bin" ./cmd/manager ./cmd/node-agent
  # The node agent probes disks with util-linux blkid before preparing them.
  local blkid; blkid=$(blkid_bin)
  if stale "$out/operator.tar" "$bin/manager" "$bin/node-agent" "$blkid"; then
    local files=() f
    while read -r f; do files+=("$f"); done < <(operator_files "$bin" "$blkid")
    "$bin/mkimage" -o "$out/operator.tar" -tag localhost/sealfleet-operator:dev -entrypoint /manager "${files[@]}"
    fresh "$out/operator.tar"; log "built localhost/sealfleet-operator:dev (${#files[@]} files)"
  fi
  # Static Go binaries, at the paths prometheus-operator's pods run them from.
  local m=$bin/monitoring
  if [ -x "$m/prometheus" ] && stale "$out/prometheus.tar" "$m/prometheus" /bin/busybox /bin/dash; then
    # prometheus-operator probes a Prometheus that listens on 127.0.0.1 (listenLocal) by
    # exec: `sh -c` running curl or wget. Debian's dash (with its libraries) and busybox's
    # static wget serve.
    local files=("$m/prometheus=/bin/prometheus:0755" "/bin/busybox=/bin/wget:0755") f
    [ -x /bin/busybox ] || { log "/bin/busybox (busybox-static) not found: run hack/host-deps.sh"; exit 1; }
    while read -r f; do files+=("$f"); done < <(withlibs "/bin/dash=/bin/sh:0755")
    "$bin/mkimage" -o "$out/prometheus.tar" -tag localhost/prometheus:local -entrypoint /bin/prometheus "${files[@]}"
    fresh "$out/prometheus.tar"; log "built localhost/prometheus:local"
  fi
  if [ -x "$m/prometheus-config-reloader" ] && stale "$out/prometheus-config-reloader.tar" "$m/prometheus-config-reloader"; then
    "$bin/mkimage" -o "$out/prometheus-config-reloader.tar" -tag localhost/prometheus-config-reloader:local \
      -entrypoint /bin/prometheus-config-reloader "$m/prometheus-config-reloader=/bin/prometheus-config-reloader:0755"
    fresh "$out/prometheus-config-reloader.tar"; log "built localhost/prometheus-config-reloader:local"
  fi
  if [ -x "$bin/coredns" ] && stale "$out/coredns.tar" "$bin/coredns"; then
    "$bin/mkimage" -o "$out/coredns.tar" -tag localhost/coredns:local -entrypoint /coredns "$bin/coredns=/coredns:0755"
    fresh "$out/coredns.tar"; log "built localhost/coredns:local"
  fi
  local sealer=$root/sealer-image/target/release/sealer
  if [ ! -x "$sealer" ]; then
    log "no sealer binary ($sealer): run 'make sealer'; localhost/sealfleet-sealer:dev not built"
    return 0
  fi
  if stale "$out/sealer.tar" "$sealer"; then
    # The sealer links glibc dynamically: each library ldd resolves, and the loader, go in too.
    local files=() f
    while read -r f; do files+=("$f"); done < <(sealer_files "$sealer")
    "$bin/mkimage" -o "$out/sealer.tar" -tag localhost/sealfleet-sealer:dev -entrypoint /sealer "${files[@]}"
    fresh "$out/sealer.tar"; log "built localhost/sealfleet-sealer:dev (${#files[@]} files)"
  fi
}

import() {
  build
  local sock=$C/run/containerd/containerd.sock
  [ -S "$sock" ] || { log "the cluster's containerd is not running ($sock): hack/cluster.sh node"; exit 1; }
  local t
  for t in pause operator sealer prometheus prometheus-config-reloader coredns; do
    [ -f "$out/$t.tar" ] || continue
    ctr --address "$sock" -n k8s.io images import --no-unpack=false "$out/$t.tar" >/dev/null
  done
  ctr --address "$sock" -n k8s.io images ls -q | grep '^localhost/' | sed 's/^/images: in containerd: /' >&2
}

case "${1:-}" in
  build) build ;;
  import) import ;;
  *) echo "usage: hack/images.sh build | import" >&2; exit 2 ;;
esac
