#!/usr/bin/env bash
# The contract against the last release: `buf breaking` (WIRE_JSON, see buf.yaml) between
# proto/ as it is and proto/ at the newest release tag (vX.Y.Z). A change that would break a
# client or worker of that release — a field renumbered or retyped, a method or message gone, a
# JSON name changed — fails `make lint`. Before the first release there is nothing to compare
# with, and it says so.
#
#   proto/check-breaking.sh BUF [REPOSITORY]
set -euo pipefail
buf=$(realpath "${1:?usage: check-breaking.sh BUF [REPOSITORY]}")
cd "${2:-$(dirname "$0")/..}"
last=$(git tag --list 'v[0-9]*' --sort=-v:refname | head -1)
if [ -z "$last" ]; then
  echo "buf breaking: no release tag (v*) yet, so no released contract to compare with"
  exit 0
fi
echo "buf breaking: proto/ against release $last"
"$buf" breaking proto --against ".git#tag=$last,subdir=proto"
