#!/usr/bin/env bash
# Builds the project's images without Docker: static linux binaries packed by
# hack/cluster/image into single-layer OCI tarballs under bin/images/ (git
# ignored), for `hack/cluster/cluster.sh load`.
#
#   hack/images/images.sh        build; prints the tarballs, one a line
#
# Images:
#   localhost/orchestratord/webhook:dev           cmd/webhook
#   localhost/orchestratord/controllers:dev       cmd/controllers
#   localhost/orchestratord/coredns:dev           CoreDNS pinned in
#       hack/tools/coredns (with the plugins its Corefile uses), cluster DNS
#       of the local cluster (hack/cluster/dns)
#   localhost/orchestratord/metrics-server:dev    metrics-server pinned in
#       hack/tools/metrics-server, the resource metrics API of the local
#       cluster (hack/cluster/metrics-server)
#   localhost/orchestratord/cert-manager-controller:dev  cert-manager's
#       controller pinned in hack/tools/cert-manager (hack/cluster/cert-manager);
#       only with RUN_CERT_MANAGER=1 (`make e2e`; hack/cluster/run.sh)
#   localhost/orchestratord/kube-network-policies:dev  SIG Network's
#       NetworkPolicy agent pinned in hack/tools/kube-network-policies
#       (hack/cluster/network-policies); runs as root
#   localhost/standin/{environmentd,balancerd,console,clusterd}:v26.35.0 and :v26.5.0
#       cmd/standin-environmentd: TEST STAND-INs, NOT Materialize. They parse
#       their command line as the real programs of that version do and refuse
#       what those refuse (STANDIN_PLAYS and STANDIN_VERSION in the image's
#       environment say which program and version).
#
# Like upstream, the operator takes clusterd's, balancerd's and the console's
# images from the environmentd image's repository path and tag, so a
# Materialize on localhost/standin/environmentd:v26.35.0 gets
# localhost/standin/balancerd:v26.35.0, localhost/standin/console:v26.35.0 and
# (environmentd runs it) localhost/standin/clusterd:v26.35.0.
#
# Settings (environment): ORCHESTRATORD_CACHE (as hack/kube-binaries.sh) holds
# the CoreDNS, metrics-server, cert-manager and kube-network-policies binaries, built once
# per version and tools module (go.mod and go.sum; cert-manager's per version;
# metrics-server's and kube-network-policies' also per patch).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cache_root=${ORCHESTRATORD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/orchestratord}
out=$root/bin/images
build=$out/build
prefix=localhost/orchestratord
tag=dev
mkdir -p "$build"

log() { echo "images: $*" >&2; }

version=$(cd "$root" && git describe --tags --always --dirty 2>/dev/null || echo dev)
module=$(cd "$root" && go list -m)

# build_own_main NAME MODULE-DIR MODULE: the main package of a hack/tools
# module itself (CoreDNS with the Corefile's plugins), built once into a
# cache keyed by MODULE's version, the main package's source and the tools
# module's go.mod and go.sum. Prints the binary.
build_own_main() {
  local name=$1 mod=$root/hack/tools/$2 versioned=$3 v dir
  v=$(awk -v p="$versioned" '$1 == p || ($1 == "require" && $2 == p) {print ($1 == "require" ? $3 : $2); exit}' "$mod/go.mod")
  [ -n "$v" ] || { log "no version of $versioned in $mod/go.mod"; exit 1; }
  v=$v-$(cat "$mod"/*.go | sha256sum | cut -c1-12)
  # And by the module's go.mod and go.sum: a change of a dependency
  # (hack/align-modules) rebuilds it.
  dir=$cache_root/$name-$v-$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-8)
  mkdir -p "$dir"
  exec 7>"$dir/.lock"
  flock 7
  if [ ! -x "$dir/$name" ]; then
    log "building $name $v into $dir (first time only, a few minutes)"
    (cd "$mod" && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags '-s -w' -o "$dir/$name.tmp" .)
    mv "$dir/$name.tmp" "$dir/$name"
  fi
  exec 7>&-
  echo "$dir/$name"
}

# cert-manager's controller: built once into a cache keyed by its version.
build_cert_manager() {
  local mod=$root/hack/tools/cert-manager pkg=github.com/cert-manager/cert-manager v dir
  v=$(awk -v p=$pkg '$1 == "require" && $2 == p {print $3; exit}' "$mod/go.mod")
  dir=$cache_root/cert-manager-$v
  mkdir -p "$dir"
  exec 7>"$dir/.lock"
  flock 7
  if [ ! -x "$dir/controller" ]; then
    log "building cert-manager $v's controller into $dir (first time only, a few minutes)"
    (cd "$mod" && CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags "-s -w -X $pkg/pkg/util.AppVersion=$v" -o "$dir/controller.tmp" $pkg/cmd/controller)
    mv "$dir/controller.tmp" "$dir/controller"
  fi
  exec 7>&-
  echo "$dir/controller"
}

# build_patched NAME MODULE-DIR MODULE PACKAGE PATCH: a program of a
# hack/tools module whose pinned release needs a patch (PATCH, in MODULE-DIR,
# says why). MODULE's source is copied and patched outside the module cache,
# and the tools module is built with a replace pointing at the copy. Built
# once into a cache keyed by MODULE's version, the patch and the tools
# module's go.mod and go.sum. Prints the binary.
build_patched() {
  local name=$1 mod=$root/hack/tools/$2 pkg=$3 cmd=$4 patch=$root/hack/tools/$2/$5 v dir src work
  v=$(awk -v p="$pkg" '$1 == p {print $2; exit}' "$mod/go.mod")
  [ -n "$v" ] || { log "no version of $pkg in $mod/go.mod"; exit 1; }
  dir=$cache_root/$name-$v-$(cat "$patch" "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-12)
  mkdir -p "$dir"
  exec 7>"$dir/.lock"
  flock 7
  if [ ! -x "$dir/$name" ]; then
    log "building $name $v (patched) into $dir (first time only, a few minutes)"
    src=$(cd "$mod" && go mod download -json "$pkg@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [ -d "$src" ] || { log "no module directory for $pkg $v"; exit 1; }
    work=$dir/.build
    rm -rf "$work"
    mkdir -p "$work"
    cp -R "$src" "$work/src"
    chmod -R u+w "$work/src"
    (cd "$work/src" && GIT_CEILING_DIRECTORIES=$work git apply "$patch") || exit 1
    cp "$mod/go.mod" "$work/tools.mod"
    cp "$mod/go.sum" "$work/tools.sum"
    go mod edit -replace "$pkg=$work/src" "$work/tools.mod" || exit 1
    (cd "$mod" && CGO_ENABLED=0 GOOS=linux go build -modfile "$work/tools.mod" -trimpath -ldflags '-s -w' \
      -o "$dir/$name.tmp" "$cmd") || exit 1
    mv "$dir/$name.tmp" "$dir/$name"
    rm -rf "$work"
  fi
  exec 7>&-
  echo "$dir/$name"
}

standin_versions=(26.35.0 26.5.0)

log "building webhook, controllers, standin-environmentd"
(cd "$root" && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X $module/pkg/version.Version=$version" \
  -o "$build/" ./cmd/webhook ./cmd/controllers ./cmd/standin-environmentd)
coredns=$(build_own_main coredns coredns github.com/coredns/coredns)
# metrics-server: hack/tools/metrics-server/openapi-model-names.patch says why.
metrics_server=$(build_patched metrics-server metrics-server sigs.k8s.io/metrics-server \
  sigs.k8s.io/metrics-server/cmd/metrics-server openapi-model-names.patch)
cert_manager=
[ "${RUN_CERT_MANAGER:-0}" != 1 ] || cert_manager=$(build_cert_manager)
# kube-network-policies (SIG Network's NetworkPolicy agent: nftables +
# nfqueue): hack/tools/kube-network-policies/xt-nfqueue.patch makes it queue
# through the xtables NFQUEUE target (this machine kind's kernel lacks
# nftables' queue expression).
kube_network_policies=$(build_patched kube-network-policies kube-network-policies sigs.k8s.io/kube-network-policies \
  sigs.k8s.io/kube-network-policies/cmd xt-nfqueue.patch)

# pack REF TARBALL BINARY [IMAGE-OPTION...]: the image runs as 65532:65532
# unless an option says otherwise (-user 0:0: a later -user wins).
pack() {
  local ref=$1 tar=$2 bin=$3 file
  shift 3
  file=/usr/local/bin/$(basename "$bin")
  (cd "$root" && go run ./hack/cluster/image -ref "$ref" -file "$file=$bin" \
    -entrypoint "$file" -user 65532:65532 -out "$out/$tar.tar" "$@")
  echo "$out/$tar.tar"
}

pack "$prefix/webhook:$tag" webhook "$build/webhook"
pack "$prefix/controllers:$tag" controllers "$build/controllers"
pack "$prefix/coredns:$tag" coredns "$coredns"
pack "$prefix/metrics-server:$tag" metrics-server "$metrics_server"
[ -z "$cert_manager" ] || pack "$prefix/cert-manager-controller:$tag" cert-manager-controller "$cert_manager"
# It programs the node's nftables: root (and privileged in its pod).
pack "$prefix/kube-network-policies:$tag" kube-network-policies "$kube_network_policies" -user 0:0
for v in "${standin_versions[@]}"; do
  for plays in environmentd balancerd console clusterd; do
    # The console image is nginx's, which stops on SIGQUIT (graceful).
    stop=()
    [ "$plays" != console ] || stop=(-stop-signal SIGQUIT)
    pack "localhost/standin/$plays:v$v" "standin-$plays-$v" "$build/standin-environmentd" \
      -env STANDIN_PLAYS=$plays -env STANDIN_VERSION=$v "${stop[@]}"
  done
done
