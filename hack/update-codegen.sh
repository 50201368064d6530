#!/usr/bin/env bash
# Regenerates deepcopy functions, the typed clientset, listers, informers,
# apply configurations and the CRD manifests from the API types. Every
# generator is pinned as a Go tool dependency in go.mod.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
module=$(go list -m)
header=hack/boilerplate.go.txt
apis=(
  "$module/pkg/apis/materialize/v1alpha1"
  "$module/pkg/apis/materialize/v1"
)
client=pkg/client

go tool deepcopy-gen --go-header-file "$header" --output-file zz_generated.deepcopy.go "${apis[@]}"

rm -rf "$client"
go tool applyconfiguration-gen --go-header-file "$header" \
  --output-dir "$client/applyconfiguration" --output-pkg "$module/$client/applyconfiguration" \
  "${apis[@]}"
go tool client-gen --go-header-file "$header" \
  --clientset-name versioned --input-base "" \
  $(printf -- '--input %s ' "${apis[@]}") \
  --apply-configuration-package "$module/$client/applyconfiguration" \
  --output-dir "$client/clientset" --output-pkg "$module/$client/clientset"
go tool lister-gen --go-header-file "$header" \
  --output-dir "$client/listers" --output-pkg "$module/$client/listers" \
  "${apis[@]}"
go tool informer-gen --go-header-file "$header" \
  --versioned-clientset-package "$module/$client/clientset/versioned" \
  --listers-package "$module/$client/listers" \
  --output-dir "$client/informers" --output-pkg "$module/$client/informers" \
  "${apis[@]}"

crds=pkg/crds/bases
rm -f "$crds"/*.yaml
go tool controller-gen crd:crdVersions=v1 paths=./pkg/apis/... output:crd:artifacts:config="$crds"
# controller-gen cannot express a conversion webhook; add it (see hack/crd-conversion).
go run ./hack/crd-conversion "$crds/materialize.cloud_materializes.yaml"
# Bound what one object can cost its readers: quantities, lists and maps
# (see hack/crd-bounds).
go run ./hack/crd-bounds "$crds"/materialize.cloud_{materializes,balancers,consoles}.yaml
# The chart installs the same CRDs (Helm reads files only inside the chart).
chart_crds=charts/orchestratord/files/crds
rm -f "$chart_crds"/*.yaml
mkdir -p "$chart_crds"
cp "$crds"/*.yaml "$chart_crds"/
