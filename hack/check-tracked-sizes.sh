#!/usr/bin/env bash
# Fails when a file git tracks is over the size limit (1 MiB): build outputs and data blobs do
# not belong in the repository (every clone, build context and GPU-machine copy carries them).
# A fixture that must be larger is named, with its reason, in hack/large-files.allow.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
limit=${TRACKED_FILE_LIMIT:-1048576}
allow=hack/large-files.allow
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue                       # deleted in the working tree, not yet committed
  size=$(stat -c %s "$f")
  (( size > limit )) || continue
  if [ -f "$allow" ] && grep -v '^#' "$allow" | awk '{print $1}' | grep -qxF -- "$f"; then
    continue
  fi
  echo "hack/check-tracked-sizes.sh: $f is $size bytes, over the $limit-byte limit for tracked files: remove it (git rm --cached '$f'; ignore it in .gitignore if it is a build output), or name it in $allow with the reason it must be tracked" >&2
  bad=1
done < <(git ls-files -z)
[ "$bad" = 0 ] && echo "tracked files: none over $limit bytes"
exit "$bad"
