#!/usr/bin/env bash
# Proves check-breaking.sh catches a breaking change: in a scratch repository holding a copy of
# proto/ tagged as a release, adding a field passes and removing one fails.
#
#   proto/test-check-breaking.sh BUF
set -euo pipefail
buf=$(realpath "${1:?usage: test-check-breaking.sh BUF}")
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$here" "$scratch/proto"
cd "$scratch"
git init -q . && git add proto
git -c user.name=test -c user.email=test@example.invalid commit -qm release
git tag v0.0.1
file=proto/waymark/v1/workflow.proto
# A field added to a message: compatible.
sed -i '0,/^message GetWorkflowRequest {/s//message GetWorkflowRequest {\n  string added_for_the_test = 900;/' "$file"
grep -q added_for_the_test "$file" || { echo "the test could not add a field"; exit 1; }
"$here/check-breaking.sh" "$buf" "$scratch" >/dev/null || { echo "FAIL: an added field was called breaking"; exit 1; }
# The first field of that message removed: breaking.
git checkout -q -- "$file"
awk 'BEGIN{skip=0} /^message GetWorkflowRequest \{/{print; skip=1; next} skip==1 && /= 1;/{skip=2; next} {print}' "$file" > "$file.new"
mv "$file.new" "$file"
if "$here/check-breaking.sh" "$buf" "$scratch" >/dev/null 2>&1; then
  echo "FAIL: a removed field was not called breaking"
  exit 1
fi
echo "check-breaking: an added field passes, a removed one fails"
