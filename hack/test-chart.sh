#!/usr/bin/env bash
# Tests the Helm chart: helm lint, helm template assertions (charts/sealfleet/test, Go), and
# the Prometheus rules rendered from charts/sealfleet/files/rules.yaml: promtool check rules
# and promtool test rules (charts/sealfleet/test/rules_test.yaml). Needs bin/helm
# (hack/tools.sh helm) and promtool (Debian package prometheus; hack/host-deps.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
chart="$root/charts/sealfleet"
helm="${HELM:-$root/bin/helm}"
[ -x "$helm" ] || { echo "hack/test-chart.sh: $helm not found; run hack/tools.sh helm" >&2; exit 1; }
command -v promtool >/dev/null || { echo "hack/test-chart.sh: promtool not found; apt-get install prometheus (hack/host-deps.sh)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== helm lint"
"$helm" lint --strict "$chart"
"$helm" lint --strict "$chart" --set monitoring.enabled=true

echo "== helm template assertions"
(cd "$root" && HELM="$helm" go test -count=1 ./charts/sealfleet/test/)

echo "== promtool (rules rendered with default values)"
"$helm" template sf "$chart" -n sealfleet-system --set monitoring.enabled=true \
  --show-only templates/monitoring/prometheusrule.yaml \
  | sed -n '/^spec:/,$p' | tail -n +2 | sed 's/^  //' > "$tmp/rules.yaml"
promtool check rules "$tmp/rules.yaml"
cp "$chart/test/rules_test.yaml" "$tmp/"
(cd "$tmp" && promtool test rules rules_test.yaml)
echo "chart tests passed"
