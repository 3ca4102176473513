#!/usr/bin/env bash
# Run HERE: snapshot git refs into .ab/<name>/ (git-ignored) so that one call on the GPU machine
# can build and benchmark them beside the working tree (dev/scripts/device-ab.sh). The GPU machine
# gets the working tree, not the repository, so other commits travel as files.
#   dev/scripts/ab-prepare.sh main next/sinkhorn-by-rows     then run with carry [".deps", ".ab"]
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 REF [REF...]" >&2; exit 2; }
rm -rf .ab && mkdir -p .ab
for ref in "$@"; do
  name=$(echo "$ref" | tr '/' '_')
  commit=$(git rev-parse --short "$ref")
  mkdir -p ".ab/$name"
  git archive "$ref" CMakeLists.txt cmake include src cli tests | tar -x -C ".ab/$name"
  echo "$commit" > ".ab/$name/COMMIT"
  echo "$ref -> .ab/$name ($commit)"
done
du -sh .ab
