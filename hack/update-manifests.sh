#!/usr/bin/env bash
# Renders deploy/orchestratord.yaml from the chart with default values, for
# `kubectl apply --server-side` users. `make verify` fails when it is stale.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
helm="$("$root/hack/kube-binaries.sh" helm)/helm"
out="${1:-$root/deploy/orchestratord.yaml}"
{
  echo "# Rendered from charts/orchestratord with default values by 'make manifests'; do not edit."
  echo "# Install: kubectl create namespace orchestratord && kubectl apply --server-side -f deploy/orchestratord.yaml"
  "$helm" template orchestratord "$root/charts/orchestratord" --namespace orchestratord
} > "$out"
