#!/usr/bin/env bash
# A local Kubernetes cluster for sealfleet, keeping its state, logs and pids under $CLUSTER_DIR
# (default _out/cluster, gitignored). The control plane listens on 127.0.0.1 (the API server on
# every address: pods reach it through the kubernetes Service at the node's address). The real
# node has a pod network: a bridge (sealfleet0) holding the node's address 10.244.0.1 and pods in
# 10.244.0.0/24 (Debian's CNI plugins bridge, host-local, portmap, loopback), kube-proxy routing
# Services (10.96.0.0/16) and NodePorts on the node's address, and CoreDNS at 10.96.0.10.
#
#   hack/cluster.sh up [FLEET.yaml]  control + node (when root) + fleet (default hack/fleet/fleet.yaml)
#   hack/cluster.sh control          etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok
#   hack/cluster.sh node             the real node: containerd (own socket and root), kubelet
#                                    named 127.0.0.1 at 10.244.0.1, with real 1 GiB hugepages,
#                                    its pod network, kube-proxy and CoreDNS (root)
#   hack/cluster.sh fleet [FILE]     create the kwok nodes and their SealerNodes from a fleet description
#   hack/cluster.sh operator [ARGS]  run bin/manager as a local process against the cluster (ARGS: its flags)
#   hack/cluster.sh kubelet-restart  restart the real node's kubelet (it reads hugepage capacity at start)
#   hack/cluster.sh down             stop exactly what was started (by pid) and give the host back
#   hack/cluster.sh wipe             down, then delete all state
#   hack/cluster.sh env              print export lines (KUBECONFIG, CONTAINERD_ADDRESS, ...)
#   hack/cluster.sh status           what runs
#
# Knobs: CLUSTER_DIR, NODE_HUGEPAGES (1 GiB pages reserved for the real node, default 2),
# CLUSTER_NODE=0 (up without the real node), CLUSTER_FLEET=0 (up without the fleet),
# FLEET_TOTAL=N (scale the fleet description's machine counts to about N nodes),
# NODE_CPU_MANAGER=static|none (the real kubelet's CPU manager policy, default static: it then
# keeps CPU 0 for the system and grants sealer pods exclusive CPUs of its own choice),
# NODE_GPU=opencl|none (default opencl where the host has an OpenCL ICD, pocl in CI: the real node
# advertises that device as nvidia.com/gpu through a device plugin, and containers granted it get
# the host's OpenCL stack from the runtime, as NVIDIA's plugin and toolkit do for a GPU).
# Ports (127.0.0.1): etcd 12379/12380 (metrics 12381), apiserver 6443 (every address),
# controller-manager 10257, scheduler 10259, kwok 10247, kubelet healthz 10248, kube-proxy 10249
# (metrics) and 10256 (healthz), containerd metrics 11338; on the node's address: kubelet 10250,
# NodePorts 30000-32767 and hostPorts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
C=${CLUSTER_DIR:-$root/_out/cluster}
bin=$root/bin
export PATH=$bin:$PATH
API=https://127.0.0.1:6443
NODE_NAME=127.0.0.1
# The node's address (on the pod network's bridge, not loopback: Kubernetes keeps loopback out of
# Service endpoints) and the cluster's address ranges.
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
API_SERVICE_IP=10.96.0.1
DNS_SERVICE_IP=10.96.0.10
export NODE_BRIDGE=sealfleet0 NODE_CIDR=$NODE_IP/24

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

# ---- processes ------------------------------------------------------------------------------

pidfile() { echo "$C/run/$1.pid"; }

# running NAME: the pid in NAME's pidfile is alive and still runs the binary we started.
running() {
  local f; f=$(pidfile "$1")
  [ -f "$f" ] || return 1
  local pid; pid=$(cat "$f")
  [ -d "/proc/$pid" ] || return 1
  local exe; exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  # A rebuilt binary leaves the running process's exe as "<path> (deleted)": still ours.
  [ "${exe% (deleted)}" = "$(cat "$C/run/$1.exe" 2>/dev/null)" ]
}

# start NAME BINARY ARGS...: start in its own session, log to logs/NAME.log, remember the pid.
# start_kubelet: the real node's kubelet, until it is healthy and its Node Ready.
start_kubelet() {
  # No /usr/sbin in PATH: the kubelet then cannot run iptables (it would add host firewall rules).
  (export PATH=/usr/local/bin:/usr/bin:/bin; start kubelet "$bin/kubelet" --config "$C/config/kubelet.yaml" \
    --kubeconfig "$C/pki/node.kubeconfig" --root-dir "$C/data/kubelet" --cert-dir "$C/data/kubelet/pki" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --node-labels sealfleet.io/local-node=true --v=2)
  wait_for kubelet 60 curl -sf http://127.0.0.1:10248/healthz
  wait_for kubelet 60 node_ready
}

start() {
  local name=$1; shift
  if running "$name"; then return 0; fi
  local exe; exe=$(readlink -f "$(command -v "$1")")
  echo "$exe" > "$C/run/$name.exe"
  echo "--- start $(date -u +%FT%TZ): $*" >> "$C/logs/$name.log"
  setsid "$@" >> "$C/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$(pidfile "$name")"
}

# stop NAME: TERM, wait up to 15 s, then KILL; only the recorded pid.
stop() {
  local name=$1 f; f=$(pidfile "$name")
  if running "$name"; then
    local pid; pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 150); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    if [ -d "/proc/$pid" ]; then log "$name ($pid) ignored TERM; killing"; kill -KILL "$pid" 2>/dev/null || true; fi
    log "stopped $name ($pid)"
  fi
  rm -f "$f" "$C/run/$name.exe"
}

# wait_for NAME SECONDS CMD...: poll CMD until it succeeds; on timeout show NAME's last log lines.
wait_for() {
  local name=$1 secs=$2; shift 2
  local deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    if ! running "$name"; then
      log "$name exited; last 50 lines of $C/logs/$name.log:"; tail -n 50 "$C/logs/$name.log" >&2; exit 1
    fi
    if (( $(date +%s) >= deadline )); then
      log "$name not ready after ${secs}s; last 50 lines of $C/logs/$name.log:"; tail -n 50 "$C/logs/$name.log" >&2; exit 1
    fi
    sleep 0.2
  done
}

# since T0: seconds (one decimal) since T0 (date +%s%N).
since() { local ms=$(( ($(date +%s%N) - $1) / 1000000 )); printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)); }

kc() { kubectl --kubeconfig "$C/pki/admin.kubeconfig" "$@"; }

# ---- control plane --------------------------------------------------------------------------

kubeconfig() { # FILE USER TOKEN
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "$API", certificate-authority: "$C/pki/apiserver.crt"}
users:
- name: $2
  user: {token: "$3"}
contexts:
- name: local
  context: {cluster: local, user: $2}
current-context: local
EOF
}

# pki: tokens (admin, the node, and kube-proxy as system:kube-proxy, whom Kubernetes' bootstrap
# RBAC makes a node proxier), the service-account key, and the API server's certificate for
# every address its clients use: 127.0.0.1 (the host), the node's address and the kubernetes
# Service's (pods), and the Service's DNS names. A state made before one of these existed is
# made again (only while the API server is down: it reads them on start).
pki() {
  mkdir -p "$C/pki" "$C/run" "$C/logs" "$C/data" "$C/config"
  local san="IP:127.0.0.1,IP:$NODE_IP,IP:$API_SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  if [ -f "$C/pki/proxy.token" ] && [ "$(cat "$C/pki/apiserver.san" 2>/dev/null)" = "$san" ]; then return 0; fi
  if running kube-apiserver; then die "this cluster's state predates its pod network: hack/cluster.sh down, then up again"; fi
  umask 077
  local admin node proxy
  admin=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  node=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  proxy=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  openssl genrsa -out "$C/pki/sa.key" 2048 2>/dev/null
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=kube-apiserver -addext "subjectAltName=$san" \
    -keyout "$C/pki/apiserver.key" -out "$C/pki/apiserver.crt" 2>/dev/null
  echo "$san" > "$C/pki/apiserver.san"
  {
    echo "$admin,admin,admin,\"system:masters\""
    echo "$node,system:node:$NODE_NAME,node-$NODE_NAME,\"system:nodes\""
    echo "$proxy,system:kube-proxy,kube-proxy"
  } > "$C/pki/tokens.csv.tmp"
  echo "$admin" > "$C/pki/admin.token"
  echo "$node" > "$C/pki/node.token"
  echo "$proxy" > "$C/pki/proxy.token"
  mv "$C/pki/tokens.csv.tmp" "$C/pki/tokens.csv"
  umask 022
}

control() {
  "$root/hack/tools.sh" k8s kwok kubectl
  pki
  local t0; t0=$(date +%s%N)
  start etcd etcd --name local --data-dir "$C/data/etcd" \
    --listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 \
    --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
    --initial-cluster local=http://127.0.0.1:12380 --listen-metrics-urls http://127.0.0.1:12381 \
    --unsafe-no-fsync --quota-backend-bytes 4294967296
  wait_for etcd 30 curl -sf http://127.0.0.1:12379/health
  start kube-apiserver kube-apiserver --etcd-servers http://127.0.0.1:12379 \
    --bind-address 0.0.0.0 --advertise-address "$NODE_IP" --secure-port 6443 \
    --tls-cert-file "$C/pki/apiserver.crt" --tls-private-key-file "$C/pki/apiserver.key" \
    --token-auth-file "$C/pki/tokens.csv" --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction --allow-privileged=true \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$C/pki/sa.key" --service-account-signing-key-file "$C/pki/sa.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" --kubelet-preferred-address-types InternalIP \
    --max-requests-inflight 800 --max-mutating-requests-inflight 400
  local tok; tok=$(cat "$C/pki/admin.token")
  wait_for kube-apiserver 60 curl -sfk -H "Authorization: Bearer $tok" $API/readyz
  kubeconfig "$C/pki/admin.kubeconfig" admin "$tok"
  kubeconfig "$C/pki/node.kubeconfig" "system:node:$NODE_NAME" "$(cat "$C/pki/node.token")"
  kubeconfig "$C/pki/proxy.kubeconfig" system:kube-proxy "$(cat "$C/pki/proxy.token")"
  local k=("--kubeconfig" "$C/pki/admin.kubeconfig" "--authentication-kubeconfig" "$C/pki/admin.kubeconfig"
           "--authorization-kubeconfig" "$C/pki/admin.kubeconfig" "--bind-address" 127.0.0.1 "--leader-elect=false")
  start kube-controller-manager kube-controller-manager "${k[@]}" \
    --service-account-private-key-file "$C/pki/sa.key" --root-ca-file "$C/pki/apiserver.crt" \
    --use-service-account-credentials=false --kube-api-qps 200 --kube-api-burst 400 \
    --concurrent-gc-syncs 10
  start kube-scheduler kube-scheduler "${k[@]}" --kube-api-qps 200 --kube-api-burst 400
  start kwok kwok --kubeconfig "$C/pki/admin.kubeconfig" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --cidr 127.64.0.1/16 --node-ip 127.0.0.1 --server-address 127.0.0.1:10247 -c "$root/hack/kwok.yaml"
  wait_for kube-controller-manager 60 curl -sfk https://127.0.0.1:10257/healthz
  wait_for kube-scheduler 60 curl -sfk https://127.0.0.1:10259/healthz
  wait_for kwok 60 curl -sf http://127.0.0.1:10247/healthz
  # The default ServiceAccount (made by kcm) must exist before pods can be created.
  wait_for kube-controller-manager 60 kc get serviceaccount default -n default
  log "control plane ready in $(since "$t0") s (KUBECONFIG=$C/pki/admin.kubeconfig)"
}

# ---- real node ------------------------------------------------------------------------------

node_config() {
  mkdir -p "$C/config/cni/net.d" "$C/data/containerd" "$C/run/containerd" "$C/data/kubelet" "$C/data/pod-logs" "$C/data/cni"
  rm -f "$C/config/cni/net.d/10-loopback.conflist"  # the network of clusters made before the pod network
  # Pods on the bridge, addresses from host-local, hostPorts by portmap (containerd adds the
  # loopback plugin itself). No masquerading: nothing here reaches outside the host.
  cat > "$C/config/cni/net.d/10-sealfleet.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "sealfleet-pods", "plugins": [
  {"type": "bridge", "bridge": "$NODE_BRIDGE", "isGateway": true, "hairpinMode": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$C/data/cni/ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
EOF
  cat > "$C/config/containerd.toml" <<EOF
# Generated by hack/cluster.sh: this cluster's own containerd (own socket, root and state).
version = 2
root = "$C/data/containerd"
state = "$C/run/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$C/run/containerd/containerd.sock"
[ttrpc]
  address = "$C/run/containerd/containerd.sock.ttrpc"
[metrics]
  address = "127.0.0.1:11338"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:local"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # root here may lack CAP_SYS_RESOURCE: clamp oom_score_adj instead of failing every sandbox.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$C/run/runc"
$( [ "$(node_gpu)" = opencl ] && echo "        BinaryName = \"$bin/runc-opencl\"" )
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$C/config/cni/net.d"
EOF
  cat > "$C/config/kubelet.yaml" <<EOF
# Generated by hack/cluster.sh. The development node, at the pod network's gateway address.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$C/run/containerd/containerd.sock
imageServiceEndpoint: unix://$C/run/containerd/containerd.sock
failSwapOn: false
failCgroupV1: false
podLogsDir: $C/data/pod-logs
registerNode: true
clusterDomain: cluster.local
clusterDNS: [$DNS_SERVICE_IP]
resolvConf: /etc/resolv.conf
serializeImagePulls: false
evictionHard: {memory.available: "200Mi", nodefs.available: "2%", imagefs.available: "2%"}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusReportFrequency: 1m
maxPods: 20
oomScoreAdj: 0
EOF
  if [ "${NODE_CPU_MANAGER:-static}" = static ]; then
    # Guaranteed pods get exclusive CPUs packed by L3. 100m reserved for the system keeps
    # 1.9 CPUs allocatable on 2 (reservedSystemCPUs would take a whole one) and makes the
    # kubelet hold CPU 0 out of its exclusive pool, while the demo's SealerNode reserves the
    # highest CPU: the grant differs from the layout, so the sealer's move onto the granted
    # CPUs runs in every demo and e2e run.
    cat >> "$C/config/kubelet.yaml" <<EOF
cpuManagerPolicy: static
cpuManagerPolicyOptions: {prefer-align-cpus-by-uncorecache: "true"}
kubeReserved: {cpu: 100m}
EOF
  fi
  # Services and NodePorts by iptables, on the node's address only (so kube-proxy leaves
  # route_localnet alone), with the host's conntrack settings untouched.
  cat > "$C/config/kube-proxy.yaml" <<EOF
# Generated by hack/cluster.sh.
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $C/pki/proxy.kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
nodePortAddresses: [$NODE_IP/32]
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# node_gpu: what stands in for a GPU on the real node (opencl: the host's OpenCL ICD; none).
node_gpu() {
  local want=${NODE_GPU:-}
  if [ -z "$want" ]; then
    want=none; compgen -G "/etc/OpenCL/vendors/*.icd" >/dev/null && want=opencl
  fi
  echo "$want"
}

# gpu_standin_build: the device plugin and the runtime wrapper (hack/tools/gpustandin), and the
# wrapper's settings (bin/runc-opencl.json): the real runc; the host's /usr and /lib (the ICD
# loader, pocl and its LLVM, and the C libraries pocl links kernels against by their /lib
# paths: the image holds only its own there); ICD files naming each driver by its absolute /usr
# path (pocl finds its headers relative to where it was loaded from, and a /lib path leads it
# to /share inside a container, where no /lib symlink exists); and a writable kernel cache
# (pocl finds no device without one, and the capabilities container's root is read-only).
gpu_standin_build() {
  (cd "$root/hack/tools/gpustandin" && CGO_ENABLED=0 go build -trimpath -o "$bin/" ./cmd/opencl-device-plugin ./cmd/runc-opencl)
  local icd=$C/config/opencl-vendors f lib d
  rm -rf "$icd"; mkdir -p "$icd"
  for f in /etc/OpenCL/vendors/*.icd; do
    lib=$(head -n1 "$f")
    if [[ "$lib" != /* ]]; then
      for d in "/usr/lib/$(uname -m)-linux-gnu" /usr/lib64 /usr/lib /usr/local/lib; do
        [ -e "$d/$lib" ] && { lib=$d/$lib; break; }
      done
    fi
    [ -e "$lib" ] || { log "OpenCL ICD $f: $lib not found; skipped"; continue; }
    readlink -f "$lib" > "$icd/$(basename "$f")"
  done
  printf '{"runc": "%s", "mounts": ["/usr", "/lib", "%s"], "tmpfs": ["/var/cache/pocl"], "env": ["POCL_CACHE_DIR=/var/cache/pocl", "OCL_ICD_VENDORS=%s"]}\n' \
    "$(command -v runc)" "$icd" "$icd" > "$bin/runc-opencl.json"
}

gpu_allocatable() {
  [ "$(kc get node $NODE_NAME -o jsonpath='{.status.allocatable.nvidia\.com/gpu}' 2>/dev/null)" -ge 1 ] 2>/dev/null
}

ctr_() { ctr --address "$C/run/containerd/containerd.sock" -n k8s.io "$@"; }

node() {
  [ "$(id -u)" = 0 ] || die "the real node needs root (containerd, kubelet, hugepages); use CLUSTER_NODE=0 for the simulated fleet only"
  local p
  command -v containerd >/dev/null && command -v runc >/dev/null && command -v iptables >/dev/null ||
    die "containerd, runc or iptables is missing: run hack/host-deps.sh"
  for p in bridge host-local portmap loopback; do
    [ -x "/usr/lib/cni/$p" ] || die "the CNI plugin /usr/lib/cni/$p is missing: run hack/host-deps.sh (containernetworking-plugins)"
  done
  running kube-apiserver || die "the control plane is not running: hack/cluster.sh control"
  local t0; t0=$(date +%s%N)
  # Paths the kubelet and the shims use outside $C: note which existed, so down removes only ours.
  if [ ! -f "$C/host/paths.preexisting" ]; then
    mkdir -p "$C/host"
    for p in /var/lib/kubelet /var/log/containers /var/log/pods /run/containerd /var/lib/sealfleet; do
      [ -e "$p" ] && echo "$p"
    done > "$C/host/paths.preexisting" || true
  fi
  "$root/hack/tools.sh" kube-proxy coredns
  "$root/hack/host-setup.sh" apply "${NODE_HUGEPAGES:-2}"
  case "$(node_gpu)" in
    opencl) gpu_standin_build ;;
    none) ;;
    *) die "NODE_GPU=$NODE_GPU: use opencl or none" ;;
  esac
  node_config
  # portmap's chains, if this host had none, are removed again by down.
  iptables -t nat -S CNI-HOSTPORT-DNAT >/dev/null 2>&1 || touch "$C/host/portmap.ours"
  # portmap runs iptables from containerd's PATH.
  (export PATH=$PATH:/usr/sbin:/sbin; start containerd containerd --config "$C/config/containerd.toml")
  wait_for containerd 30 ctr_ version
  "$root/hack/images.sh" import
  log "containerd up, images imported: $(since "$t0") s"
  # The CPU manager's checkpoint names the policy it was written under; a kubelet started with
  # another policy refuses to run. No container runs now, so it starts from an empty one.
  rm -f "$C/data/kubelet/cpu_manager_state"
  start_kubelet
  log "kubelet Ready: $(since "$t0") s"
  (export PATH=$PATH:/usr/sbin:/sbin; start kube-proxy "$bin/kube-proxy" --config "$C/config/kube-proxy.yaml")
  wait_for kube-proxy 60 curl -sf http://127.0.0.1:10256/healthz
  log "kube-proxy healthy: $(since "$t0") s"
  # Cluster DNS: a pod on the pod network that reaches the API server through the kubernetes
  # Service, so its readiness also proves the network (dns_wait; `up` waits after the fleet).
  kc apply --server-side -f "$root/hack/coredns.yaml" >/dev/null
  [ "${1:-}" = no-dns-wait ] || dns_wait
  if [ "$(node_gpu)" = opencl ]; then
    # The kubelet serves device plugins at /var/lib/kubelet/device-plugins whatever its --root-dir.
    start opencl-device-plugin "$bin/opencl-device-plugin" --kubelet-dir /var/lib/kubelet
    wait_for opencl-device-plugin 60 gpu_allocatable
  fi
  log "real node $NODE_NAME Ready in $(since "$t0") s; hugepages-1Gi: $(kc get node $NODE_NAME -o jsonpath='{.status.allocatable.hugepages-1Gi}'), nvidia.com/gpu: $(kc get node $NODE_NAME -o jsonpath='{.status.allocatable.nvidia\.com/gpu}') ($(node_gpu))"
}

dns_wait() {
  local t0; t0=$(date +%s%N)
  wait_for kube-proxy 120 coredns_ready
  log "CoreDNS Ready at $DNS_SERVICE_IP (pod network and kubernetes Service up) after $(since "$t0") s more"
}

coredns_ready() {
  [ "$(kc -n kube-system get deploy coredns -o jsonpath='{.status.readyReplicas}' 2>/dev/null)" = 1 ]
}

node_ready() {
  [ "$(kc get node $NODE_NAME -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# node_down: pods off the real node first (so the shims exit), then kubelet, containerd,
# mounts, cgroups, the hard-coded host paths, and the host settings.
node_down() {
  if running kubelet && running kube-apiserver; then
    kc delete pods -A --field-selector spec.nodeName=$NODE_NAME --grace-period=5 --wait=false >/dev/null 2>&1 || true
    for _ in $(seq 100); do
      [ -z "$(ctr_ tasks ls -q 2>/dev/null)" ] && break
      sleep 0.3
    done
  fi
  stop kubelet
  # kube-proxy's rules out of the host's iptables (its own cleanup, from any mode).
  if [ -f "$(pidfile kube-proxy)" ]; then
    stop kube-proxy
    (export PATH=$PATH:/usr/sbin:/sbin; "$bin/kube-proxy" --cleanup >> "$C/logs/kube-proxy.log" 2>&1) || log "kube-proxy --cleanup failed: see $C/logs/kube-proxy.log"
  fi
  if running containerd; then
    local t
    for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s KILL "$t" >/dev/null 2>&1 || true; done
    sleep 0.5
    for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks rm -f "$t" >/dev/null 2>&1 || true; done
    for t in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers rm "$t" >/dev/null 2>&1 || true; done
  fi
  stop containerd
  # Shims our containerd started outlive it only if a task survived: find them by our socket.
  local p
  for p in /proc/[0-9]*; do
    if grep -qa "containerd-shim" "$p/cmdline" 2>/dev/null && tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -qF -- "$C/run/containerd/containerd.sock"; then
      log "killing leftover shim ${p#/proc/}"; kill -KILL "${p#/proc/}" 2>/dev/null || true
    fi
  done
  unmount_under "$C"
  portmap_cleanup
  rm -rf "$C/data/cni/ipam"
  local cg
  for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  if [ -f "$C/host/paths.preexisting" ]; then
    for p in /var/lib/kubelet /var/log/containers /var/log/pods /run/containerd /var/lib/sealfleet; do
      grep -qxF "$p" "$C/host/paths.preexisting" || rm -rf "$p"
    done
    rm -f "$C/host/paths.preexisting"
  fi
  if [ -d "$C/host" ]; then "$root/hack/host-setup.sh" restore; fi
}

# portmap_cleanup: the nat chains portmap adds for hostPorts (CNI-HOSTPORT-*, and CNI-DN-* per
# pod), once no pod is left: portmap removes a pod's chain when the pod goes, never its own.
portmap_cleanup() {
  [ -f "$C/host/portmap.ours" ] && command -v iptables-save >/dev/null || return 0
  rm -f "$C/host/portmap.ours"
  local rules chain
  rules=$(iptables-save -t nat 2>/dev/null) || return 0
  grep -q -- '-j CNI-HOSTPORT-' <<< "$rules" || return 0
  # Rules that jump to them (in PREROUTING, OUTPUT, POSTROUTING), then the chains.
  grep -- '^-A .* -j CNI-\(HOSTPORT\|DN\)-' <<< "$rules" | grep -v '^-A CNI-' | sed 's/^-A /-D /' | while read -r r; do
    eval "iptables -t nat $r" 2>/dev/null || true
  done
  for chain in $(grep -o '^:CNI-\(HOSTPORT\|DN\)-[^ ]*' <<< "$rules" | tr -d :); do iptables -t nat -F "$chain" 2>/dev/null || true; done
  for chain in $(grep -o '^:CNI-\(HOSTPORT\|DN\)-[^ ]*' <<< "$rules" | tr -d :); do iptables -t nat -X "$chain" 2>/dev/null || true; done
}

# unmount_under DIR: every mount below DIR, deepest first.
unmount_under() {
  local m
  awk -v d="$1/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
  done
}

# ---- fleet ----------------------------------------------------------------------------------

crds_established() {
  [ "$(kc get crd sealernodes.sealfleet.io sealbatches.sealfleet.io \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Established")].status}{" "}{end}')" = "True True " ]
}

fleet() {
  local file=${1:-$root/hack/fleet/fleet.yaml}
  running kube-apiserver || die "the control plane is not running: hack/cluster.sh control"
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$bin/fleet" ./hack/fleet)
  kc apply --server-side -f "$root/config/crd/bases" >/dev/null
  # Not `kubectl wait --for condition`: on a CRD created a moment ago, with no conditions yet,
  # it fails ("accessor error: <nil>") instead of waiting.
  wait_for kube-apiserver 60 crds_established
  "$bin/fleet" apply --kubeconfig "$C/pki/admin.kubeconfig" --root "$root" -f "$file" --total "${FLEET_TOTAL:-0}"
}

# ---- operator as a local process ------------------------------------------------------------

# operator [ARGS...]: bin/manager against the cluster (for the fleet scenarios and debugging; the
# demo installs the Helm chart instead). Metrics on 127.0.0.1:18080 (plain HTTP: loopback only,
# read by the fleet scenario), probes on 127.0.0.1:18081.
operator() {
  running kube-apiserver || die "the control plane is not running: hack/cluster.sh control"
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$bin/manager" ./cmd/manager)
  kc apply --server-side -f "$root/config/crd/bases" >/dev/null
  stop manager
  (export KUBECONFIG=$C/pki/admin.kubeconfig
   start manager "$bin/manager" --leader-elect=false --metrics-bind-address 127.0.0.1:18080 \
     --health-probe-bind-address 127.0.0.1:18081 --metrics-secure=false --sealer-host-network --sealer-metrics-address 127.0.0.1 "$@")
  wait_for manager 60 curl -sf http://127.0.0.1:18081/readyz
  log "operator running (pid $(cat "$(pidfile manager)"), log $C/logs/manager.log)"
}

# ---- commands -------------------------------------------------------------------------------

down() {
  [ -d "$C" ] || { log "nothing to stop ($C does not exist)"; return 0; }
  local n core=" etcd kube-apiserver kube-controller-manager kube-scheduler kwok containerd kubelet kube-proxy "
  # First what was started on top of the cluster (the local operator, a demo's prometheus …),
  # while the API server still answers their shutdown.
  for n in "$C"/run/*.pid; do
    [ -f "$n" ] || continue
    n=$(basename "$n" .pid)
    [[ "$core" == *" $n "* ]] || stop "$n"
  done
  node_down
  for n in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$n"; done
  unmount_under "$C"
  log "down"
}

status() {
  local n
  for n in etcd kube-apiserver kube-controller-manager kube-scheduler kwok containerd kubelet kube-proxy opencl-device-plugin; do
    [ "$n" = opencl-device-plugin ] && [ ! -f "$(pidfile "$n")" ] && continue
    if running "$n"; then echo "$n running (pid $(cat "$(pidfile "$n")"))"; else echo "$n stopped"; fi
  done
  if running kube-apiserver; then kc get nodes --no-headers 2>/dev/null | awk '{n++; s[$2]++} END {printf "nodes: %d", n; for (k in s) printf " %s=%d", k, s[k]; print ""}'; fi
}

env_() {
  echo "export KUBECONFIG=$C/pki/admin.kubeconfig"
  echo "export CONTAINERD_ADDRESS=$C/run/containerd/containerd.sock"
  echo "export CONTAINERD_NAMESPACE=k8s.io"
  echo "export KUBEBUILDER_ASSETS=$bin/envtest"
  echo "export HELM_CACHE_HOME=$C/helm/cache HELM_CONFIG_HOME=$C/helm/config HELM_DATA_HOME=$C/helm/data"
}

cmd=${1:-}; shift || true
case "$cmd" in
  up)
    control
    if [ "${CLUSTER_NODE:-1}" = 1 ]; then
      if [ "$(id -u)" = 0 ]; then node no-dns-wait; else log "not root: no real node (CLUSTER_NODE=0 to silence)"; fi
    fi
    [ "${CLUSTER_FLEET:-1}" = 1 ] && fleet "$@"
    if running kube-proxy; then dns_wait; fi
    status
    ;;
  control) control ;;
  node) node ;;
  operator) operator "$@" ;;
  operator-stop) stop manager ;;
  fleet) fleet "$@" ;;
  # What a node's admin does after the agent grew the hugepage pool: the kubelet reads its
  # capacity only at start. Running pods keep running (same CPU manager policy and checkpoint).
  kubelet-restart) stop kubelet; start_kubelet; log "kubelet restarted: hugepages-1Gi allocatable $(kc get node "$NODE_NAME" -o jsonpath='{.status.allocatable.hugepages-1Gi}')" ;;
  down) down ;;
  wipe) down; rm -rf "$C"; log "wiped $C" ;;
  env) env_ ;;
  status) status ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
