#!/usr/bin/env bash
# Copies the generated CRDs into the Helm chart's templates (not crds/: Helm never upgrades
# that folder), so the chart upgrades them with every release.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dst="$root/charts/sealfleet/templates/crds"
mkdir -p "$dst"
for f in "$root"/config/crd/bases/*.yaml; do
  { echo "{{- if .Values.crds.install }}"; cat "$f"; echo "{{- end }}"; } > "$dst/$(basename "$f")"
done
