#!/usr/bin/env bash
# Copies the generated CRDs into the Helm chart's templates (not crds/: Helm never upgrades
# that folder), so the chart upgrades them with every release, and the operator's generated
# ClusterRole rules into the chart (templates/operator-rbac.yaml reads files/manager-role.yaml).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dst="$root/charts/sealfleet/templates/crds"
mkdir -p "$dst"
for f in "$root"/config/crd/bases/*.yaml; do
  # crds.keep adds helm.sh/resource-policy: keep, so `helm uninstall` leaves the CRDs (and
  # every SealBatch/SealerNode) in place.
  { echo "{{- if .Values.crds.install }}"
    awk '{ print } /^  annotations:$/ && !done { print "{{- if .Values.crds.keep }}"; print "    helm.sh/resource-policy: keep"; print "{{- end }}"; done = 1 }' "$f"
    echo "{{- end }}"; } > "$dst/$(basename "$f")"
done
mkdir -p "$root/charts/sealfleet/files"
{ echo "# Copied from config/rbac/role.yaml by hack/sync-chart-crds.sh (make manifests); do not edit."
  cat "$root/config/rbac/role.yaml"; } > "$root/charts/sealfleet/files/manager-role.yaml"
