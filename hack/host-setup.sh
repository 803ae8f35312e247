#!/usr/bin/env bash
# Prepares this host for the local cluster's real node, and gives it back afterwards (root).
#
#   hack/host-setup.sh apply [HUGEPAGES]   reserve HUGEPAGES (default 2) more 1 GiB pages, mount the
#                                          hugetlb cgroup v1 hierarchy where the host lacks one,
#                                          save the sysctls the kubelet changes, and make the
#                                          pod network's bridge (NODE_BRIDGE, default sealfleet0,
#                                          holding the node's address NODE_CIDR, default
#                                          10.244.0.1/24) with forwarding through iptables
#   hack/host-setup.sh restore             undo exactly what apply did (from its saved state)
#   hack/host-setup.sh check               print what apply would find (no changes)
#
# Idempotent: apply twice reserves once; restore without a saved state does nothing. The saved
# state lives in $CLUSTER_DIR/host (default _out/cluster/host).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${CLUSTER_DIR:-$root/_out/cluster}/host
hp=/sys/kernel/mm/hugepages/hugepages-1048576kB
bridge=${NODE_BRIDGE:-sealfleet0}
node_cidr=${NODE_CIDR:-10.244.0.1/24}
# The kubelet's, then the pod network's: pods' traffic is routed (forwarding), and traffic
# between pods on the bridge passes iptables, where kube-proxy's Service rules are.
sysctls=(vm.overcommit_memory kernel.panic kernel.panic_on_oops net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables)

log() { echo "host-setup: $*" >&2; }

need_root() {
  [ "$(id -u)" = 0 ] || { log "must run as root (it reserves hugepages and mounts a cgroup hierarchy)"; exit 1; }
}

# hugetlb_needs_v1: true on a cgroup v1 / hybrid host whose hugetlb controller has no v1
# hierarchy (runc's v1 manager would then silently skip hugepage limits).
hugetlb_needs_v1() {
  [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] && return 1   # pure v2: the kubelet uses v2
  local h
  h=$(awk '$1=="hugetlb"{print $2}' /proc/cgroups)
  [ -n "$h" ] && [ "$h" = 0 ]
}

check() {
  echo "cgroup: $(stat -fc %T /sys/fs/cgroup) at /sys/fs/cgroup; hugetlb v1 mount needed: $(hugetlb_needs_v1 && echo yes || echo no)"
  if [ -d "$hp" ]; then
    echo "1GiB hugepages: nr=$(cat $hp/nr_hugepages) free=$(cat $hp/free_hugepages)"
  else
    echo "1GiB hugepages: not supported by this kernel/CPU (no $hp)"
  fi
  for s in "${sysctls[@]}"; do echo "sysctl $s=$(sysctl -n "$s" 2>/dev/null || echo "missing (br_netfilter not loaded?)")"; done
  if ip link show "$bridge" >/dev/null 2>&1; then echo "bridge $bridge: $(ip -br addr show "$bridge")"; else echo "bridge $bridge: absent"; fi
  grep -q ' sha_ni' /proc/cpuinfo && echo "CPU: SHA-NI present" || echo "CPU: no SHA-NI (the real sealer cannot run here)"
  local cap; cap=$(awk '/^CapBnd/{print $2}' /proc/self/status)
  if (( (16#$cap >> 24) & 1 )); then echo "CAP_SYS_RESOURCE: yes"; else echo "CAP_SYS_RESOURCE: no (containerd runs with restrict_oom_score_adj)"; fi
}

apply() {
  local want=${1:-2}
  need_root
  mkdir -p "$dir"
  [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] ||
    { log "no /proc/sys/net/bridge: load br_netfilter (modprobe br_netfilter), which Services between pods on one bridge need"; exit 1; }
  # sysctls the kubelet and the pod network set: save once, before the first kubelet start.
  if [ ! -f "$dir/sysctl.saved" ]; then
    for s in "${sysctls[@]}"; do echo "$s=$(sysctl -n "$s")"; done > "$dir/sysctl.saved.tmp"
    mv "$dir/sysctl.saved.tmp" "$dir/sysctl.saved"
  fi
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  # The pod network's bridge, whose address is the node's: pods reach the node (and the API
  # server, through the kubernetes Service) there, and it is not loopback, which Kubernetes
  # keeps out of Service endpoints.
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    # A host that already routes the pod network elsewhere would lose that route, or the pods.
    local taken; taken=$(ip -4 -o addr show to "$node_cidr" 2>/dev/null; ip -4 route show root "$node_cidr" 2>/dev/null)
    [ -z "$taken" ] || { log "this host already has the pod network's addresses ($node_cidr): $taken; free them first (the local cluster's addresses are fixed)"; exit 1; }
    ip link add "$bridge" type bridge
    touch "$dir/bridge.created"
    log "created bridge $bridge ($node_cidr)"
  fi
  ip addr replace "$node_cidr" dev "$bridge"
  ip link set "$bridge" up
  # 1 GiB hugepages: before the kubelet starts, so the node reports them.
  if [ ! -d "$hp" ]; then
    log "this kernel/CPU has no 1 GiB hugepages ($hp missing): the real node will report none and the demo batch cannot run"
  elif [ ! -f "$dir/hugepages.saved" ]; then
    local before; before=$(cat "$hp/nr_hugepages")
    echo "$before" > "$dir/hugepages.saved"
    echo $(( before + want )) > "$hp/nr_hugepages" || true
    local got; got=$(cat "$hp/nr_hugepages")
    if (( got - before < want )); then
      # A 1 GiB page needs 1 GiB of contiguous memory, which page cache and scattered pages
      # break up on a machine that has been busy (a long build): drop the clean page cache,
      # compact, and ask again.
      log "the kernel gave $(( got - before )) of $want 1 GiB hugepages; dropping the page cache and compacting memory to try again"
      sync
      echo 3 > /proc/sys/vm/drop_caches || true
      echo 1 > /proc/sys/vm/compact_memory || true
      echo $(( before + want )) > "$hp/nr_hugepages" || true
      got=$(cat "$hp/nr_hugepages")
    fi
    if (( got - before < want )); then
      log "asked for $want more 1 GiB hugepages, the kernel gave $(( got - before )) (memory too fragmented?); reserve them at boot with hugepagesz=1G hugepages=$want"
    else
      log "reserved $want x 1 GiB hugepages (was $before, now $got)"
    fi
  fi
  # hugetlb cgroup v1 hierarchy, so hugepage limits are enforced.
  if hugetlb_needs_v1; then
    mkdir -p /sys/fs/cgroup/hugetlb
    mount -t cgroup -o hugetlb cgroup /sys/fs/cgroup/hugetlb
    touch "$dir/hugetlb.mounted"
    log "mounted the hugetlb cgroup v1 hierarchy at /sys/fs/cgroup/hugetlb"
  fi
}

# rmdir_tree DIR: remove an (empty-of-tasks) cgroup directory tree, deepest first.
rmdir_tree() {
  [ -d "$1" ] || return 0
  find "$1" -depth -type d -exec rmdir {} \; 2>/dev/null || true
}

restore() {
  [ -d "$dir" ] || return 0
  need_root
  if [ -f "$dir/hugetlb.mounted" ]; then
    rmdir_tree /sys/fs/cgroup/hugetlb/kubepods
    if umount /sys/fs/cgroup/hugetlb 2>/dev/null; then
      rmdir /sys/fs/cgroup/hugetlb 2>/dev/null || true
      rm -f "$dir/hugetlb.mounted"
    else
      log "could not unmount /sys/fs/cgroup/hugetlb (still in use?); left mounted"
    fi
  fi
  if [ -f "$dir/hugepages.saved" ]; then
    local before; before=$(cat "$dir/hugepages.saved")
    echo "$before" > "$hp/nr_hugepages" || true
    local now; now=$(cat "$hp/nr_hugepages")
    if [ "$now" = "$before" ]; then rm -f "$dir/hugepages.saved"; else log "nr_hugepages is $now, wanted $before (pages still in use?)"; fi
  fi
  if [ -f "$dir/bridge.created" ]; then
    ip link del "$bridge" 2>/dev/null || log "could not delete bridge $bridge"
    rm -f "$dir/bridge.created"
  fi
  if [ -f "$dir/sysctl.saved" ]; then
    while IFS== read -r k v; do sysctl -qw "$k=$v" || log "could not restore $k=$v"; done < "$dir/sysctl.saved"
    rm -f "$dir/sysctl.saved"
  fi
  rmdir "$dir" 2>/dev/null || true
}

case "${1:-}" in
  apply) shift; apply "$@" ;;
  restore) restore ;;
  check) check ;;
  *) echo "usage: hack/host-setup.sh apply [HUGEPAGES] | restore | check" >&2; exit 2 ;;
esac
