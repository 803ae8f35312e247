#!/usr/bin/env bash
# make test: runs the suites (make targets) in order and ends with a table of what each cost
# (and the e2e's tests), so CI time is read, not guessed. Stops at the first step that fails.
#
#   hack/test-suites.sh test-repo test-go+test-sealer test-chart test-e2e
#
# A step "a+b" runs its suites side by side: the Go envtest suites spend most of their time
# waiting on the API server (the controllers package: ~370 s wall for ~90 CPU-s here) while the
# Rust suite is compile- and hash-bound, so on 2 cores the pair takes little more than the Rust
# suite alone. Each suite's output goes to _out/test/<suite>.log; a suite that runs alone is
# also shown live, a paired one is shown when the pair is done.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p _out/test
names=() secs=() results=()
status=0

run_step() {
  local step=$1 suite pid start rc
  local -a suites pids
  IFS=+ read -ra suites <<<"$step"
  if [ "${#suites[@]}" -eq 1 ]; then
    start=$(date +%s)
    make --no-print-directory "$step" 2>&1 | tee "_out/test/$step.log"
    rc=${PIPESTATUS[0]}
    record "$step" "$start" "$rc"
    return "$rc"
  fi
  declare -A started=()
  local nice=0
  for suite in "${suites[@]}"; do
    echo "== $suite (beside ${step//+/, }; output in _out/test/$suite.log)"
    started[$suite]=$(date +%s)
    # The first suite of a pair keeps the CPU when both want it (envtest's waits are timed).
    nice -n "$nice" make --no-print-directory "$suite" >"_out/test/$suite.log" 2>&1 &
    pids+=($!)
    nice=10
  done
  local worst=0 i
  for i in "${!suites[@]}"; do
    wait "${pids[$i]}"
    rc=$?
    suite=${suites[$i]}
    echo "== $suite: $( [ "$rc" -eq 0 ] && echo ok || echo "FAILED ($rc)"); its output:"
    cat "_out/test/$suite.log"
    record "$suite" "${started[$suite]}" "$rc"
    [ "$rc" -eq 0 ] || worst=$rc
  done
  return "$worst"
}

# record SUITE START RC: its row of the table (wall seconds from its start to now).
record() {
  names+=("$1") secs+=($(( $(date +%s) - $2 )))
  if [ "$3" -eq 0 ]; then results+=(ok); else results+=("FAILED ($3)"); fi
}

t0=$(date +%s)
for step in "$@"; do
  run_step "$step" || { status=$?; break; }
done
echo
echo "make test: wall seconds per suite (paired suites overlap; logs in _out/test/)"
for i in "${!names[@]}"; do
  printf '  %-14s %6d s  %s\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"
done
printf '  %-14s %6d s\n' total "$(( $(date +%s) - t0 ))"
if [ -f _out/test/test-e2e.log ] && [[ " ${names[*]} " == *" test-e2e "* ]]; then
  echo "  e2e tests (go test -v):"
  grep -E '^ *--- (PASS|FAIL|SKIP): Test' _out/test/test-e2e.log | sed -E 's/^ *--- ([A-Z]+): ([^ ]+) \(([0-9.]+)s\)/\3 \2 \1/' |
    awk '{printf "    %-44s %7.0f s  %s\n", $2, $1, $3}'
fi
exit "$status"
