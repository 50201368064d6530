#!/usr/bin/env bash
# Builds the project's images without Docker: static linux binaries packed by
# hack/cluster/image into single-layer OCI tarballs under bin/images/ (git
# ignored), for `hack/cluster/cluster.sh load`.
#
#   hack/images/images.sh        build; prints the tarballs, one a line
#
# Images (all tagged :dev):
#   localhost/orchestratord/webhook               cmd/webhook
#   localhost/orchestratord/controllers           cmd/controllers
#   localhost/orchestratord/standin-environmentd  cmd/standin-environmentd: a TEST
#       STAND-IN for environmentd's leader API, NOT Materialize
#   localhost/orchestratord/standin-balancerd     the same stand-in binary, for
#       the Balancer (it honours --internal-http-listen-addr, port 8080)
#   localhost/orchestratord/standin-console       the same stand-in binary on
#       :8080, for the Console (GET / answers 200)
#   localhost/orchestratord/coredns               CoreDNS pinned in
#       hack/tools/coredns, cluster DNS of the local cluster (hack/cluster/dns)
#
# The operator derives the balancerd and console images from the environmentd
# image by swapping "environmentd" in its name, so a Materialize using
# standin-environmentd:dev gets standin-balancerd:dev and standin-console:dev.
#
# Settings (environment): ORCHESTRATORD_CACHE (as hack/kube-binaries.sh) holds
# the CoreDNS binary, built once per version.
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

log "building webhook, controllers, standin-environmentd"
(cd "$root" && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X $module/pkg/version.Version=$version" \
  -o "$build/" ./cmd/webhook ./cmd/controllers ./cmd/standin-environmentd)
coredns=$(build_coredns)

# pack NAME BINARY [ENTRYPOINT]
pack() {
  local name=$1 bin=$2 entry=${3:-} file
  file=/usr/local/bin/$(basename "$bin")
  (cd "$root" && go run ./hack/cluster/image -ref "$prefix/$name:$tag" -file "$file=$bin" \
    -entrypoint "${entry:-$file}" -user 65532:65532 -out "$out/$name.tar")
  echo "$out/$name.tar"
}

pack webhook "$build/webhook"
pack controllers "$build/controllers"
pack standin-environmentd "$build/standin-environmentd"
pack standin-balancerd "$build/standin-environmentd"
pack standin-console "$build/standin-environmentd" "/usr/local/bin/standin-environmentd --listen-address=:8080"
pack coredns "$coredns"
