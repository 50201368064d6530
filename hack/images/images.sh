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
#       hack/tools/coredns, cluster DNS of the local cluster (hack/cluster/dns)
#   localhost/orchestratord/cert-manager-controller:dev  cert-manager's
#       controller pinned in hack/tools/cert-manager (hack/cluster/cert-manager)
#   localhost/standin/{environmentd,balancerd,console}:v26.35.0 and :v26.5.0
#       cmd/standin-environmentd: TEST STAND-INs, NOT Materialize. They parse
#       their command line as the real programs of that version do and refuse
#       what those refuse (STANDIN_PLAYS and STANDIN_VERSION in the image's
#       environment say which program and version).
#
# Like upstream, the operator takes clusterd's, balancerd's and the console's
# images from the environmentd image's repository path and tag, so a
# Materialize on localhost/standin/environmentd:v26.35.0 gets
# localhost/standin/balancerd:v26.35.0 and localhost/standin/console:v26.35.0.
#
# Settings (environment): ORCHESTRATORD_CACHE (as hack/kube-binaries.sh) holds
# the CoreDNS and cert-manager binaries, built once per version.
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

# CoreDNS: built once into a cache keyed by its version.
build_coredns() {
  local mod=$root/hack/tools/coredns pkg=github.com/coredns/coredns v dir
  v=$(awk -v p=$pkg '$1 == p {print $2; exit}' "$mod/go.mod")
  dir=$cache_root/coredns-$v
  mkdir -p "$dir"
  exec 7>"$dir/.lock"
  flock 7
  if [ ! -x "$dir/coredns" ]; then
    log "building CoreDNS $v into $dir (first time only, a few minutes)"
    (cd "$mod" && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags '-s -w' -o "$dir/coredns.tmp" $pkg)
    mv "$dir/coredns.tmp" "$dir/coredns"
  fi
  exec 7>&-
  echo "$dir/coredns"
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

standin_versions=(26.35.0 26.5.0)

log "building webhook, controllers, standin-environmentd"
(cd "$root" && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X $module/pkg/version.Version=$version" \
  -o "$build/" ./cmd/webhook ./cmd/controllers ./cmd/standin-environmentd)
coredns=$(build_coredns)
cert_manager=$(build_cert_manager)

# pack REF TARBALL BINARY [IMAGE-OPTION...]
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
pack "$prefix/cert-manager-controller:$tag" cert-manager-controller "$cert_manager"
for v in "${standin_versions[@]}"; do
  for plays in environmentd balancerd console; do
    pack "localhost/standin/$plays:v$v" "standin-$plays-$v" "$build/standin-environmentd" \
      -env STANDIN_PLAYS=$plays -env STANDIN_VERSION=$v
  done
done
