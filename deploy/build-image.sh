#!/usr/bin/env bash
# Builds the Waymark container image without a Docker engine and without any base image.
#
# A root filesystem is put together from nothing: the waymark binary, the shared libraries `ldd`
# names for it (and the dynamic loader), /etc/passwd and /etc/group holding the non-root user,
# the CA bundle, /data owned by that user, and /tmp. umoci turns it into an OCI image (one
# layer) and writes its configuration: user, entrypoint, cmd, ports, volume, env, labels — the
# same as deploy/Dockerfile's runtime stage, which is what an engine would build.
#
# Output, under $OUT (deploy/out by default):
#   oci/                        OCI image layout, tagged with the workspace version
#   waymark-<version>.oci.tar   the same as an oci-archive (podman load, skopeo copy, crane)
#   waymark-<version>.docker.tar  with DOCKER_ARCHIVE=1: a docker-archive (`docker load -i`)
#
# Variables: WAYMARK_BIN (the binary to ship, default target/release/waymark), OUT,
# DOCKER_ARCHIVE, SOURCE_DATE_EPOCH (default: the last commit's time).
# Needs root (files in the layer are owned by root and by uid 10001), umoci and skopeo.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
BIN=${WAYMARK_BIN:-$repo/target/release/waymark}
OUT=${OUT:-$here/out}
UID_GID=10001
NAME=waymark

die() { echo "build-image: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root: the layer records file owners (root and $UID_GID)"
for t in umoci skopeo ldd; do command -v "$t" >/dev/null || die "$t is missing (make -C deploy tools)"; done
[ -x "$BIN" ] || die "no binary at $BIN (set WAYMARK_BIN)"

# The version the workspace declares ([workspace.package] version in Cargo.toml).
VERSION=$(awk '/^\[workspace.package\]/{p=1; next} /^\[/{p=0} p && /^version *=/{gsub(/[" ]/,"",$0); sub(/^version=/,"",$0); print; exit}' "$repo/Cargo.toml")
[ -n "$VERSION" ] || die "no version under [workspace.package] in Cargo.toml"
bin_version=$("$BIN" --version | awk '{print $2}')
[ "$bin_version" = "$VERSION" ] || echo "build-image: note: the binary says $bin_version, Cargo.toml $VERSION" >&2
REVISION=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
# Every timestamp in the image is the commit's, so the same binary gives the same layer.
EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo 0)}
CREATED=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)

work=$OUT/work
rm -rf "$work" "$OUT/oci" "$OUT/$NAME-$VERSION".*.tar
mkdir -p "$work/stage"
root=$work/stage

# --- the root filesystem -------------------------------------------------------------------
install -d -m 0755 "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/etc/waymark/tls"
install -d -m 1777 "$root/tmp"
install -d -m 0750 "$root/data"
chown "$UID_GID:$UID_GID" "$root/data"
install -m 0755 "$BIN" "$root/usr/local/bin/waymark"

# Exactly what the loader will ask for: every path ldd prints (the vDSO has none), copied to the
# same path, symlinks followed.
libs=$(ldd "$BIN" | awk '/=>/ {print $3; next} $1 ~ /^\// {print $1}' | grep '^/' | sort -u)
[ -n "$libs" ] || die "ldd listed no libraries for $BIN (a static binary needs none: remove this check)"
for lib in $libs; do
  install -d -m 0755 "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
  chmod 0755 "$root$lib"
done

cat > "$root/etc/passwd" <<EOF
root:x:0:0:root:/nonexistent:/usr/sbin/nologin
waymark:x:$UID_GID:$UID_GID:Waymark:/data:/usr/sbin/nologin
EOF
cat > "$root/etc/group" <<EOF
root:x:0:
waymark:x:$UID_GID:
EOF
# Names resolve from /etc/hosts, then DNS (a container engine provides both files).
echo "hosts: files dns" > "$root/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' > "$root/etc/hosts"
ca=/etc/ssl/certs/ca-certificates.crt
[ -s "$ca" ] || die "no CA bundle at $ca (apt-get install ca-certificates)"
install -m 0644 "$ca" "$root$ca"
chmod 0644 "$root/etc/passwd" "$root/etc/group" "$root/etc/nsswitch.conf" "$root/etc/hosts"
# The binary must start in there with nothing but what was copied.
chroot "$root" /usr/local/bin/waymark --version >/dev/null ||
  die "the binary does not start inside the new root filesystem (a library missing?)"
find "$root" -exec touch -h -d "@$EPOCH" {} +

# --- the image -------------------------------------------------------------------------------
layout=$OUT/oci
umoci init --layout "$layout"
umoci new --image "$layout:$VERSION"
umoci unpack --image "$layout:$VERSION" "$work/bundle" >/dev/null
# The new image's rootfs is empty; ours goes in as it is (owners and modes kept).
cp -a "$root/." "$work/bundle/rootfs/"
umoci repack --image "$layout:$VERSION" --history.created "$CREATED" \
  --history.created_by "deploy/build-image.sh" "$work/bundle"

# What the image runs: the same as the Dockerfile (keep the two in step). Addresses and the
# database come from WAYMARK_* variables, so `-e WAYMARK_LISTEN=…` changes them without
# rewriting the command; the command turns on TLS (the certificate is mounted at
# /etc/waymark/tls) and writes the first admin key to /data/admin.key.
cfg=(--image "$layout:$VERSION" --created "$CREATED" --history.created "$CREATED"
  --author "Waymark" --architecture amd64 --os linux
  --config.user "$UID_GID:$UID_GID" --config.workingdir /data
  --config.entrypoint waymark
  --config.cmd server
  --config.cmd --init-admin-key-file --config.cmd /data/admin.key
  --config.cmd --tls-cert --config.cmd /etc/waymark/tls/tls.crt
  --config.cmd --tls-key --config.cmd /etc/waymark/tls/tls.key
  --config.env PATH=/usr/local/bin
  --config.env WAYMARK_LISTEN=0.0.0.0:7450
  --config.env WAYMARK_CONSOLE_LISTEN=0.0.0.0:7451
  --config.env WAYMARK_METRICS_LISTEN=0.0.0.0:9464
  --config.env WAYMARK_DATABASE_URL=sqlite:/data/waymark.db
  --config.env WAYMARK_AUTH=true
  --config.exposedports 7450/tcp --config.exposedports 7451/tcp --config.exposedports 9464/tcp
  --config.volume /data
  --config.stopsignal SIGTERM
  --config.label org.opencontainers.image.title=waymark
  --config.label "org.opencontainers.image.description=Waymark durable-execution server"
  --config.label "org.opencontainers.image.version=$VERSION"
  --config.label "org.opencontainers.image.revision=$REVISION"
  --config.label "org.opencontainers.image.created=$CREATED"
  --config.label org.opencontainers.image.licenses=Apache-2.0
  --manifest.annotation "org.opencontainers.image.version=$VERSION"
  --manifest.annotation "org.opencontainers.image.ref.name=$VERSION")
umoci config "${cfg[@]}" --history.created_by "deploy/build-image.sh: config"
umoci gc --layout "$layout"

skopeo copy -q "oci:$layout:$VERSION" "oci-archive:$OUT/$NAME-$VERSION.oci.tar:$NAME:$VERSION"
# An uncompressed docker-archive doubles the disk used; only when asked (DOCKER_ARCHIVE=1).
if [ "${DOCKER_ARCHIVE:-0}" = 1 ]; then
  skopeo copy -q "oci:$layout:$VERSION" "docker-archive:$OUT/$NAME-$VERSION.docker.tar:$NAME:$VERSION"
fi
rm -rf "$work"

# --- sizes -----------------------------------------------------------------------------------
manifest=$(skopeo inspect --raw "oci:$layout:$VERSION")
compressed=$(jq '[.layers[].size] | add' <<<"$manifest")
# The layer again, uncompressed, from the blob (the staging tree is gone).
layer=$(jq -r '.layers[0].digest' <<<"$manifest" | sed 's/^sha256://')
unpacked=$(gzip -dc "$layout/blobs/sha256/$layer" | wc -c)
human() { numfmt --to=iec-i --suffix=B --format=%.1f "$1"; }
echo "image $NAME:$VERSION (revision ${REVISION:0:12}) in $layout"
echo "  compressed layer: $compressed bytes ($(human "$compressed"))"
echo "  unpacked (layer tar): $unpacked bytes ($(human "$unpacked"))"
echo "  archives: $(ls -1 "$OUT"/$NAME-"$VERSION".*.tar | xargs -n1 basename | paste -sd' ')"
