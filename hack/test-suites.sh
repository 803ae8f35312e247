#!/usr/bin/env bash
# make test: runs the suites (make targets) in order and ends with a table of what each cost
# (and the e2e's tests), so CI time is read, not guessed. Stops at the first step that fails.
#
#   hack/test-suites.sh test-repo test-go,test-chart+test-sealer test-e2e
#
# A step "a,b+c" runs two lanes side by side: a then b in one, c in the other. The Go envtest
# suites spend most of their time waiting on the API server (the controllers package: ~370 s
# wall for ~90 CPU-s here) while the Rust suite is compile- and hash-bound, so on 2 cores the
# lanes take little more than the Rust suite alone; the first lane keeps the CPU when both want
# it (the other is niced: envtest's waits are timed). Each suite's output goes to
# _out/test/<suite>.log; a step of one suite is also shown live, a laned one when it is done.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p _out/test
names=() secs=() results=()
status=0

run_step() {
  local step=$1 lane start rc
  local -a lanes pids
  if [[ "$step" != *[+,]* ]]; then
    start=$(date +%s)
    make --no-print-directory "$step" 2>&1 | tee "_out/test/$step.log"
    rc=${PIPESTATUS[0]}
    record "$step" "$start" "$rc"
    return "$rc"
  fi
  IFS=+ read -ra lanes <<<"$step"
  local nice=0 i
  for i in "${!lanes[@]}"; do
    lane=${lanes[$i]}
    echo "== lane $((i + 1)): ${lane//,/ then } (output in _out/test/<suite>.log)"
    run_lane "$lane" "$nice" >"_out/test/lane-$i.table" &
    pids+=($!)
    nice=10
  done
  local worst=0 suite
  for i in "${!lanes[@]}"; do
    wait "${pids[$i]}" || worst=$?
    while read -r suite start rc; do
      echo "== $suite: $( [ "$rc" -eq 0 ] && echo ok || echo "FAILED ($rc)"); its output:"
      cat "_out/test/$suite.log"
      names+=("$suite") secs+=("$start") results+=("$( [ "$rc" -eq 0 ] && echo ok || echo "FAILED ($rc)")")
    done <"_out/test/lane-$i.table"
  done
  return "$worst"
}

# run_lane "a,b" NICE: runs a then b (stopping at a failure), printing "suite seconds rc" lines.
run_lane() {
  local -a suites
  local suite start rc
  IFS=, read -ra suites <<<"$1"
  for suite in "${suites[@]}"; do
    start=$(date +%s)
    nice -n "$2" make --no-print-directory "$suite" >"_out/test/$suite.log" 2>&1
    rc=$?
    echo "$suite $(( $(date +%s) - start )) $rc"
    [ "$rc" -eq 0 ] || return "$rc"
  done
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
echo "make test: wall seconds per suite (suites in lanes overlap; logs in _out/test/)"
for i in "${!names[@]}"; do
  printf '  %-14s %6d s  %s\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"
done
printf '  %-14s %6d s\n' total "$(( $(date +%s) - t0 ))"
e2e_logs=()
for i in "${!names[@]}"; do
  [[ "${names[$i]}" == test-e2e* && -f "_out/test/${names[$i]}.log" ]] && e2e_logs+=("_out/test/${names[$i]}.log")
done
if [ ${#e2e_logs[@]} -gt 0 ]; then
  echo "  e2e tests (go test -v):"
  grep -hE '^ *--- (PASS|FAIL|SKIP): Test' "${e2e_logs[@]}" | sed -E 's/^ *--- ([A-Z]+): ([^ ]+) \(([0-9.]+)s\)/\3 \2 \1/' |
    awk '{printf "    %-44s %7.0f s  %s\n", $2, $1, $3}'
fi
exit "$status"
