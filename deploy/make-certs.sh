#!/usr/bin/env bash
# A throwaway CA and a server certificate signed by it, for trying the image with TLS on:
# DIR/ca.crt, DIR/tls.crt, DIR/tls.key — the names the image, compose.yaml and the chart
# (a kubernetes.io/tls Secret) use. Names in the certificate: localhost, 127.0.0.1, and the
# compose services waymark-1 and waymark-2, plus any given as EXTRA_SANS (DNS:x,IP:y).
# The key is made readable by the image's user (uid 10001) only, when run as root.
# Usage: make-certs.sh DIR
set -euo pipefail
dir=${1:?usage: make-certs.sh DIR}
uid=${WAYMARK_UID:-10001}
mkdir -p "$dir"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
sans="DNS:localhost,IP:127.0.0.1,DNS:waymark-1,DNS:waymark-2${EXTRA_SANS:+,$EXTRA_SANS}"
openssl req -x509 -newkey rsa:2048 -nodes -days "${DAYS:-30}" -subj "/CN=Waymark test CA" \
  -keyout "$scratch/ca.key" -out "$dir/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
  -keyout "$dir/tls.key" -out "$scratch/tls.csr" 2>/dev/null
openssl x509 -req -in "$scratch/tls.csr" -CA "$dir/ca.crt" -CAkey "$scratch/ca.key" \
  -CAcreateserial -days "${DAYS:-30}" -extfile <(printf 'subjectAltName=%s\n' "$sans") \
  -out "$dir/tls.crt" 2>/dev/null
chmod 0644 "$dir/ca.crt" "$dir/tls.crt"
chmod 0600 "$dir/tls.key"
if [ "$(id -u)" = 0 ]; then
  chown "$uid:$uid" "$dir/tls.key"
else
  echo "make-certs: not root: $dir/tls.key stays yours (mode 0600); the image's user ($uid) must be able to read it" >&2
fi
echo "make-certs: $dir/{ca.crt,tls.crt,tls.key} for $sans"
