#!/usr/bin/env bash
# Installs the Debian packages the build and tests need on a fresh machine (root; idempotent:
# nothing happens when they are all present).
#   libhwloc-dev        rust-fil-proofs' multicore-sdr (the sealer benchmark's baseline)
#   prometheus          promtool for the alert-rule unit tests
#   containerd runc containernetworking-plugins   the real node of the local cluster
#   iptables iproute2   its pod network: kube-proxy's and portmap's rules, the bridge
#   pocl-opencl-icd ocl-icd-opencl-dev clinfo     a CPU OpenCL device: the GPU engine's tests run on it
#   busybox-static      wget in the local Prometheus image: prometheus-operator's probes of a
#                       Prometheus listening on 127.0.0.1 run `sh -c '... wget ...'` in it
#   fio                 the storage peer of `sealer bench pc2-io` (sequential read and write, io_uring, O_DIRECT)
set -euo pipefail
pkgs=(libhwloc-dev prometheus containerd runc containernetworking-plugins iptables iproute2 pocl-opencl-icd ocl-icd-opencl-dev clinfo fio busybox-static)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "hack/host-deps.sh: missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
# Debian starts a system containerd; the local cluster runs its own on its own socket.
