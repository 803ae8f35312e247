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

# Rendered for the oldest Kubernetes the chart supports (Chart.yaml kubeVersion); helm's own
# default (v1.20) is older and refused.
kv=(--kube-version 1.32.0)
echo "== helm lint"
"$helm" lint --strict "$chart" "${kv[@]}"
"$helm" lint --strict "$chart" "${kv[@]}" --set monitoring.enabled=true
echo "== an older cluster is refused"
if "$helm" template sf "$chart" --kube-version 1.31.9 >/dev/null 2>"$tmp/old.err" \
  || ! grep -q "chart requires kubeVersion: >=1.32.0-0" "$tmp/old.err"; then
  echo "hack/test-chart.sh: helm did not refuse Kubernetes 1.31 with the chart's kubeVersion" >&2
  exit 1
fi

echo "== chart README (helm-docs)"
"$root/hack/chart-readme.sh" check

echo "== helm template assertions"
(cd "$root" && HELM="$helm" go test -count=1 ./charts/sealfleet/test/)

echo "== promtool (rules rendered with default values)"
"$helm" template sf "$chart" -n sealfleet-system "${kv[@]}" --set monitoring.enabled=true \
  --show-only templates/monitoring/prometheusrule.yaml \
  | sed -n '/^spec:/,$p' | tail -n +2 | sed 's/^  //' > "$tmp/rules.yaml"
promtool check rules "$tmp/rules.yaml"
cp "$chart/test/rules_test.yaml" "$tmp/"
(cd "$tmp" && promtool test rules rules_test.yaml)
echo "chart tests passed"
