#!/usr/bin/env bash
# The prepared GPU measurement: the GPU engine's kernels and PC2 on a lent H100/H200, in one
# command, its figures kept as one JSON file (sealer-image/bench/gpu/README.md says its keys).
#
#   hack/gpu-bench.sh pack          here, no GPU needed: build the sealer (with filecoin-proofs'
#                                   GPU path, the fil-gpu feature) and pack .gpu-bench/ (the
#                                   binary, ocl-icd's libOpenCL.so.1, an ICD file naming
#                                   NVIDIA's OpenCL driver, the commit)
#   hack/gpu-bench.sh run           there: device list, kernel rates per arity, `bench pc2` at
#                                   8 MiB x 8 (against filecoin-proofs on the CPU, and its GPU
#                                   path as the peer) and 512 MiB x 8 (--random-layers; the
#                                   peer's Poseidon rates); writes gpu-run.json and the raw outputs
#                                   under $OUT (the device tool's), else _out/gpu-bench/
#   hack/gpu-bench.sh run --quick   the same flow at test sizes on whatever OpenCL device is
#                                   listed first (pocl's CPU device here): make test runs it
#   hack/gpu-bench.sh run --pc2     the PC2 steps alone (a rerun after a PC2 change, when the
#                                   kernels were measured at the same commit)
#
# On the device tool: run(command="bash hack/gpu-bench.sh run", carry=[".gpu-bench"],
# timeout_s=420). It takes about 5 minutes on an H200: each step has its own timeout, and a step that
# fails or times out is recorded in gpu-run.json while the others go on.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pack="$root/.gpu-bench"

pack() {
  set -e
  # fil-gpu: filecoin-proofs' own GPU path as `bench pc2`'s peer row (links libOpenCL).
  (cd "$root/sealer-image" && cargo build --release --locked -p sealer --features fil-gpu)
  local loader
  loader=$(ldconfig -p | awk '$1 == "libOpenCL.so.1" { print $NF; exit }')
  [ -n "$loader" ] || { echo "no libOpenCL.so.1 here: run hack/host-deps.sh (ocl-icd)" >&2; exit 1; }
  rm -rf "$pack"
  mkdir -p "$pack/lib" "$pack/vendors"
  cp "$root/sealer-image/target/release/sealer" "$pack/"
  cp -L "$loader" "$pack/lib/libOpenCL.so.1"
  # The GPU machines' images list only pocl in /etc/OpenCL/vendors; NVIDIA's driver is there.
  echo libnvidia-opencl.so.1 >"$pack/vendors/nvidia.icd"
  local commit
  commit=$(git -C "$root" rev-parse --short HEAD)
  git -C "$root" diff --quiet HEAD -- sealer-image || commit="$commit+changes"
  echo "$commit" >"$pack/commit"
  echo "packed $(du -sh "$pack" | cut -f1) into $pack (commit $commit)"
}

profile() { # dir of <variant>-arity<n>.bin
  local ptxas cuobjdump arch
  ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | head -1)
  cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
  [ -n "$ptxas" ] && [ -n "$cuobjdump" ] || { echo "no ptxas/cuobjdump here: no profile"; return 0; }
  arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
  for bin in "$1"/*.bin; do
    head -c 400 "$bin" | grep -q '.version' || { echo "== $bin: not PTX"; continue; }
    echo "== $(basename "$bin" .bin)"
    tr -d '\000' <"$bin" >"$bin.ptx" # the driver's copy ends in a NUL
    "$ptxas" -arch="$arch" -v "$bin.ptx" -o "$bin.cubin" >"$bin.log" 2>&1 || { head -5 "$bin.log"; continue; }
    grep -E 'registers|spill' "$bin.log" | sed 's/^ptxas info *: //'
    "$cuobjdump" -sass "$bin.cubin" | awk '$1 ~ /^\/\*[0-9a-f]+\*\/$/ { op = $2; if (op ~ /^@/) op = $3; sub(/;$/, "", op); n[op]++; t++ }
      END { printf "sass instructions %d:", t; for (o in n) printf " %s=%d", o, n[o]; printf "\n" }'
  done
}

run() {
  local quick=${1:-} pc2_only=""
  if [ "$quick" = --pc2 ]; then
    quick="" pc2_only=1
  fi
  local out=${OUT:-$root/_out/gpu-bench}
  mkdir -p "$out"
  local sealer="$pack/sealer"
  [ -x "$sealer" ] || { echo "no $sealer: run hack/gpu-bench.sh pack first (and carry .gpu-bench)" >&2; exit 1; }
  local work=/dev/shm/sealfleet-gpu-bench
  rm -rf "$work" "$work-meta"
  # What only this script reads stays out of $OUT (the device tool brings back 8 files).
  local meta=$work-meta
  mkdir -p "$meta"
  export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local kernels_args=(--groups 2097152 --runs 3 --local-sizes 32,64,128,256 --max-registers 64,96) small=(--sector-size 8MiB --batch 8) big=(--sector-size 512MiB --batch 8)
  local shape=(--leaves-log2 27 --layers 11 --samples 4096) copies=(--mib 4096)
  if [ "$quick" = --quick ]; then
    kernels_args=(--groups 1024 --runs 1 --local-sizes 64 --max-registers 64)
    copies=(--mib 16)
    small=(--sector-size 2KiB --batch 2 --rate-hashes 256)
    big=(--sector-size 2KiB --batch 2 --rate-hashes 256)
    shape=(--leaves-log2 12 --layers 11 --samples 64 --range-log2 9)
  else
    export OCL_ICD_VENDORS="$pack/vendors"
  fi
  "$sealer" capabilities >"$meta/capabilities.json" 2>"$out/bench.log"
  # The first GPU (or, with --quick, the first device of any kind).
  local index
  index=$(python3 -c '
import json, sys
devs = json.load(open(sys.argv[1]))["opencl_devices"]
gpus = [d for d in devs if d["kind"] == "gpu" or sys.argv[2] == "--quick"]
print(gpus[0]["index"] if gpus else "")' "$meta/capabilities.json" "$quick")
  if [ -z "$index" ]; then
    cp "$meta/capabilities.json" "$out/"
    echo "no OpenCL GPU listed (see $out/capabilities.json)" >&2
    exit 1
  fi
  export SEALER_GPU_DEVICE=$index
  local smi=""
  command -v nvidia-smi >/dev/null && smi=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
  # The PCIe link the copies cross: generation and width, now and at most.
  local link=""
  command -v nvidia-smi >/dev/null && link=$(nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader 2>/dev/null | head -1)
  : >"$meta/steps.txt"
  step() { # name, timeout seconds, command...: stdout to $out/<name>; "name exit seconds" to steps.txt
    local name=$1 limit=$2 start
    start=$(date +%s)
    shift 2
    echo "== $name: $*" >>"$out/bench.log"
    if declare -F "$1" >/dev/null; then # a function of this script
      timeout "$limit" bash -c "$(declare -f "$1"); \"\$@\"" _ "$@" >"$out/$name" 2>>"$out/bench.log"
    else
      timeout "$limit" "$@" >"$out/$name" 2>>"$out/bench.log"
    fi
    echo "$name $? $(($(date +%s) - start))" >>"$meta/steps.txt"
  }
  if [ -z "$pc2_only" ]; then
    # Host-to-device copies along each path the engine could take, to tell them from the bus.
    step copies.json 120 "$sealer" bench gpu-copies "${copies[@]}"
    step kernels.json 240 "$sealer" bench gpu-kernels "${kernels_args[@]}" --binaries "$work/bin"
    # The profile: each variant's registers and spills (ptxas -v) and its instruction mix
    # (cuobjdump -sass), where NVIDIA's tools are installed; the binaries are PTX there.
    step profile.txt 60 profile "$work/bin"
  fi
  step pc2-small.txt 180 "$sealer" bench pc2 "${small[@]}" --engine gpu --dir "$work"
  step pc2-big.txt 150 "$sealer" bench pc2 "${big[@]}" --engine gpu --skip-cpu --random-layers --dir "$work"
  step pc2-shape.txt 150 "$sealer" bench pc2-shape "${shape[@]}"
  python3 - "$out" "$(cat "$pack/commit")" "$smi" "$quick" "$meta" "$link" <<'EOF'
import json, os, sys, datetime
out, commit, smi, quick, meta, link = sys.argv[1:7]
steps = {l.split()[0]: l.split()[1:] for l in open(os.path.join(meta, "steps.txt")) if l.strip()}
def rc(name):
    if name not in steps:
        return {"exit": None, "seconds": 0}  # not run (--pc2)
    code, secs = steps[name]
    return {"exit": int(code), "seconds": int(secs)}
def pc2(name):
    text = open(os.path.join(out, name)).read()
    rows = [json.loads(l.split(" ", 1)[1]) for l in text.splitlines() if l.startswith("BENCH_PC2_JSON ")]
    return {"rows": rows[0] if rows else [], **rc(name)}
def shape():
    text = open(os.path.join(out, "pc2-shape.txt")).read()
    rows = [json.loads(l.split(" ", 1)[1]) for l in text.splitlines() if l.startswith("BENCH_PC2_SHAPE_JSON ")]
    return {"report": rows[0] if rows else None, **rc("pc2-shape.txt")}
caps = json.load(open(os.path.join(meta, "capabilities.json")))
dev = next(d for d in caps["opencl_devices"] if d["index"] == int(os.environ["SEALER_GPU_DEVICE"]))
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (ValueError, OSError):
        return None
kernels = load("kernels.json")
card, driver = (smi.split(", ")[:2] + ["", ""])[:2] if smi else (dev["name"], dev["driver"])
run = {
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "commit": commit,
    "card": card,
    "driver": driver,
    "quick": quick == "--quick",
    "device": dev,
    "kernels": {"report": kernels, **rc("kernels.json")},
    "copies": {"report": load("copies.json"), **rc("copies.json")},
    "pcie_link": dict(zip(("gen", "width", "max_gen", "max_width"), (x.strip() for x in link.split(",")))) if link else None,
    "profile": {"lines": open(os.path.join(out, "profile.txt")).read().splitlines() if "profile.txt" in steps else [], **rc("profile.txt")},
    "pc2_small": pc2("pc2-small.txt"),
    "pc2_big_random_layers": pc2("pc2-big.txt"),
    "pc2_32gib_shape": shape(),
    "predicted_poseidon_seconds_per_32gib_sector":
        kernels["predicted_poseidon_seconds_per_32gib_sector"] if kernels else None,
}
# The filecoin-proofs GPU peer, per PC2 step: its speed-ups, or why it has no figures.
def peer(step):
    row = next((r for r in run[step]["rows"] if r.get("engine") == "filecoin-proofs-gpu"), None)
    if row is None:
        return None
    if "error" in row:
        return {"error": row["error"]}
    return {k: row[k] for k in ("device", "sealfleet_gpu_speedup_per_sector", "sealfleet_gpu_speedup_32gib")}
run["sealfleet_gpu_vs_filecoin_proofs_gpu"] = {step: peer(step) for step in ("pc2_small", "pc2_big_random_layers")}
# Every PC2 step that ran has the peer's row (its figures or its error): the peer is built in.
missing = [s for s, p in run["sealfleet_gpu_vs_filecoin_proofs_gpu"].items() if p is None and run[s]["exit"] == 0]
if missing:
    print("no filecoin-proofs GPU row in", missing, "(is the pack built with --features fil-gpu?)", file=sys.stderr)
json.dump(run, open(os.path.join(out, "gpu-run.json"), "w"), indent=2)
print(json.dumps({k: run[k] for k in ("date", "commit", "card", "driver", "predicted_poseidon_seconds_per_32gib_sector", "sealfleet_gpu_vs_filecoin_proofs_gpu")}))
for key in ("copies", "kernels", "pc2_small", "pc2_big_random_layers", "pc2_32gib_shape"):
    print(key, "exit", run[key]["exit"], "in", run[key]["seconds"], "s")
failed = [k for k in ("copies", "kernels", "pc2_small", "pc2_big_random_layers", "pc2_32gib_shape") if run[k]["exit"] not in (0, None)]
sys.exit(1 if failed or missing else 0)
EOF
  local rc=$?
  rm -rf "$work" "$work-meta"
  return $rc
}

case "${1:-}" in
  pack) pack ;;
  run) run "${2:-}" ;;
  *) echo "usage: hack/gpu-bench.sh pack | run [--quick]" >&2; exit 2 ;;
esac
