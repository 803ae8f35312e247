#!/usr/bin/env bash
# make demo: the whole product on one machine, in steps over make targets, hack/ scripts and the
# kubectl plugin (`kubectl sealfleet`, cmd/kubectl-sealfleet). Builds what is missing, starts
# the local cluster, installs the Helm chart, seals a batch of 8 MiB sectors (the first with deal
# data, the rest CC) on the real node and verifies every CommR against rust-fil-proofs, updates
# one of them with new deal data (SnapDeals), seals two sectors whose C1 the operator runs from
# the slot once their seeds are written, places a backlog on the simulated fleet, and ends with
# a summary table. Each step prints its time; its output is in _out/demo/<step>.log.
#
#   hack/demo.sh            every step below, in order, then the summary
#   hack/demo.sh check      what this machine can do (root, SHA-NI, 1 GiB hugepages)
#   hack/demo.sh build      host packages, Kubernetes tools, Go binaries; the sealer (Rust) builds
#                           in the background meanwhile (log _out/demo/sealer-build.log)
#   hack/demo.sh up         the local cluster (control plane, real node, kwok fleet of 300 nodes)
#   hack/demo.sh install    build the release (hack/release.sh: the packaged chart, the images as OCI
#                           archives, under localhost/) into _out/demo/dist, import its images, and
#                           install its chart into sealfleet-system with its defaults (CRDs, pod network)
#                           (DEMO_CHART=DIR DEMO_IMAGE_TAG=T: that chart with localhost/sealfleet-*:T
#                           instead, as the upgrade test installs an older release)
#   hack/demo.sh images     wait for the sealer build, then import its image into the node
#   hack/demo.sh node       label node 127.0.0.1, give its SealerNode a file layer device, wait until Ready
#   hack/demo.sh seal [NAME [SECTORS]]   seal a batch on 127.0.0.1 (default cc-8mib-demo, 4 sectors)
#   hack/demo.sh verify [NAME]           CommR of each sector vs rust-fil-proofs (kubectl sealfleet verify)
#   COMMIT1=FromSlot hack/demo.sh seal NAME N   seal without layer copies; the batch waits for its seeds
#   hack/demo.sh seeds [NAME]            write random seeds into NAME (default c1-8mib-demo): C1 from the slot
#   hack/demo.sh snap [FROM [NAME]]      SnapDeals update of FROM's first CC sector with new deal data
#   hack/demo.sh release [NAME]          wait for the Released condition and the slot's scrub
#   hack/demo.sh fleet [N]               N simulated batches (default 40) on the kwok fleet
#   hack/demo.sh summary                 the fleet and the real node's slots, as the plugin shows them
#   hack/demo.sh prom                    prometheus-operator, and its Prometheus on 127.0.0.1:9090 scraping
#                                        the operator, the node agent and the sealer pods through the
#                                        chart's monitors, with the chart's rules
#
# The control plane listens on 127.0.0.1, the real node (named 127.0.0.1) at 10.244.0.1 with a pod
# network (hack/cluster.sh). The cluster stays up afterwards: stop it with `make cluster-down`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH=$root/bin:$PATH
eval "$(hack/cluster.sh env)"

NS=sealfleet-system
BATCH_NS=sealfleet-batches
OUT=${DEMO_OUT:-$root/_out/demo}                  # step logs
OUTPUT_DIR=${OUTPUT_DIR:-/var/lib/sealfleet/output}
DEALS_DIR=${DEALS_DIR:-/var/lib/sealfleet/deals}  # staged data sectors (the batch's dataSource)
DATA_SECTORS=${DATA_SECTORS:-1}                   # how many of a batch's sectors hold deal data
BAD_SECTOR=${BAD_SECTOR:-0}                       # >0: that sector (1-based) holds deal data whose staged file is
                                                  # spoiled after staging: the sealer leaves it out, seals the rest
PROOF_TYPE=${PROOF_TYPE:-}                        # spec.proofType of sealed batches (default: the API's, V1_1)
SECTOR_SIZE=${SECTOR_SIZE:-8MiB}                  # spec.sectorSize of sealed batches (CC only when not 8MiB)
COMMIT1=${COMMIT1:-}                              # FromSlot: the operator runs C1 from the slot once `seeds` gives the seeds
PC2_ENGINE=${PC2_ENGINE:-}                        # spec.pc2Engine of sealed batches (gpu: the node's nvidia.com/gpu,
                                                  # pocl's CPU device standing in here; hack/cluster.sh NODE_GPU)
PROOF=StackedDrg8MiBV1_1  # the node's parent cache: 8 MiB, V1_1
NODE=127.0.0.1
LAYER_FILE=${DEMO_LAYER_FILE:-/var/lib/sealfleet/demo/layers.img}
DIST=${DEMO_DIST:-$root/_out/demo/dist}          # the release the demo installs (hack/release.sh)
SEALER=$root/sealer-image/target/release/sealer
mkdir -p "$OUT"

say() { printf '\033[1mdemo:\033[0m %s\n' "$*" >&2; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }
kc() { kubectl "$@"; }
sf() { kubectl-sealfleet "$@"; }

# ---- what this machine can do ---------------------------------------------------------------

check() {
  local ok=1
  [ "$(id -u)" = 0 ] || { say "not root: the real node (containerd, kubelet, hugepages) needs root; run as root or with sudo"; ok=0; }
  grep -qw sha_ni /proc/cpuinfo || { say "this CPU has no SHA-NI: the sealer refuses to run without it (exit 4); the demo can only show the simulated fleet"; ok=0; }
  [ -d /sys/kernel/mm/hugepages/hugepages-1048576kB ] ||
    { say "no 1 GiB hugepage support in this kernel (no /sys/kernel/mm/hugepages/hugepages-1048576kB): the real node cannot offer hugepages-1Gi"; ok=0; }
  [ "$ok" = 1 ] && say "root, SHA-NI and 1 GiB hugepages: the real node can seal"
  [ "$ok" = 1 ]
}

# ---- build ----------------------------------------------------------------------------------

# timed LABEL CMD...: run CMD and say how long it took (the build's parts, for where time goes).
timed() {
  local label=$1 t=$SECONDS; shift
  "$@"
  say "  $label: $(( SECONDS - t )) s"
}

sealer_stale() {
  [ ! -x "$SEALER" ] || [ -n "$(find sealer-image/crates sealer-image/Cargo.lock -newer "$SEALER" -type f 2>/dev/null | head -1)" ]
}

# build: only what the demo runs (no envtest assets, no controller-gen). The sealer is the
# longest part and needs nothing the Go side builds, so it compiles in the background while the
# Kubernetes tools and the Go binaries build, and while the cluster starts; `images` waits for it.
build() {
  timed "host packages" hack/host-deps.sh
  if sealer_stale; then
    say "  the sealer (Rust, release) builds in the background: $OUT/sealer-build.log"
    rm -f "$OUT/sealer-build.status"
    (
      t=$SECONDS
      if make -s sealer > "$OUT/sealer-build.log" 2>&1; then echo "ok $(( SECONDS - t ))"; else echo "failed $(( SECONDS - t ))"; fi > "$OUT/sealer-build.status"
    ) < /dev/null > /dev/null 2>&1 &
    echo $! > "$OUT/sealer-build.pid"
  else
    echo "ok 0" > "$OUT/sealer-build.status"
  fi
  timed "Kubernetes tools (apiserver, etcd, scheduler, kubelet, kube-proxy, CoreDNS, kwok, helm, kubectl)" hack/tools.sh k8s kwok helm kubectl kube-proxy coredns
  timed "operator, node agent and kubectl plugin" make -s build
}

# images: wait for the background sealer build, then (re)import the local images into the node
# (the kwok fleet's operator names them; the chart installs the release's, see install).
images() {
  wait_sealer
  timed "images imported into the node's containerd" hack/images.sh import
}

# wait_sealer: wait for the background sealer build (or build it when stale).
wait_sealer() {
  local pid t=$SECONDS
  if [ -f "$OUT/sealer-build.pid" ]; then
    pid=$(cat "$OUT/sealer-build.pid")
    say "  waiting for the sealer build (pid $pid, log $OUT/sealer-build.log)"
    while kill -0 "$pid" 2>/dev/null; do sleep 2; done
    rm -f "$OUT/sealer-build.pid"
  elif sealer_stale; then
    make -s sealer > "$OUT/sealer-build.log" 2>&1 && echo "ok $(( SECONDS - t ))" > "$OUT/sealer-build.status" ||
      echo "failed $(( SECONDS - t ))" > "$OUT/sealer-build.status"
  else
    # Built before this run (make sealer, as make test-e2e does), and current.
    say "  sealer up to date: $SEALER"
    return 0
  fi
  local st; st=$(cat "$OUT/sealer-build.status" 2>/dev/null || echo "failed 0")
  [[ "$st" == ok* ]] || { tail -30 "$OUT/sealer-build.log" >&2; die "the sealer build failed: read $OUT/sealer-build.log"; }
  say "  sealer built (${st#ok } s of build, $(( SECONDS - t )) s waited here)"
}

# release_version: the newest version CHANGELOG.md has a section for.
release_version() { awk '/^## \[[0-9]/ { v = $2; gsub(/[][]/, "", v); print v; exit }' CHANGELOG.md; }

# dist: the release the demo installs, built as `make release` builds one (hack/release.sh,
# checked the same way), with its images named under localhost/ and the plugin for this host
# only, into $DIST; its OCI image archives imported into the node's containerd. Prints the
# packaged chart's path.
dist() {
  wait_sealer >&2
  local v f t=$SECONDS; v=$(release_version)
  [ -n "$v" ] || die "CHANGELOG.md has no version section: the demo installs a release"
  REGISTRY=localhost DIST=$DIST PLUGIN_PLATFORMS=linux/amd64 hack/release.sh build "$v" > "$OUT/dist.log" 2>&1 ||
    { tail -30 "$OUT/dist.log" >&2; die "the release build failed: read $OUT/dist.log"; }
  for f in "$DIST"/*.oci.tar; do
    ctr --address "$CONTAINERD_ADDRESS" -n k8s.io images import "$f" >/dev/null || die "importing ${f##*/} into the node's containerd failed"
  done
  say "  release $v built and checked ($(( SECONDS - t )) s): $(cd "$DIST" && echo *.oci.tar) imported into the node" 
  echo "$DIST/sealfleet-$v.tgz"
}

# ---- cluster and chart ----------------------------------------------------------------------

up() {
  hack/cluster.sh up
  # Images rebuilt after the node started: import them (only changed ones are imported).
  if [[ "$(hack/cluster.sh status)" == *"containerd running"* ]]; then hack/images.sh import; fi
}

# capabilities_env: the node agent's `sealer capabilities` init container env. With the local
# cluster's OpenCL stand-in for a GPU (hack/cluster.sh NODE_GPU=opencl) it also names OpenCL
# device 0 (pocl's CPU device: the sealer otherwise looks for a GPU), as the stand-in's device
# plugin does for the sealer pods it grants the device to.
capabilities_env() {
  local env='{"name":"NVIDIA_VISIBLE_DEVICES","value":"all"},{"name":"NVIDIA_DRIVER_CAPABILITIES","value":"compute,utility"}'
  if [ "$(kc get node "$NODE" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}' 2>/dev/null)" != "" ] &&
     [[ "$(hack/cluster.sh status)" == *"opencl-device-plugin running"* ]]; then
    env+=',{"name":"SEALER_GPU_DEVICE","value":"0"}'
  fi
  echo "[$env]"
}

install() {
  local chart
  local -a images=()
  if [ -n "${DEMO_CHART:-}" ]; then
    # Another release's chart and images (the upgrade test's older one: hack/upgrade-from.sh).
    chart=$DEMO_CHART
    images=(--set "image.repository=localhost/sealfleet-operator,image.tag=${DEMO_IMAGE_TAG:?DEMO_CHART needs DEMO_IMAGE_TAG}"
      --set "sealerImage.repository=localhost/sealfleet-sealer,sealerImage.tag=$DEMO_IMAGE_TAG")
  else
    chart=$(dist)
  fi
  say "installing the Helm chart $chart into $NS"
  kc create namespace "$NS" --dry-run=client -o yaml | kc apply -f - >/dev/null
  kc label namespace "$NS" --overwrite pod-security.kubernetes.io/enforce=privileged \
    pod-security.kubernetes.io/audit=privileged pod-security.kubernetes.io/warn=privileged >/dev/null
  # The chart's defaults but for the images, the demo's shorter intervals (progress, scans,
  # metrics) and one operator replica without leader election: its CRDs (taken over from
  # hack/cluster.sh, which applied the same ones for the simulated fleet), the operator and the
  # agent on the pod network, reaching the API server through the kubernetes Service. The agent
  # runs only on the real node (simulated nodes get their SealerNodes from the fleet generator).
  # Once `prom` ran, the chart's monitoring values it chose (a later install keeps them).
  local -a monitoring=()
  if [ -f "$root/_out/cluster/prometheus/helm-args" ] && kc get crd prometheusrules.monitoring.coreos.com >/dev/null 2>&1; then
    read -ra monitoring < "$root/_out/cluster/prometheus/helm-args"
  fi
  helm upgrade --install sealfleet "$chart" -n "$NS" --wait --timeout 3m --take-ownership \
    --set image.pullPolicy=Never,sealerImage.pullPolicy=IfNotPresent "${images[@]}" \
    --set operator.leaderElect=false,operator.progressInterval=2s \
    --set nodeAgent.interval=10s,nodeAgent.metricsInterval=5s \
    --set-json "nodeAgent.sealerCapabilities.env=$(capabilities_env)" \
    --set-json 'nodeAgent.affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"sealfleet.io/local-node","operator":"In","values":["true"]}]}]}}}' \
    "${monitoring[@]}" "$@" >/dev/null
  kc -n "$NS" rollout status deploy -l app.kubernetes.io/component=operator --timeout 120s >/dev/null 2>&1 ||
    kc -n "$NS" get pods -o wide
  say "chart installed: $(kc -n "$NS" get pods --no-headers | awk '{printf "%s %s; ", $1, $3}')"
  # Least privilege: the operator's ServiceAccount creates pods only where it runs them.
  local sa=system:serviceaccount:$NS:sealfleet-operator ns
  [ "$(kc auth can-i create pods --as="$sa" -n "$NS")" = yes ] || die "the operator may not create pods in $NS, where its sealer pods run"
  for ns in default "$BATCH_NS" kube-system; do
    [ "$(kc auth can-i create pods --as="$sa" -n "$ns")" = no ] ||
      die "the operator may create pods in namespace $ns: the chart must grant pod rights only in its node-pod namespaces"
  done
  say "the operator may create pods in $NS only (kubectl auth can-i create pods --as=$sa -n default: no)"
}

# ---- the real node --------------------------------------------------------------------------

node() {
  kc label node "$NODE" sealfleet.io/sealer=true --overwrite >/dev/null
  mkdir -p "$(dirname "$LAYER_FILE")"
  say "waiting for the node agent to publish SealerNode $NODE"
  kc wait --for=create sealernode/"$NODE" --timeout 120s >/dev/null ||
    { kc -n "$NS" logs ds/sealfleet-node-agent --tail 30 >&2 || true; die "no SealerNode $NODE after 120 s"; }
  # The admin's intent: one 256 MiB file as the layer device, one pipeline, one CPU kept from
  # the sealer, and a shared-core layout (this machine is far too small for a dedicated one).
  # It keeps the highest CPU, the kubelet (CPU manager static, hack/cluster.sh) CPU 0: the
  # kubelet then grants the sealer another CPU than its layout names, and the sealer moves.
  local keep=$(( $(nproc --all) - 1 ))
  # The node is set up to seal 8 MiB V1_1 sectors: its parent cache is built ahead, once.
  kc patch sealernode "$NODE" --type merge -p "{\"spec\":{\"layerDevices\":[{\"path\":\"$LAYER_FILE\",\"capacity\":\"256Mi\"}],\"pipelines\":1,\"reservedCPUs\":\"$keep\",\"sharedCores\":true,\"parentCache\":{\"proofs\":[\"$PROOF\"]}}}" >/dev/null
  say "waiting for SealerNode $NODE to be Ready with its layer file"
  until_true 90 "SealerNode $NODE Ready with its layer file" \
    '[ "$(kc get sealernode "$NODE" -o jsonpath="{.status.conditions[?(@.type==\"Ready\")].status}/{.status.layerDevices[0].ready}")" = True/true ]' ||
    { kc get sealernode "$NODE" -o yaml | sed -n '/^status:/,$p' | head -60 >&2; exit 1; }
  say "SealerNode $NODE Ready: $(kc get sealernode "$NODE" -o jsonpath='{.status.layerDevices[0].path} {.status.layerDevices[0].capacityBytes} bytes; batch sizes {.status.capabilities.batchSizes}')"
  say "waiting for the node's parent cache for $PROOF (built once by a builder pod, then verified)"
  until_true 180 "parent cache for $PROOF verified" \
    '[ "$(kc get sealernode "$NODE" -o jsonpath="{.status.parentCaches[?(@.proof==\"$PROOF\")].verified}")" = true ]' ||
    { kc -n "$NS" get pods -l app.kubernetes.io/component=parent-cache >&2 || true; exit 1; }
  say "parent cache for $PROOF verified: $(kc get sealernode "$NODE" -o jsonpath="{.status.parentCaches[?(@.proof==\"$PROOF\")].bytes}") bytes"
}

# until_true SECONDS WHAT TEST: evaluate TEST every second until it holds (0) or SECONDS pass (1,
# saying WHAT was not reached).
until_true() {
  local i
  for i in $(seq "$1"); do eval "$3" 2>/dev/null && return 0; sleep 1; done
  say "$2: not after $1 s"
  return 1
}

# ---- seal on the real node ------------------------------------------------------------------

# stage_data NAME NUMBER: a data sector's file under $DEALS_DIR/NAME/ from two random pieces (1 MB
# and 3 MB of data), staged by `sealer stage` as lotus would; prints the sector's `data:` line.
stage_data() {
  local name=$1 num=$2 dir="$DEALS_DIR/$1"
  mkdir -p "$dir"
  head -c 1000000 /dev/urandom > "$dir/piece-$num-a"
  head -c 3000000 /dev/urandom > "$dir/piece-$num-b"
  # One line of JSON, which YAML reads as the sector's data: {file, pieces: [{cid, size}]}.
  printf '    data: %s\n' "$("$SEALER" stage --sector-size 8MiB --piece "$dir/piece-$num-a" --piece "$dir/piece-$num-b" \
    --out "$dir/s-$num" --sealbatch-file "$name/s-$num")"
  rm -f "$dir/piece-$num-a" "$dir/piece-$num-b"
}

# batch_head NAME SIZE: the start of a SealBatch of SIZE sectors of t01000 pinned to the real node.
batch_head() {
  cat <<EOF
apiVersion: sealfleet.io/v1alpha1
kind: SealBatch
metadata:
  name: $1
  namespace: $BATCH_NS
spec:
  sectorSize: $2
  minerID: t01000
  placement:
    nodeName: "$NODE"
EOF
}

# sector_base NAME: a batch's sectors are numbered from this + 1, different for each name (one
# batch seals a sector at a time: placement holds back a batch naming another's sectors).
sector_base() { echo $(( ($(printf %s "$1" | cksum | cut -d' ' -f1) % 90000 + 10000) * 1000 )); }

# batch_yaml NAME N: N $SECTOR_SIZE sectors (from sector_base NAME), the first DATA_SECTORS holding data.
batch_yaml() {
  local name=$1 n=$2 i base
  base=$(sector_base "$1")
  batch_head "$name" "$SECTOR_SIZE"
  cat <<EOF
  # A lotus/Curio storage path per batch: $OUTPUT_DIR/$BATCH_NS/$name/{sectorstore.json,sealed,cache}.
  output:
    hostPath: {path: "$OUTPUT_DIR"}
    layout: Lotus
EOF
  [ -n "$PROOF_TYPE" ] && printf '  proofType: %s\n' "$PROOF_TYPE"
  [ -n "$COMMIT1" ] && printf '  commit1: %s\n' "$COMMIT1"
  [ -n "$PC2_ENGINE" ] && printf '  pc2Engine: %s\n' "$PC2_ENGINE"
  (( DATA_SECTORS > 0 || BAD_SECTOR > 0 )) && printf '  dataSource:\n    hostPath: {path: "%s"}\n' "$DEALS_DIR"
  echo "  sectors:"
  for i in $(seq "$n"); do
    printf '  - number: %d\n    ticket: "%064x"\n' $((base + i)) $((0x5eed0000 + i))
    (( i <= DATA_SECTORS || i == BAD_SECTOR )) && stage_data "$name" $((base + i))
    (( i == BAD_SECTOR )) && spoil_data "$name" $((base + i))
  done
  return 0
}

# spoil_data NAME NUM: make sector NUM's staged file a bad one (its first node all ones: not a
# field element), as a staging bug would.
spoil_data() {
  printf '\xff%.0s' $(seq 32) | dd of="$DEALS_DIR/$1/s-$2" bs=32 count=1 conv=notrunc status=none
}

seal() {
  local name=${1:-cc-8mib-demo} n=${2:-4}
  kc -n "$BATCH_NS" delete sealbatch "$name" --ignore-not-found --wait=true >/dev/null
  batch_yaml "$name" "$n" | kc apply -f - >/dev/null
  say "SealBatch $BATCH_NS/$name: $n $SECTOR_SIZE ${PROOF_TYPE:-V1_1} sectors ($(( DATA_SECTORS < n ? DATA_SECTORS : n )) with deal data$( (( BAD_SECTOR > 0 )) && printf ', sector %d with a spoiled data file' "$BAD_SECTOR")) on node $NODE"
  sf wait "$name" -n "$BATCH_NS" --for phase=Completed,WaitingForSeeds --timeout "${SEAL_TIMEOUT:-900}s"
  sf batch "$name" -n "$BATCH_NS"
  say "CPUs: layout on $(kc -n "$BATCH_NS" get sealbatch "$name" -o jsonpath='{.status.cpus}'), sealer granted $(kc -n "$BATCH_NS" get sealbatch "$name" -o jsonpath='{.status.runningCPUs.granted}; L3 groups {.status.runningCPUs.l3Groups}; moved {.status.runningCPUs.moves}')"
}

# snap [FROM [NAME]]: a SnapDeals update (spec.update) of batch FROM's first CC sector (number
# sector_base FROM + DATA_SECTORS + 1) with freshly staged deal data, reading FROM's lotus storage path on
# the node (FROM must have completed; its slot may be released, its outputs stay).
snap() {
  local from=${1:-cc-8mib-demo} name=${2:-snap-8mib-demo} num
  num=$(( $(sector_base "$from") + DATA_SECTORS + 1 ))
  kc -n "$BATCH_NS" delete sealbatch "$name" --ignore-not-found --wait=true >/dev/null
  {
    batch_head "$name" 8MiB
    cat <<EOF
  update:
    sectorKeys:
      hostPath: {path: "$OUTPUT_DIR/$BATCH_NS/$from"}
      layout: Lotus
  output:
    hostPath: {path: "$OUTPUT_DIR"}
  dataSource:
    hostPath: {path: "$DEALS_DIR"}
  sectors:
  - number: $num
EOF
    stage_data "$name" "$num"
  } | kc apply -f - >/dev/null
  say "SealBatch $BATCH_NS/$name: SnapDeals update of sector $num (sealed by $from) with deal data"
  sf wait "$name" -n "$BATCH_NS" --for phase=Completed --timeout "${SEAL_TIMEOUT:-900}s"
  sf batch "$name" -n "$BATCH_NS"
}

# seeds NAME: what lotus or Curio would do once each sector's seed epoch has passed: write every
# sector's seed (random here) into spec.seeds, then follow the batch through C1.
seeds() {
  local name=${1:-c1-8mib-demo}
  sf seeds "$name" -n "$BATCH_NS" --random --epoch 4000
  sf wait "$name" -n "$BATCH_NS" --for phase=Completed --timeout "${SEAL_TIMEOUT:-900}s"
  sf batch "$name" -n "$BATCH_NS"
}

# verify NAME: each sector's CommR (an update's comm_r_new) in the batch status next to
# rust-fil-proofs' for the same inputs, computed here by `sealer oracle` (`oracle-snap`).
verify() {
  local name=${1:-cc-8mib-demo}
  say "computing $name's sectors again with rust-fil-proofs on this host"
  FIL_PROOFS_PARENT_CACHE=${FIL_PROOFS_PARENT_CACHE:-/var/tmp/filecoin-parents} \
    sf verify "$name" -n "$BATCH_NS" --sealer "$SEALER"
}

release() {
  local name=${1:-cc-8mib-demo}
  kc -n "$BATCH_NS" wait --for=condition=Released sealbatch/"$name" --timeout 180s >/dev/null ||
    die "batch $name: slot not released after 180 s: $(kc -n "$BATCH_NS" get sealbatch "$name" -o jsonpath='{.status.conditions[?(@.type=="Released")].message}')"
  say "released: $(kc -n "$BATCH_NS" get sealbatch "$name" -o jsonpath='{.status.conditions[?(@.type=="Released")].message}')"
  # A released slot is dirty until the node's scrub pod has discarded it (an update held none).
  local i dirty=""
  for i in $(seq 120); do
    dirty=$(kc get sealernode "$NODE" -o jsonpath='{range .status.dirtySlots[*]}{.batch} {.message}{"\n"}{end}' | grep -F "$BATCH_NS/$name " || true)
    [ -z "$dirty" ] && break
    sleep 1
  done
  [ -z "$dirty" ] || die "batch $name: its slot is still dirty after 120 s: $dirty"
  say "slot scrubbed: no dirty slot of $name left on $NODE"
  sf slots "$NODE"
}

# ---- the simulated fleet --------------------------------------------------------------------

fleet() {
  local n=${1:-40} i size sectors s
  say "a simulated backlog: $n SealBatches of mixed sizes for the kwok fleet"
  for i in $(seq "$n"); do
    case $((i % 4)) in 0) size=32GiB sectors=32 ;; 1) size=32GiB sectors=16 ;; 2) size=64GiB sectors=8 ;; 3) size=32GiB sectors=64 ;; esac
    cat <<EOF
---
apiVersion: sealfleet.io/v1alpha1
kind: SealBatch
metadata: {name: backlog-$i, namespace: $BATCH_NS, labels: {sealfleet.io/demo: backlog}}
spec:
  sectorSize: $size
  minerID: t01000
  placement:
    tolerations: [{key: kwok.x-k8s.io/node, operator: Equal, value: fake, effect: NoSchedule}]
  sectors:
EOF
    for s in $(seq "$sectors"); do printf '  - {number: %d, ticket: "%064x"}\n' $((100000 * i + s)) $((i * 1000 + s)); done
  done | kc apply -f - >/dev/null
  sf wait -n "$BATCH_NS" -l sealfleet.io/demo=backlog --for placement --timeout 120s
  sf status
  kc -n "$BATCH_NS" get sealbatch -l sealfleet.io/demo=backlog --sort-by=.metadata.creationTimestamp \
    -o custom-columns=BATCH:.metadata.name,SIZE:.spec.sectorSize,SECTORS:.status.batchSize,PHASE:.status.phase,NODE:.status.node,SLOT:.status.slot |
    awk 'NR <= 8'
  local reasons
  reasons=$(kc -n "$BATCH_NS" get sealbatch -l sealfleet.io/demo=backlog -o jsonpath='{range .items[?(@.status.phase=="Pending")]}{.metadata.name}: {.status.message}{"\n"}{end}')
  if [ -n "$reasons" ]; then
    say "why pending ones wait (first 3):"
    awk 'NR <= 3' <<<"$reasons"
  fi
}

# summary: the fleet as the plugin shows it, and what the real node's slots hold (the ledger:
# derived from the batches, so it is 0 once every demo batch on it is released).
summary() {
  sf status
  sf slots "$NODE"
  local held; held=$(sf slots "$NODE" --held --no-headers | awk 'NF' | wc -l)
  say "slots held on $NODE: $held"
  [ "$held" = 0 ] || die "$NODE still holds $held slot(s) after every demo batch was released"
}

# ---- monitoring -----------------------------------------------------------------------------

# prom: the chart's monitoring as prometheus-operator reads it. prometheus-operator (built from
# the Go module proxy, `hack/tools.sh monitoring`) runs beside the control plane and runs a
# Prometheus (localhost/prometheus:local: Prometheus with Kubernetes service discovery) on the
# real node, host network (so that the e2e and you reach it from the host), listening on
# 127.0.0.1:9090; it scrapes the pods at their pod addresses. The chart is upgraded with
# monitoring.enabled=true and the label that Prometheus selects: its ServiceMonitor, PodMonitors
# (node agent, sealer pods) and PrometheusRule are what Prometheus scrapes and evaluates, through
# the chart's TLS and token settings. PROM_HELM_ARGS adds chart values (the rules' thresholds);
# a later `install` keeps them. prometheus-operator's process is recorded in the cluster's run/
# folder, so hack/cluster.sh down stops it.
PROM_LABEL=sealfleet.io/prometheus
PROM_URL=http://127.0.0.1:9090
# promq QUERY: the value of an instant query's first sample (empty when none).
promq() {
  curl -sf "$PROM_URL/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}
prom() {
  local P=$root/_out/cluster/prometheus
  mkdir -p "$P"
  hack/tools.sh monitoring
  hack/images.sh import 2>/dev/null
  local crds=$root/bin/monitoring/crds
  kc apply --server-side --force-conflicts -f "$crds" >/dev/null
  kc wait --for condition=Established -f "$crds" --timeout 60s >/dev/null
  # Scoped to the release namespace: the Prometheus, its monitors and rules, the token Secret.
  _start prometheus-operator "$root/bin/monitoring/prometheus-operator" --namespaces "$NS" \
    --web.listen-address 127.0.0.1:18088 --prometheus-config-reloader localhost/prometheus-config-reloader:local \
    --kubelet-endpoints=false
  echo "--set monitoring.enabled=true --set monitoring.interval=2s --set monitoring.labels.${PROM_LABEL//./\\.}=local ${PROM_HELM_ARGS:-}" > "$P/helm-args"
  install
  source hack/versions.env
  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: sealfleet-prometheus, namespace: $NS}
---
# Kubernetes service discovery in the namespace its monitors name.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sealfleet-prometheus, namespace: $NS}
rules:
  - apiGroups: [""]
    resources: [pods, services, endpoints]
    verbs: [get, list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sealfleet-prometheus, namespace: $NS}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sealfleet-prometheus}
subjects: [{kind: ServiceAccount, name: sealfleet-prometheus, namespace: $NS}]
---
apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata: {name: sealfleet, namespace: $NS}
spec:
  image: localhost/prometheus:local
  version: v3.${PROMETHEUS_VERSION#v0.3}
  replicas: 1
  serviceAccountName: sealfleet-prometheus
  # Reached from the host (the e2e's queries), on 127.0.0.1 only.
  hostNetwork: true
  listenLocal: true
  nodeSelector: {sealfleet.io/local-node: "true"}
  scrapeInterval: 2s
  evaluationInterval: 2s
  retention: 2h
  serviceMonitorSelector: {matchLabels: {$PROM_LABEL: local}}
  podMonitorSelector: {matchLabels: {$PROM_LABEL: local}}
  ruleSelector: {matchLabels: {$PROM_LABEL: local}}
EOF
  say "waiting for prometheus-operator's Prometheus on $PROM_URL and its sealfleet targets"
  until_true 120 "Prometheus ready" 'curl -sf "$PROM_URL/-/ready" >/dev/null' ||
    { kc -n "$NS" get pods -l app.kubernetes.io/name=prometheus -o wide >&2; tail -20 "$root/_out/cluster/logs/prometheus-operator.log" >&2; exit 1; }
  # The operator's and the node agent's targets up: discovered, scraped over HTTPS with the token.
  until_true 120 "the operator's and node agent's targets up" \
    '[ "$(promq "count(up{job=~\"sealfleet-operator|sealfleet-node-agent\"} == 1)")" = 2 ]' ||
    { curl -s "$PROM_URL/api/v1/targets" | python3 -c 'import json, sys
for t in json.load(sys.stdin)["data"]["activeTargets"]: print(t["scrapePool"], t["scrapeUrl"], t["health"], t["lastError"])' >&2; exit 1; }
  say "prometheus on $PROM_URL (prometheus-operator's; rules from the chart's PrometheusRule, targets from its monitors)"
}

# _start NAME CMD...: a background process recorded the way hack/cluster.sh records its own.
_start() {
  local name=$1 C=$root/_out/cluster; shift
  local pf=$C/run/$name.pid
  if [ -f "$pf" ] && [ -d "/proc/$(cat "$pf")" ]; then return 0; fi
  readlink -f "$(command -v "$1")" > "$C/run/$name.exe"
  setsid "$@" >> "$C/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$pf"
}

# ---- the whole demo -------------------------------------------------------------------------

STEPS=()    # "name|seconds|result" of each step run by `all`
T0=$SECONDS

# step NAME CMD...: one step of `all`: its output goes to the terminal and to
# $OUT/NN-NAME.log; its time and result go to the summary; a failure names the step and its log.
step() {
  local name=$1; shift
  local log; log=$(printf '%s/%02d-%s.log' "$OUT" $(( ${#STEPS[@]} + 1 )) "$name")
  local t=$SECONDS rc=0
  printf '\n\033[1m== %s\033[0m  (%s)\n' "$name" "$*" >&2
  # A step runs as its own process (this script with the step's name): errexit holds inside it,
  # and a step that exits stops only itself.
  "$0" "$@" 2>&1 | tee "$log" || rc=$?
  local dt=$(( SECONDS - t ))
  if [ "$rc" != 0 ]; then
    STEPS+=("$name|$dt|FAILED (exit $rc)")
    print_summary
    die "step '$name' failed after $dt s (exit $rc): read $log"
  fi
  STEPS+=("$name|$dt|ok")
  say "$name: ok in $dt s (total $(( SECONDS - T0 )) s)"
}

print_summary() {
  local s name dt res matches
  printf '\n%-22s %8s  %s\n' STEP SECONDS RESULT >&2
  for s in "${STEPS[@]}"; do
    IFS='|' read -r name dt res <<<"$s"
    matches=""
    case "$name" in verify*) matches=$(grep -c "matches rust-fil-proofs" "$(ls "$OUT"/*-"$name".log | tail -1)" || true) ;; esac
    printf '%-22s %8s  %s%s\n' "$name" "$dt" "$res" "${matches:+, $matches CommR equal to rust-fil-proofs}" >&2
  done
  printf '%-22s %8s\n' total $(( SECONDS - T0 )) >&2
}

all() {
  rm -f "$OUT"/[0-9][0-9]-*.log
  step check check
  step build build
  step up up
  step install install
  step images images
  step node node
  step seal seal cc-8mib-demo 4
  step verify-seal verify cc-8mib-demo
  step release-seal release cc-8mib-demo
  step snap snap cc-8mib-demo snap-8mib-demo
  step verify-snap verify snap-8mib-demo
  step release-snap release snap-8mib-demo
  COMMIT1=FromSlot step seal-c1 seal c1-8mib-demo 2
  step seeds seeds c1-8mib-demo
  step release-c1 release c1-8mib-demo
  step fleet fleet "${DEMO_BACKLOG:-40}"
  step summary summary
  print_summary
  say "done in $(( SECONDS - T0 )) s; step logs in $OUT. The cluster keeps running: eval \"\$(hack/cluster.sh env)\"; kubectl sealfleet status"
  say "stop it and give the machine back with: make cluster-down"
}

cmd=${1:-all}; shift || true
case "$cmd" in
  all|check|build|up|install|images|node|seal|verify|snap|seeds|release|fleet|summary|prom) "$cmd" "$@" ;;
  *) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
