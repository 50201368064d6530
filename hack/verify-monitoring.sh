#!/usr/bin/env bash
# Checks what the chart ships for monitoring (charts/orchestratord/files/
# monitoring) with Prometheus' own packages (hack/tools/promtool): the alert
# rules load as Prometheus loads them, their unit tests (test/monitoring)
# pass and test every alert firing and not firing, and every query of the
# Grafana dashboard parses. test/chart checks that the metrics they name are
# the ones the programs export.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
promcheck="$("$root/hack/kube-binaries.sh" promcheck)/promcheck"
files="$root/charts/orchestratord/files/monitoring"
"$promcheck" rules "$files/alerts.yaml"
"$promcheck" test "$root/test/monitoring/alerts_test.yaml" >/dev/null
"$promcheck" refs "$files/dashboard.json" >/dev/null
echo "monitoring: alert rules, their unit tests and the dashboard's queries OK"
