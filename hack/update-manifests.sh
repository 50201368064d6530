#!/usr/bin/env bash
# Renders deploy/orchestratord.yaml from the chart with default values, for
# `kubectl apply --server-side` users. `make verify` fails when it is stale.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
helm="$("$root/hack/kube-binaries.sh" helm)/helm"
out="${1:-$root/deploy/orchestratord.yaml}"
{
  echo "# ==========================================================================="
  echo "# FOR A LOCAL OR TEST CLUSTER ONLY. Rendered from charts/orchestratord with"
  echo "# the chart's DEFAULT values by 'make manifests'; do not edit. The defaults"
  echo "# are a test cluster's: cloudProvider.type=local, region kind (part of every"
  echo "# environment's id, never to be changed later), self-signed webhook TLS, no"
  echo "# NetworkPolicies. For production install the chart with your own values:"
  echo "# docs/quickstart.md and docs/prerequisites.md."
  echo "# ==========================================================================="
  echo "# Install: kubectl create namespace orchestratord && kubectl apply --server-side -f deploy/orchestratord.yaml"
  "$helm" template orchestratord "$root/charts/orchestratord" --namespace orchestratord
} > "$out"
