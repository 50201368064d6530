#!/usr/bin/env bash
# Fails when the generated code or CRDs differ from what `make generate`
# would write now. Generates into a scratch copy so the work tree is untouched.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

tar -C "$root" --exclude=.git --exclude=.cache --exclude=bin -cf - . | tar -C "$scratch" -xf -
(cd "$scratch" && hack/update-codegen.sh >/dev/null)

generated=(pkg/client pkg/crds/bases charts/orchestratord/files/crds)
while IFS= read -r f; do generated+=("$f"); done < <(cd "$root" && find pkg -name 'zz_generated.*.go')

stale=0
for path in "${generated[@]}"; do
  if ! diff -r "$root/$path" "$scratch/$path" >/dev/null 2>&1; then
    echo "stale: $path" >&2
    diff -r "$root/$path" "$scratch/$path" | head -20 >&2 || true
    stale=1
  fi
done
if [ "$stale" = 1 ]; then
  echo "generated files are stale: run 'make generate' and commit the result" >&2
  exit 1
fi
echo "generated files are up to date"
