#!/usr/bin/env bash
# Builds every release artifact into OUT from a server binary and this checkout:
#
#   dist.sh BINARY VERSION OUT
#
#   waymark-V-x86_64-unknown-linux-gnu.tar.gz   the binary, LICENSE, README.md, CHANGELOG.md, docs/
#   waymark_server-V-py3-none-manylinux_*.whl   the binary as the `waymark` script (pip, pipx)
#   waymark-server-V.tgz                        the binary and a launcher (npm, npx)
#   waymark_sdk-V-py3-none-any.whl, .tar.gz     the Python SDK (python -m build)
#   waymark-sdk-V.tgz                           the TypeScript SDK (npm pack; prepack builds dist/)
#   SHA256SUMS                                  every file above
#
# The SDKs are built from copies of their folders (the files git tracks or would track), not
# in place, so a build leaves the checkout as it was and sees no stale build output.
set -euo pipefail

binary=$(realpath "$1")
version=$2
out=$(realpath -m "$3")
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
target=x86_64-unknown-linux-gnu
# The Python package that builds the SDK's wheel and sdist, in a venv of its own.
BUILD_VERSION=1.6.1

say() { printf '\n== %s\n' "$*"; }

[ -x "$binary" ] || { echo "dist: no executable server binary at $binary" >&2; exit 1; }
objdump -f "$binary" | grep -q 'elf64-x86-64' || { echo "dist: $binary is not an x86-64 ELF binary" >&2; exit 1; }
got=$("$binary" --version)
[ "$got" = "waymark $version" ] || { echo "dist: $binary says '$got', not 'waymark $version'" >&2; exit 1; }

# Every artifact carries the workspace's version: the SDKs' own must agree.
py_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/sdk-clients/python/pyproject.toml")
ts_version=$(node -p "require('$root/sdk-clients/typescript/package.json').version")
for v in "python SDK (pyproject.toml):$py_version" "TypeScript SDK (package.json):$ts_version"; do
  [ "${v##*:}" = "$version" ] || { echo "dist: the ${v%:*} is version ${v##*:}, the workspace $version" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/waymark-dist.XXXXXX")
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
mkdir -p "$out"

# copy_tree SRC DEST: the files git tracks under SRC or would track (untracked, not ignored).
copy_tree() {
  mkdir -p "$2"
  (cd "$1" && git ls-files -z --cached --others --exclude-standard -- . |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    xargs -0 cp --parents -t "$2")
}

say "server archive"
name=waymark-$version-$target
mkdir -p "$work/archive/$name"
install -m 0755 "$binary" "$work/archive/$name/waymark"
install -m 0644 "$root/LICENSE" "$root/README.md" "$root/CHANGELOG.md" "$work/archive/$name/"
# The README links into docs/: the guides travel with it.
copy_tree "$root/docs" "$work/archive/$name/docs"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@"${SOURCE_DATE_EPOCH:-315532800}" \
  -C "$work/archive" -czf "$out/$name.tar.gz" "$name"
echo "$out/$name.tar.gz"

say "server wheel"
python3 "$here/build_server_wheel.py" "$binary" "$version" "$out"

say "server npm package"
glibc=$(objdump -T "$binary" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1 | cut -d. -f1,2)
pkg=$work/server-npm
mkdir -p "$pkg/bin" "$pkg/native"
install -m 0755 "$here/server-npm/bin/waymark-server.js" "$pkg/bin/"
install -m 0755 "$binary" "$pkg/native/waymark"
install -m 0644 "$here/server-npm/README.md" "$root/LICENSE" "$pkg/"
printf '{ "platform": "linux", "arch": "x64", "glibc": "%s" }\n' "$glibc" > "$pkg/native/target.json"
cat > "$pkg/package.json" <<JSON
{
  "name": "waymark-server",
  "version": "$version",
  "description": "The Waymark durable-execution server (the waymark binary and its CLI) for Linux x64: npx waymark-server server",
  "keywords": ["durable execution", "workflows", "grpc", "waymark"],
  "license": "Apache-2.0",
  "homepage": "https://github.com/waymark-dev/waymark",
  "bin": { "waymark-server": "bin/waymark-server.js", "waymark": "bin/waymark-server.js" },
  "files": ["bin", "native", "README.md", "LICENSE"],
  "os": ["linux"],
  "cpu": ["x64"],
  "engines": { "node": ">=18" }
}
JSON
(cd "$pkg" && npm pack --silent --pack-destination "$out") | sed "s#^#$out/#"

say "Python SDK (wheel and sdist)"
venv=$root/.tmp/packaging-venv
if ! "$venv/bin/python" -c "import build; assert build.__version__ == '$BUILD_VERSION'" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "build==$BUILD_VERSION"
fi
copy_tree "$root/sdk-clients/python" "$work/python"
cp "$root/LICENSE" "$work/python/"
"$venv/bin/python" -m build --outdir "$out" "$work/python" > "$work/python-build.log" 2>&1 ||
  { cat "$work/python-build.log"; exit 1; }
tail -1 "$work/python-build.log"

say "TypeScript SDK (npm pack)"
sdk=$root/sdk-clients/typescript
[ -x "$sdk/node_modules/.bin/tsc" ] || { echo "dist: run 'make -C sdk-clients/typescript deps' first" >&2; exit 1; }
copy_tree "$sdk" "$work/typescript"
cp "$root/LICENSE" "$work/typescript/"
rm -rf "$work/typescript/dist"
ln -s "$sdk/node_modules" "$work/typescript/node_modules"
(cd "$work/typescript" && npm pack --silent --pack-destination "$out") | sed "s#^#$out/#"

say "SHA256SUMS"
(cd "$out" && sha256sum -- * > SHA256SUMS && cat SHA256SUMS)

say "artifacts"
(cd "$out" && for f in *; do printf '%10s  %s\n' "$(numfmt --to=iec-i --suffix=B "$(stat -c %s "$f")")" "$f"; done)
