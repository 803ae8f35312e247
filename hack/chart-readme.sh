#!/usr/bin/env bash
# The chart's README, charts/sealfleet/README.md, rendered by helm-docs (pinned in
# hack/versions.env, built from the Go module proxy) from charts/sealfleet/README.md.gotmpl and
# the `# --` comments of charts/sealfleet/values.yaml, so `helm show readme` documents every
# value `helm show values` shows, with the same defaults.
#   hack/chart-readme.sh generate   write charts/sealfleet/README.md
#   hack/chart-readme.sh check      fail when charts/sealfleet/README.md is not what they render
# Both fail when a value has no description in the table (give it a `# --` comment, or its
# parent block one).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
chart="$root/charts/sealfleet"
readme=charts/sealfleet/README.md
mode=${1:-}
case "$mode" in
  generate|check) ;;
  *) echo "usage: hack/chart-readme.sh generate|check" >&2; exit 2 ;;
esac

"$root/hack/tools.sh" helm-docs || { echo "hack/chart-readme.sh: could not build bin/helm-docs (hack/tools.sh helm-docs)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Render from a copy of only what helm-docs reads, so nothing is written into the chart but the
# README itself (and the check leaves it alone).
mkdir -p "$tmp/charts/sealfleet"
cp "$chart/Chart.yaml" "$chart/values.yaml" "$chart/README.md.gotmpl" "$tmp/charts/sealfleet/"
(cd "$tmp/charts" && "$root/bin/helm-docs" --chart-search-root=. --log-level=warning \
  --template-files=README.md.gotmpl --output-file=README.md --sort-values-order=file)
out="$tmp/charts/sealfleet/README.md"
[ -s "$out" ] || { echo "hack/chart-readme.sh: helm-docs wrote no README" >&2; exit 1; }

# A table row whose description cell is empty: a value helm-docs found no `# --` comment for.
undocumented=$(awk -F' \\| ' '/^\| / && $0 ~ / \|  \|$/ {sub(/^\| /, "", $1); print "  " $1}' "$out")
if [ -n "$undocumented" ]; then
  echo "hack/chart-readme.sh: values without a description in charts/sealfleet/values.yaml (add a '# --' comment above the key or its block):" >&2
  echo "$undocumented" >&2
  exit 1
fi

if [ "$mode" = check ]; then
  if ! cmp -s "$out" "$root/$readme"; then
    echo "$readme is stale: run hack/chart-readme.sh generate" >&2
    current="$root/$readme"; [ -f "$current" ] || current=/dev/null
    diff -u --label "a/$readme" --label "b/$readme (generated)" "$current" "$out" >&2 || true
    exit 1
  fi
  echo "$readme is up to date"
  exit 0
fi
cp "$out" "$root/$readme"
echo "wrote $readme"
