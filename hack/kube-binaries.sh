#!/usr/bin/env bash
# Builds the upstream Kubernetes, etcd and Helm binaries pinned in
# hack/tools/{kube,helm,helm4} (and actionlint, hack/tools/actionlint) from the
# Go module proxy into a cache outside the work tree, once. Later calls find
# them and return at once. Also promcheck, the alert rule and dashboard
# checker of hack/tools/promtool, rebuilt when its source changes. Prints the
# directory holding the binaries.
#
#   hack/kube-binaries.sh [binary ...]   (default: etcd kube-apiserver)
#   hack/kube-binaries.sh oldest         etcd and the kube-apiserver of
#       hack/tools/kube-oldest (the oldest release the chart accepts); prints
#       a directory holding the two as etcd and kube-apiserver, for
#       ORCHESTRATORD_KUBE_BIN_DIR
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/hack/tools/kube"
kube_version=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$tools/go.mod")
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$tools/go.mod")
helm_version=$(awk '$1 == "helm.sh/helm/v3" {print $2; exit}' "$root/hack/tools/helm/go.mod")
helm4_version=$(awk '$1 == "helm.sh/helm/v4" {print $2; exit}' "$root/hack/tools/helm4/go.mod")
actionlint_version=$(awk '$1 == "github.com/rhysd/actionlint" {print $2; exit}' "$root/hack/tools/actionlint/go.mod")
# Outside the work tree so that every clone (CI runs a fresh one) shares it.
cache="${ORCHESTRATORD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orchestratord}/kube-${kube_version}-etcd-${etcd_version}-helm-${helm_version}-${helm4_version}"
mkdir -p "$cache"

[ $# -gt 0 ] || set -- etcd kube-apiserver
oldest=false
if [ "$*" = oldest ]; then
  oldest=true
  set -- etcd kube-apiserver-oldest
fi
# Its go.mod requires it on a one-line require directive.
oldest_version=$(awk '($1 == "require" && $2 == "k8s.io/kubernetes") || $1 == "k8s.io/kubernetes" {print ($1 == "require" ? $3 : $2); exit}' "$root/hack/tools/kube-oldest/go.mod")
[ -n "$oldest_version" ] || { echo "kube-binaries: no k8s.io/kubernetes version in hack/tools/kube-oldest/go.mod" >&2; exit 1; }

# Serialise concurrent callers (parallel test packages) on one lock so that
# each binary is built exactly once.
exec 9>"$cache/.lock"
flock 9

# module_sum DIR: the hash of a tools module's go.mod and go.sum.
module_sum() { cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -c1-16; }

version_pkg=k8s.io/component-base/version
ldflags="-s -w -X $version_pkg.gitVersion=$kube_version -X $version_pkg.gitMajor=1"
ldflags+=" -X $version_pkg.gitMinor=$(echo "$kube_version" | cut -d. -f2)"
ldflags+=" -X $version_pkg.gitTreeState=clean"

for bin in "$@"; do
  if [ "$bin" = promcheck ]; then
    # The project's own checker of alert rules and dashboards, not a pinned
    # release: rebuilt whenever its source changes. Built as go vet and go
    # test build its module (make verify runs both), so that the three
    # share one compilation.
    src=$(cat "$root"/hack/tools/promtool/go.mod "$root"/hack/tools/promtool/go.sum "$root"/hack/tools/promtool/*.go | sha256sum | cut -c1-16)
    if [ ! -x "$cache/promcheck" ] || [ "$(cat "$cache/promcheck.source" 2>/dev/null)" != "$src" ]; then
      echo "kube-binaries: building promcheck (hack/tools/promtool) into $cache" >&2
      (cd "$root/hack/tools/promtool" && go build -ldflags "-s -w" -o "$cache/promcheck.tmp" .)
      mv "$cache/promcheck.tmp" "$cache/promcheck"
      echo "$src" > "$cache/promcheck.source"
    fi
    continue
  fi
  # Each binary records what it was built from beside it (a version the
  # directory's name leaves out, or its module's go.mod and go.sum, which
  # hack/align-modules moves), so a change rebuilds only what it touches.
  case "$bin" in
    actionlint) stamp=$actionlint_version ;;
    kube-apiserver-oldest) stamp=$oldest_version ;;
    helm) stamp=$(module_sum "$root/hack/tools/helm") ;;
    helm4) stamp=$(module_sum "$root/hack/tools/helm4") ;;
    *) stamp=$(module_sum "$tools") ;;
  esac
  if [ -x "$cache/$bin" ] && [ "$(cat "$cache/$bin.version" 2>/dev/null)" = "$stamp" ]; then
    continue
  fi
  module="$tools" flags="$ldflags"
  case "$bin" in
    etcd) pkg=go.etcd.io/etcd/server/v3 ;;
    helm) pkg=helm.sh/helm/v3/cmd/helm; module="$root/hack/tools/helm"
          # Helm's default Kubernetes version for template and lint is a
          # link-time setting; make it the version the project runs.
          minor=$(echo "$kube_version" | cut -d. -f2)
          flags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
          for p in pkg/chartutil pkg/lint/rules; do
            flags+=" -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=$minor"
          done ;;
    helm4) pkg=helm.sh/helm/v4/cmd/helm; module="$root/hack/tools/helm4"
           flags="-s -w -X helm.sh/helm/v4/internal/version.version=$helm4_version" ;;
    actionlint) pkg=github.com/rhysd/actionlint/cmd/actionlint; module="$root/hack/tools/actionlint"
                flags="-s -w -X github.com/rhysd/actionlint.version=$actionlint_version" ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy|kubelet|kubectl)
      pkg=k8s.io/kubernetes/cmd/$bin ;;
    kube-apiserver-oldest)
      pkg=k8s.io/kubernetes/cmd/kube-apiserver; module="$root/hack/tools/kube-oldest"
      flags="-s -w -X $version_pkg.gitVersion=$oldest_version -X $version_pkg.gitMajor=1"
      flags+=" -X $version_pkg.gitMinor=$(echo "$oldest_version" | cut -d. -f2) -X $version_pkg.gitTreeState=clean" ;;
    *) echo "kube-binaries: unknown binary $bin" >&2; exit 2 ;;
  esac
  echo "kube-binaries: building $bin ($pkg) into $cache (first time only)" >&2
  (cd "$module" && CGO_ENABLED=0 go build -trimpath -ldflags "$flags" -o "$cache/$bin.tmp" "$pkg")
  mv "$cache/$bin.tmp" "$cache/$bin"
  echo "$stamp" > "$cache/$bin.version"
done
if $oldest; then
  mkdir -p "$cache/oldest"
  ln -sf ../etcd "$cache/oldest/etcd"
  ln -sf ../kube-apiserver-oldest "$cache/oldest/kube-apiserver"
  echo "$cache/oldest"
  exit 0
fi
echo "$cache"
