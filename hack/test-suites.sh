#!/usr/bin/env bash
# make test: runs each suite (a make target) in turn, stops at the first that fails, and ends
# with a table of what each suite cost (and the e2e's subtests), so CI time is read, not guessed.
# Each suite's output goes to the terminal and to _out/test/<suite>.log.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p _out/test
names=() secs=() results=()
status=0
for suite in "$@"; do
  start=$(date +%s)
  make --no-print-directory "$suite" 2>&1 | tee "_out/test/$suite.log"
  rc=${PIPESTATUS[0]}
  names+=("$suite") secs+=($(( $(date +%s) - start )))
  if [ "$rc" -ne 0 ]; then results+=("FAILED ($rc)"); status=$rc; break; fi
  results+=(ok)
done
echo
echo "make test: seconds per suite (logs in _out/test/)"
total=0
for i in "${!names[@]}"; do
  printf '  %-14s %6d s  %s\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"
  total=$(( total + secs[i] ))
done
printf '  %-14s %6d s\n' total "$total"
if [ -f _out/test/test-e2e.log ] && [[ " ${names[*]} " == *" test-e2e "* ]]; then
  echo "  e2e tests (go test -v):"
  grep -E '^ *--- (PASS|FAIL|SKIP): Test' _out/test/test-e2e.log | sed -E 's/^ *--- ([A-Z]+): ([^ ]+) \(([0-9.]+)s\)/\3 \2 \1/' |
    awk '{printf "    %-40s %7.0f s  %s\n", $2, $1, $3}'
fi
exit "$status"
