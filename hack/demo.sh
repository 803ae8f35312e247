#!/usr/bin/env bash
# make demo: the whole product on one machine. Builds what is missing, starts the local cluster
# (hack/cluster.sh), installs the Helm chart, opts the real node in, seals a batch of 8 MiB
# sectors (the first with deal data, the rest CC) with the real sealer, compares every CommR
# with rust-fil-proofs (`sealer oracle`),
# waits for the slot to be released, updates one of its CC sectors with new deal data
# (SnapDeals), seals two sectors whose C1 the operator runs from the slot once `seeds` writes
# their seeds, then places a simulated backlog on the kwok fleet.
#
#   hack/demo.sh            all of the below, in order
#   hack/demo.sh build      host packages, Kubernetes tools, Go binaries, the sealer, images
#   hack/demo.sh up         the local cluster (control plane, real node, kwok fleet)
#   hack/demo.sh install    the Helm chart into sealfleet-system (operator + node agent on the host network)
#   hack/demo.sh node       label node 127.0.0.1, give its SealerNode a file layer device, wait until Ready
#   hack/demo.sh seal [NAME [SECTORS]]   seal a batch on 127.0.0.1 (default cc-8mib-demo, 4 sectors), show progress
#   hack/demo.sh compare [NAME]          CommR of each sector vs `sealer oracle` (exit 1 when one differs)
#   COMMIT1=FromSlot hack/demo.sh seal NAME N   seal without layer copies; the batch waits for its seeds
#   hack/demo.sh seeds [NAME]            write random seeds into NAME (default c1-8mib-demo): C1 from the slot
#   hack/demo.sh snap [FROM [NAME]]      SnapDeals update of FROM's first CC sector with new deal data
#                                        (default: cc-8mib-demo into snap-8mib-demo); then compare NAME
#   hack/demo.sh release [NAME]          wait for the Released condition
#   hack/demo.sh fleet [N]               N simulated batches (default 40) on the kwok fleet; placed/pending counts
#   hack/demo.sh check                   what this machine can do (root, SHA-NI, hugepages)
#   hack/demo.sh prom                    Prometheus on 127.0.0.1:19090 scraping the operator, the node
#                                        agent and the sealer pods (file_sd), with the chart's rules
#
# Everything listens on 127.0.0.1. The cluster stays up afterwards: stop it with `make cluster-down`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH=$root/bin:$PATH
eval "$(hack/cluster.sh env)"

NS=sealfleet-system
BATCH_NS=sealfleet-batches
OUTPUT_DIR=${OUTPUT_DIR:-/var/lib/sealfleet/output}
DEALS_DIR=${DEALS_DIR:-/var/lib/sealfleet/deals}  # staged data sectors (the batch's dataSource)
DATA_SECTORS=${DATA_SECTORS:-1}                   # how many of a batch's sectors hold deal data
PROOF_TYPE=${PROOF_TYPE:-}                        # spec.proofType of sealed batches (default: the API's, V1_1)
SECTOR_SIZE=${SECTOR_SIZE:-8MiB}                  # spec.sectorSize of sealed batches (CC only when not 8MiB)
COMMIT1=${COMMIT1:-}                              # FromSlot: the operator runs C1 from the slot once `seeds` gives the seeds
PROOF=StackedDrg8MiBV1_1  # the demo's batches: 8 MiB, V1_1
NODE=127.0.0.1
LAYER_FILE=${DEMO_LAYER_FILE:-/var/lib/sealfleet/demo/layers.img}
SEALER=$root/sealer-image/target/release/sealer

say() { printf '\033[1mdemo:\033[0m %s\n' "$*" >&2; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }
kc() { kubectl "$@"; }
T0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - T0 ))s"; }

# ---- what this machine can do ---------------------------------------------------------------

check() {
  local ok=1
  [ "$(id -u)" = 0 ] || { say "not root: the real node (containerd, kubelet, hugepages) needs root; run as root or with sudo"; ok=0; }
  grep -qw sha_ni /proc/cpuinfo || { say "this CPU has no SHA-NI: the sealer refuses to run without it (exit 4); the demo can only show the simulated fleet"; ok=0; }
  [ -d /sys/kernel/mm/hugepages/hugepages-1048576kB ] ||
    { say "no 1 GiB hugepage support in this kernel (no /sys/kernel/mm/hugepages/hugepages-1048576kB): the real node cannot offer hugepages-1Gi"; ok=0; }
  [ "$ok" = 1 ]
}

# ---- build ----------------------------------------------------------------------------------

build() {
  say "building what is missing (host packages, Kubernetes tools, binaries, sealer, images)"
  hack/host-deps.sh
  hack/tools.sh k8s kwok helm kubectl
  make -s build
  if [ ! -x "$SEALER" ] || [ -n "$(find sealer-image/crates sealer-image/Cargo.lock -newer "$SEALER" -type f 2>/dev/null | head -1)" ]; then
    say "building the sealer (Rust, release; the first build takes several minutes)"
    make -s sealer
  fi
  hack/images.sh build
}

# ---- cluster and chart ----------------------------------------------------------------------

up() {
  hack/cluster.sh up
  # Images rebuilt after the node started: import them (only changed ones are imported).
  if hack/cluster.sh status | grep -q "containerd running"; then hack/images.sh import; fi
}

install() {
  say "installing the Helm chart into $NS"
  kc create namespace "$NS" --dry-run=client -o yaml | kc apply -f - >/dev/null
  kc label namespace "$NS" --overwrite pod-security.kubernetes.io/enforce=privileged \
    pod-security.kubernetes.io/audit=privileged pod-security.kubernetes.io/warn=privileged >/dev/null
  # CRDs come from config/crd/bases (hack/cluster.sh applies them with the fleet), so the chart
  # does not own them here. The operator and the node agent use the host network: the real
  # node has no pod network. Their listeners bind 127.0.0.1. The agent runs only on the real
  # node (simulated nodes get their SealerNodes from the fleet generator). Nothing here routes
  # Service IPs (no kube-proxy), so both reach the API server at 127.0.0.1:6443 directly.
  helm upgrade --install sealfleet charts/sealfleet -n "$NS" --wait --timeout 3m \
    --set crds.install=false \
    --set image.repository=localhost/sealfleet-operator,image.tag=dev,image.pullPolicy=Never \
    --set sealerImage.repository=localhost/sealfleet-sealer,sealerImage.tag=dev,sealerImage.pullPolicy=IfNotPresent \
    --set operator.hostNetwork=true,operator.listenAddress=127.0.0.1,operator.sealerHostNetwork=true,operator.sealerMetricsAddress=127.0.0.1 \
    --set operator.leaderElect=false,operator.progressInterval=2s \
    --set nodeAgent.hostNetwork=true,nodeAgent.listenAddress=127.0.0.1,nodeAgent.interval=10s,nodeAgent.metricsInterval=5s \
    --set-json 'operator.extraEnv=[{"name":"KUBERNETES_SERVICE_HOST","value":"127.0.0.1"},{"name":"KUBERNETES_SERVICE_PORT","value":"6443"}]' \
    --set-json 'nodeAgent.extraEnv=[{"name":"KUBERNETES_SERVICE_HOST","value":"127.0.0.1"},{"name":"KUBERNETES_SERVICE_PORT","value":"6443"}]' \
    --set-json 'nodeAgent.affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"sealfleet.io/local-node","operator":"In","values":["true"]}]}]}}}' \
    "$@" >/dev/null
  kc -n "$NS" rollout status deploy -l app.kubernetes.io/component=operator --timeout 120s >/dev/null 2>&1 ||
    kc -n "$NS" get pods -o wide
  say "chart installed ($(elapsed)): $(kc -n "$NS" get pods --no-headers | awk '{printf "%s %s; ", $1, $3}')"
}

# ---- the real node --------------------------------------------------------------------------

node() {
  kc label node "$NODE" sealfleet.io/sealer=true --overwrite >/dev/null
  mkdir -p "$(dirname "$LAYER_FILE")"
  say "waiting for the node agent to publish SealerNode $NODE"
  local i
  for i in $(seq 120); do kc get sealernode "$NODE" >/dev/null 2>&1 && break; sleep 1; done
  kc get sealernode "$NODE" >/dev/null 2>&1 || { kc -n "$NS" logs ds/sealfleet-node-agent --tail 30 >&2 || true; die "no SealerNode $NODE after 120 s"; }
  # The admin's intent: one 256 MiB file as the layer device, one pipeline, one CPU kept from
  # the sealer, and a shared-core layout (this machine is far too small for a dedicated one).
  # It keeps the highest CPU, the kubelet (CPU manager static, hack/cluster.sh) CPU 0: the
  # kubelet then grants the sealer another CPU than its layout names, and the sealer moves.
  local keep=$(( $(nproc --all) - 1 ))
  # The node is set up to seal 8 MiB V1_1 sectors: its parent cache is built ahead, once.
  kc patch sealernode "$NODE" --type merge -p "{\"spec\":{\"layerDevices\":[{\"path\":\"$LAYER_FILE\",\"capacity\":\"256Mi\"}],\"pipelines\":1,\"reservedCPUs\":\"$keep\",\"sharedCores\":true,\"parentCache\":{\"proofs\":[\"$PROOF\"]}}}" >/dev/null
  say "waiting for SealerNode $NODE to be Ready with its layer file"
  local ready=""
  for i in $(seq 90); do
    ready=$(kc get sealernode "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason} {.status.slots.count}' 2>/dev/null || true)
    [[ "$ready" == True* ]] && [ -n "$(kc get sealernode "$NODE" -o jsonpath='{.status.slots.count}' 2>/dev/null)" ] && break
    sleep 1
  done
  [[ "$ready" == True* ]] || { kc get sealernode "$NODE" -o yaml | sed -n '/^status:/,$p' | head -60 >&2; die "SealerNode $NODE is not Ready: $ready"; }
  say "SealerNode $NODE Ready: $(kc get sealernode "$NODE" -o jsonpath='{.status.layerDevices[0].path} ready={.status.layerDevices[0].ready} {.status.layerDevices[0].capacityBytes} bytes; batch sizes {.status.capabilities.batchSizes}')"
  say "waiting for the node's parent cache for $PROOF (built once by a builder pod, then verified)"
  local cache=""
  for i in $(seq 180); do
    cache=$(kc get sealernode "$NODE" -o jsonpath="{.status.parentCaches[?(@.proof==\"$PROOF\")].verified}" 2>/dev/null || true)
    [ "$cache" = true ] && break
    sleep 1
  done
  [ "$cache" = true ] || { kc -n "$BATCH_NS" get pods -l app.kubernetes.io/component=parent-cache >&2 || true; die "parent cache for $PROOF not verified after 180 s"; }
  say "parent cache for $PROOF verified: $(kc get sealernode "$NODE" -o jsonpath="{.status.parentCaches[?(@.proof==\"$PROOF\")].bytes}") bytes in ${PARENT_CACHE_DIR:-/var/lib/sealfleet/parent-cache}"
}

# ---- seal on the real node ------------------------------------------------------------------

# batch_yaml NAME N: N $SECTOR_SIZE sectors 1001.. pinned to the real node, the first DATA_SECTORS holding data.
# stage_data NAME NUMBER: a data sector's file under $DEALS_DIR/NAME/ from two random pieces (1 MiB
# and 4 MiB padded, 3 MiB of alignment padding between them), staged by `sealer stage` as lotus
# would; prints the sector's `data:` YAML (file relative to $DEALS_DIR, pieces).
stage_data() {
  local name=$1 num=$2 dir="$DEALS_DIR/$1" out
  mkdir -p "$dir"
  head -c 1000000 /dev/urandom > "$dir/piece-$num-a"
  head -c 3000000 /dev/urandom > "$dir/piece-$num-b"
  out=$("$SEALER" stage --sector-size 8MiB --piece "$dir/piece-$num-a" --piece "$dir/piece-$num-b" --out "$dir/s-$num")
  rm -f "$dir/piece-$num-a" "$dir/piece-$num-b"
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
print("    data:")
print(f"      file: {sys.argv[2]}")
print("      pieces:")
for p in d["pieces"]:
    print("      - {cid: %s, size: %d}" % (json.dumps(p["comm_p"]), p["size"]))
' "$out" "$name/s-$num"
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

batch_yaml() {
  local name=$1 n=$2 i
  batch_head "$name" "$SECTOR_SIZE"
  cat <<EOF
  # A lotus/Curio storage path per batch: $OUTPUT_DIR/$BATCH_NS/$name/{sectorstore.json,sealed,cache}.
  output:
    hostPath: {path: "$OUTPUT_DIR"}
    layout: Lotus
EOF
  [ -n "$PROOF_TYPE" ] && printf '  proofType: %s\n' "$PROOF_TYPE"
  [ -n "$COMMIT1" ] && printf '  commit1: %s\n' "$COMMIT1"
  # The first DATA_SECTORS sectors hold deal data, staged on the node under $DEALS_DIR.
  (( DATA_SECTORS > 0 )) && printf '  dataSource:\n    hostPath: {path: "%s"}\n' "$DEALS_DIR"
  echo "  sectors:"
  for i in $(seq "$n"); do
    printf '  - number: %d\n    ticket: "%s"\n' $((1000 + i)) "$(printf '%064x' $((0x5eed0000 + i)) )"
    (( i <= DATA_SECTORS )) && stage_data "$name" $((1000 + i))
  done
  return 0
}

seal() {
  local name=${1:-cc-8mib-demo} n=${2:-4}
  kc -n "$BATCH_NS" delete sealbatch "$name" --ignore-not-found --wait=true >/dev/null
  batch_yaml "$name" "$n" | kc apply -f - >/dev/null
  say "SealBatch $BATCH_NS/$name: $n $SECTOR_SIZE ${PROOF_TYPE:-V1_1} sectors ($(( DATA_SECTORS < n ? DATA_SECTORS : n )) with deal data) on node $NODE"
  wait_batch "$name"
  say "CPUs: layout on $(kc -n "$BATCH_NS" get sealbatch "$name" -o jsonpath='{.status.cpus}'), sealer granted $(kc -n "$BATCH_NS" get sealbatch "$name" -o jsonpath='{.status.runningCPUs.granted}; L3 groups {.status.runningCPUs.l3Groups}; moved {.status.runningCPUs.moves}')"
}

# snap [FROM [NAME]]: a SnapDeals update (spec.update) of batch FROM's first CC sector (number
# 1000 + DATA_SECTORS + 1) with freshly staged deal data, reading FROM's lotus storage path on
# the node (FROM must have completed; its slot may be released, its outputs stay).
snap() {
  local from=${1:-cc-8mib-demo} name=${2:-snap-8mib-demo} num=$((1000 + DATA_SECTORS + 1))
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
  wait_batch "$name"
}

# seeds NAME: what lotus or Curio would do once each sector's seed epoch has passed: write every
# sector's seed (random here) into spec.seeds, then follow the batch through C1.
seeds() {
  local name=${1:-c1-8mib-demo} patch
  patch=$(kc -n "$BATCH_NS" get sealbatch "$name" -o json | python3 -c '
import json, os, sys
b = json.load(sys.stdin)
print(json.dumps({"spec": {"seeds": [{"number": s["number"], "randomness": os.urandom(32).hex(), "epoch": 4000 + i}
    for i, s in enumerate(b["spec"]["sectors"])]}}))')
  kc -n "$BATCH_NS" patch sealbatch "$name" --type=merge -p "$patch" >/dev/null
  say "seeds written for every sector of $name: C1 from the slot"
  wait_batch "$name" 'Completed|Failed'
  kc -n "$BATCH_NS" get sealbatch "$name" -o jsonpath='{range .status.sectors[*]}{"  sector "}{.number}{": "}{.state}{"\n"}{end}' >&2
}

# wait_batch NAME [STOPS]: follow a batch's phase and progress until it is Completed (0) or
# Failed (1), or waits for its seeds (0: commit1 FromSlot after PC2); STOPS, a regex of phases,
# narrows where it stops.
wait_batch() {
  local name=$1 stops=${2:-Completed|Failed|WaitingForSeeds} line last="" phase="" t=$(date +%s)
  while :; do
    line=$(kc -n "$BATCH_NS" get sealbatch "$name" -o jsonpath='{.status.phase}|{.status.progress.phase}|{.status.progress.layer}|{.status.progress.layers}|{.status.progress.percent}|{.status.message}' 2>/dev/null || true)
    IFS='|' read -r phase sp layer layers pct msg <<<"$line"
    local show="phase ${phase:-?}"
    [ -n "$sp" ] && show+="  sealer ${sp}"
    [ -n "$layer" ] && [ "$layer" != 0 ] && show+="  layer ${layer}/${layers}"
    [ -n "$pct" ] && show+="  ${pct}%"
    if [ "$show" != "$last" ]; then
      printf '  %4ss  %s%s\n' $(( $(date +%s) - t )) "$show" "$( [ "$phase" = Pending ] || [ "$phase" = Failed ] && echo "  ($msg)")" >&2
      last=$show
    fi
    [[ "$phase" =~ ^($stops)$ ]] && break
    (( $(date +%s) - t > ${SEAL_TIMEOUT:-900} )) && die "batch $name not done after ${SEAL_TIMEOUT:-900} s"
    sleep 1
  done
  say "batch $name $phase after $(( $(date +%s) - t )) s"
  [ "$phase" = Completed ] || [ "$phase" = WaitingForSeeds ] || { kc -n "$BATCH_NS" get sealbatch "$name" -o yaml | sed -n '/^status:/,$p' >&2; return 1; }
}

# compare NAME: each sector's CommR from the batch status next to rust-fil-proofs' value for
# the same config (`sealer oracle`, computed on the host from the batch's sealer ConfigMap);
# for an update (spec.update), comm_r_new next to filecoin-proofs encode_into's
# (`sealer oracle-snap`).
compare() {
  local name=${1:-cc-8mib-demo} tmp
  tmp=$(mktemp -d)
  # A RETURN trap stays set after this function returns; clear it as it fires, or it runs
  # again when the caller returns, with $tmp out of scope (set -u).
  trap 'rm -rf "$tmp"; trap - RETURN' RETURN
  kc -n "$BATCH_NS" get configmap "$name-sealer-config" -o jsonpath='{.data.config\.json}' > "$tmp/in.json"
  kc -n "$BATCH_NS" get sealbatch "$name" -o json > "$tmp/batch.json"
  python3 - "$tmp" <<'EOF'
import json, sys
d = sys.argv[1]
c = json.load(open(d + "/in.json"))
c["output_dir"] = d + "/out"          # the oracle's own scratch; the layer paths do not matter to it
for k in ("metrics_port", "progress_file"):
    c.pop(k, None)
# Data sectors' files as the host sees them (the pod reads the batch's dataSource at /data),
# and an update's sector keys (read at /sector-keys).
spec = json.load(open(d + "/batch.json"))["spec"]
src = (spec.get("dataSource") or {}).get("hostPath", {}).get("path")
keys = ((spec.get("update") or {}).get("sectorKeys") or {}).get("hostPath", {}).get("path")
for s in c["sectors"]:
    if "data" in s and src:
        s["data"]["path"] = src + s["data"]["path"].removeprefix("/data")
    for k in ("sector_key", "sector_key_cache"):
        if k in s and keys:
            s[k] = keys + s[k].removeprefix("/sector-keys")
json.dump(c, open(d + "/oracle.json", "w"))
EOF
  if kc -n "$BATCH_NS" get sealbatch "$name" -o jsonpath='{.spec.update}' | grep -q .; then
    say "computing the same updates with filecoin-proofs encode_into (sealer oracle-snap)"
    "$SEALER" oracle-snap --config "$tmp/oracle.json" --work "$tmp/work" > "$tmp/oracle.out"
  else
  if ! "$SEALER" oracle --help >/dev/null 2>&1; then
    python3 - "$tmp/batch.json" <<'EOF'
import json, sys
for s in json.load(open(sys.argv[1]))["status"].get("sectors", []):
    print(f"sector {s['number']}  commR {s.get('commR', '?')}  (not compared: this sealer build has no `sealer oracle` yet)")
EOF
    say "$SEALER has no 'oracle' subcommand yet: rebuild the sealer (make sealer) once it lands"
    return 2
  fi
  say "computing the same sectors with rust-fil-proofs (sealer oracle)"
  (cd "$tmp" && FIL_PROOFS_PARENT_CACHE=${FIL_PROOFS_PARENT_CACHE:-/var/tmp/filecoin-parents} "$SEALER" oracle --config "$tmp/oracle.json") > "$tmp/oracle.out"
  fi
  python3 - "$tmp/batch.json" "$tmp/oracle.out" <<'EOF'
import json, sys
batch = json.load(open(sys.argv[1]))
raw = open(sys.argv[2]).read()
oracle = json.loads(raw[raw.index("{"):])
want = {int(s["sector_id"]): (s.get("comm_r_new") or s["comm_r"]).lower().removeprefix("0x") for s in oracle["sectors"]}
bad = 0
for s in sorted(batch["status"].get("sectors", []), key=lambda s: s["number"]):
    got = s.get("commR", "").lower().removeprefix("0x")
    exp = want.get(int(s["number"]))
    if exp is not None and got == exp:
        print(f"sector {s['number']}  commR {got}  matches rust-fil-proofs")
    else:
        bad += 1
        print(f"sector {s['number']}  commR {got}  DIFFERS from rust-fil-proofs {exp}")
if not batch["status"].get("sectors"):
    print("no sectors in the batch status"); bad += 1
sys.exit(1 if bad else 0)
EOF
}

release() {
  local name=${1:-cc-8mib-demo} i st=""
  for i in $(seq 180); do
    st=$(kc -n "$BATCH_NS" get sealbatch "$name" -o jsonpath='{.status.conditions[?(@.type=="Released")].status} {.status.conditions[?(@.type=="Released")].message}' 2>/dev/null || true)
    [[ "$st" == True* ]] && break
    sleep 1
  done
  [[ "$st" == True* ]] || die "batch $name: slot not released after 180 s: $st"
  say "slot released: ${st#True }"
  say "SealerNode $NODE slots: $(kc get sealernode "$NODE" -o jsonpath='{.status.slots.count} slots, {.status.freeSlots} free')"
}

# ---- the simulated fleet --------------------------------------------------------------------

fleet() {
  local n=${1:-40} i size sectors ns=$BATCH_NS
  say "a simulated backlog: $n SealBatches of mixed sizes for the kwok fleet"
  {
    for i in $(seq "$n"); do
      case $((i % 4)) in 0) size=32GiB sectors=32 ;; 1) size=32GiB sectors=16 ;; 2) size=64GiB sectors=8 ;; 3) size=32GiB sectors=64 ;; esac
      cat <<EOF
---
apiVersion: sealfleet.io/v1alpha1
kind: SealBatch
metadata: {name: backlog-$i, namespace: $ns, labels: {sealfleet.io/demo: backlog}}
spec:
  sectorSize: $size
  minerID: t01000
  placement:
    tolerations: [{key: kwok.x-k8s.io/node, operator: Equal, value: fake, effect: NoSchedule}]
  sectors:
EOF
      local s
      for s in $(seq "$sectors"); do printf '  - {number: %d, ticket: "%064x"}\n' $((100000 * i + s)) $((i * 1000 + s)); done
    done
  } | kc apply -f - >/dev/null
  local t=$(date +%s) placed pending explained
  while :; do
    read -r placed pending explained < <(kc -n "$ns" get sealbatch -l sealfleet.io/demo=backlog -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
placed = sum(1 for b in items if b.get("status", {}).get("node"))
pending = [b for b in items if not b.get("status", {}).get("node")]
explained = sum(1 for b in pending if b.get("status", {}).get("phase") == "Pending" and b["status"].get("message"))
print(placed, len(pending), explained)')
    (( placed + explained == n )) && break
    (( $(date +%s) - t > 120 )) && { say "not all batches placed or explained after 120 s"; break; }
    sleep 1
  done
  say "backlog after $(( $(date +%s) - t )) s: $placed placed, $pending pending ($explained with a reason)"
  # The fleet as kubectl shows it: the real node and the 8 nodes holding most of the backlog.
  # (No `| head` on these pipes: under pipefail the writer's SIGPIPE would fail the demo.)
  local busy
  # What a node holds is derived from the batches placed there (their status is the only record).
  busy=$(NODES=$(kc get sealernodes -o json) BATCHES=$(kc get sealbatches -A -o json) python3 -c '
import collections, json, os, sys
nodes = json.loads(os.environ["NODES"])["items"]
holding = collections.Counter()
for b in json.loads(os.environ["BATCHES"])["items"]:
    st = b.get("status") or {}
    released = any(c["type"] == "Released" and c["status"] == "True" for c in st.get("conditions") or [])
    if st.get("node") and not released:
        holding[st["node"]] += 1
held = lambda n: holding[n["metadata"]["name"]]
slots = sum(((n.get("status") or {}).get("slots") or {}).get("count", 0) for n in nodes)
used = sum(held(n) for n in nodes)
print("fleet: %d SealerNodes, %d layer slots, %d held" % (len(nodes), slots, used), file=sys.stderr)
busy = sorted((n for n in nodes if held(n)), key=lambda n: (-held(n), n["metadata"]["name"]))
print(" ".join(n["metadata"]["name"] for n in busy[:8]))')
  # shellcheck disable=SC2086
  kc get sealernodes "$NODE" $busy
  kc -n "$ns" get sealbatch -l sealfleet.io/demo=backlog --sort-by=.metadata.creationTimestamp \
    -o custom-columns=BATCH:.metadata.name,SIZE:.spec.sectorSize,SECTORS:.status.batchSize,PHASE:.status.phase,NODE:.status.node,SLOT:.status.slot |
    awk 'NR <= 8'
  if (( pending > 0 )); then
    say "why the pending ones wait (first 3):"
    kc -n "$ns" get sealbatch -l sealfleet.io/demo=backlog -o jsonpath='{range .items[?(@.status.phase=="Pending")]}{.metadata.name}: {.status.message}{"\n"}{end}' |
      awk 'NR <= 3'
  fi
}

# ---- monitoring -----------------------------------------------------------------------------

# prom: Debian's prometheus (no kubernetes_sd) on 127.0.0.1:19090. Targets come from file_sd
# files that a small loop regenerates from the cluster every 2 s: the operator (host network,
# 127.0.0.1:8080), the node agent (127.0.0.1:8090) and each sealer pod (127.0.0.1:9464+slot).
# Rules: the chart's PrometheusRule rendered by helm template (PROM_HELM_ARGS adds values).
# Both processes are recorded in the cluster's run/ folder, so hack/cluster.sh down stops them.
prom() {
  local C=$root/_out/cluster P=$root/_out/cluster/prometheus
  mkdir -p "$P/sd" "$P/data"
  # shellcheck disable=SC2086
  helm template sealfleet charts/sealfleet -n "$NS" --set monitoring.enabled=true ${PROM_HELM_ARGS:-} |
    python3 -c '
import sys, yaml
for d in yaml.safe_load_all(sys.stdin):
    if d and d.get("kind") == "PrometheusRule":
        yaml.safe_dump(d["spec"], sys.stdout, sort_keys=False)' > "$P/rules.yaml"
  promtool check rules "$P/rules.yaml" >/dev/null
  # Operator and node agent serve /metrics over HTTPS to tokens allowed to GET it (the chart's
  # metricsSecure): scrape as a ServiceAccount bound to the chart's metrics-reader ClusterRole.
  kc -n "$NS" create serviceaccount sealfleet-demo-prometheus --dry-run=client -o yaml | kc apply -f - >/dev/null
  kc create clusterrolebinding sealfleet-demo-prometheus --clusterrole sealfleet-metrics-reader \
    --serviceaccount "$NS:sealfleet-demo-prometheus" --dry-run=client -o yaml | kc apply -f - >/dev/null
  kc -n "$NS" create token sealfleet-demo-prometheus --duration 24h > "$P/token"
  printf '%s\n' "global: {scrape_interval: 2s, evaluation_interval: 2s}" \
    "rule_files: [\"$P/rules.yaml\"]" "scrape_configs:" > "$P/prometheus.yml"
  local j
  for j in operator node-agent sealer; do
    printf '%s\n' "- job_name: sealfleet-$j" \
      "  file_sd_configs: [{files: [\"$P/sd/$j.json\"], refresh_interval: 2s}]" >> "$P/prometheus.yml"
    # As the chart's ServiceMonitor: the operator's "namespace" label is the SealBatch's, not
    # the operator pod's (without this the rules' batch="<namespace>/<name>" never joins).
    if [ "$j" = operator ]; then echo "  honor_labels: true" >> "$P/prometheus.yml"; fi
    if [ "$j" != sealer ]; then
      printf '%s\n' "  scheme: https" "  tls_config: {insecure_skip_verify: true}" \
        "  authorization: {credentials_file: \"$P/token\"}" >> "$P/prometheus.yml"
    fi
  done
  prom_targets "$P/sd"
  _start prom-targets bash -c "while :; do '$root/hack/demo.sh' prom-targets '$P/sd' >/dev/null 2>&1; sleep 2; done"
  # Already running (a second `prom`): reload the new config and rules.
  if [ -f "$C/run/prometheus.pid" ] && kill -HUP "$(cat "$C/run/prometheus.pid")" 2>/dev/null; then
    say "prometheus reloaded"
  fi
  _start prometheus prometheus --config.file "$P/prometheus.yml" --storage.tsdb.path "$P/data" \
    --web.listen-address 127.0.0.1:19090 --storage.tsdb.retention.time 2h
  local i
  for i in $(seq 50); do curl -sf http://127.0.0.1:19090/-/ready >/dev/null && break; sleep 0.2; done
  curl -sf http://127.0.0.1:19090/-/ready >/dev/null || { tail -20 "$C/logs/prometheus.log" >&2; die "prometheus did not start"; }
  say "prometheus on http://127.0.0.1:19090 (rules $P/rules.yaml, targets $P/sd)"
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

# prom_targets DIR: write the file_sd target files from the cluster's pods.
prom_targets() {
  kc get pods -A -o json | python3 -c '
import json, sys, os
d = sys.argv[1]
def write(name, targets):
    tmp = os.path.join(d, name + ".tmp")
    json.dump(targets, open(tmp, "w"))
    os.replace(tmp, os.path.join(d, name))
out = {"operator": [], "node-agent": [], "sealer": []}
for p in json.load(sys.stdin)["items"]:
    st, md, spec = p.get("status", {}), p["metadata"], p["spec"]
    if st.get("phase") != "Running" or st.get("podIP") != "127.0.0.1":
        continue
    l = md.get("labels", {})
    comp = l.get("app.kubernetes.io/component")
    if comp not in out:
        continue
    ports = [pt["containerPort"] for c in spec["containers"] for pt in c.get("ports", [])
             if pt.get("name") in ("metrics", None) or comp == "sealer"]
    if not ports:
        continue
    labels = {"namespace": md["namespace"], "pod": md["name"], "node": spec.get("nodeName", "")}
    if comp == "sealer":
        labels["batch"] = l.get("sealfleet.io/batch", "")
    out[comp].append({"targets": ["127.0.0.1:%d" % ports[0]], "labels": labels})
for k, v in out.items():
    write(k + ".json", v)
' "$1"
}

all() {
  check || die "this machine cannot run the real-node part of the demo (see above)"
  build
  up
  install
  node
  seal cc-8mib-demo 4
  local rc=0
  compare cc-8mib-demo || rc=$?
  release cc-8mib-demo
  snap cc-8mib-demo snap-8mib-demo
  compare snap-8mib-demo || rc=$?
  release snap-8mib-demo
  COMMIT1=FromSlot seal c1-8mib-demo 2
  seeds c1-8mib-demo
  release c1-8mib-demo
  fleet "${DEMO_BACKLOG:-40}"
  say "done in $(elapsed). The cluster keeps running: eval \"\$(hack/cluster.sh env)\"; kubectl get sealbatches -A"
  say "stop it and give the machine back with: make cluster-down"
  return $rc
}

cmd=${1:-all}; shift || true
case "$cmd" in
  all|build|up|install|node|seal|compare|snap|seeds|release|fleet|check|prom) "$cmd" "$@" ;;
  prom-targets) prom_targets "$@" ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
