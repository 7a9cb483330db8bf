#!/usr/bin/env bash
# Smoke test of the image that deploy/build-image.sh wrote, without a container engine.
#
# The image is unpacked (umoci) to a root filesystem, and what its configuration says to run —
# entrypoint, cmd, env, user, working directory, all read back from the image, none written
# here — runs inside it (chroot, as the image's user), with only the listen addresses
# moved to free ports through the WAYMARK_* variables, as `docker run -e` would: the gRPC API and
# the console on loopback, the ops listener on every address as the image has it (so the key
# rules that apply beyond loopback apply to it). The
# image's default turns on TLS and API keys, so the test mounts a certificate where the image
# expects one (/etc/waymark/tls) and uses the admin key the server writes to /data.
#
# Checked: the configuration (non-root user, ports, volume, version label), the filesystem
# (/data owned by the user, /tmp sticky), readiness (/readyz) and the gRPC health service
# (SERVING), that the ops listener answers /readyz without a key (what a kubelet's probe sends)
# but refuses /metrics without one, that a call without a key is refused, a workflow round trip with the image's own
# CLI (start → ENQUEUED, cancel → CANCELLED), the console and /metrics answering, that the
# server runs as the image's uid with no supplementary groups, that SIGTERM ends it cleanly, and
# that after a restart on the same root filesystem the workflow, the key and the database are
# still there. Last, a start as the Helm chart runs it: --admin-key-file instead of
# --init-admin-key-file, with a key made by `waymark key generate` in a root-owned, group-readable
# file (a Secret volume with the pod's fsGroup), which the server refused before and takes after.
#
# Variables: OUT (deploy/out), GRPCURL (default .tools/bin/grpcurl, installed with go when
# missing), DEADLINE (seconds to wait for each condition, default 60).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
OUT=${OUT:-$here/out}
DEADLINE=${DEADLINE:-60}
GRPCURL=${GRPCURL:-$repo/.tools/bin/grpcurl}
GRPCURL_VERSION=${GRPCURL_VERSION:-v1.9.3}

fail() { echo "test-image: FAIL: $*" >&2; exit 1; }
step() { echo "test-image: $*"; }
[ "$(id -u)" = 0 ] || fail "run as root (unpacking keeps file owners; entering the root filesystem needs chroot)"
for t in umoci skopeo jq curl openssl python3; do command -v "$t" >/dev/null || fail "$t is missing"; done
if [ ! -x "$GRPCURL" ]; then
  step "installing grpcurl $GRPCURL_VERSION into $(dirname "$GRPCURL")"
  mkdir -p "$(dirname "$GRPCURL")"
  GOBIN=$(dirname "$GRPCURL") go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION"
fi

# The interpreter itself (not a shim that needs the caller's PATH), for the launcher below.
PYTHON=$(python3 -c 'import sys; print(sys.executable)')
layout=$OUT/oci
[ -f "$layout/index.json" ] || fail "no image at $layout: run make -C deploy image first"
tag=$(umoci ls --layout "$layout" | head -1)
[ -n "$tag" ] || fail "the layout at $layout has no tag"
VERSION=$(awk '/^\[workspace.package\]/{p=1; next} /^\[/{p=0} p && /^version *=/{gsub(/[" ]/,"",$0); sub(/^version=/,"",$0); print; exit}' "$repo/Cargo.toml")

work=$(mktemp -d "$OUT/test-image.XXXXXX")
server_pid=
# Every process whose root directory is this test's root filesystem: the server and any CLI
# call, whatever became of $server_pid.
inside() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$work/bundle/rootfs" ] && echo "${p#/proc/}"
  done
  return 0
}
cleanup() {
  local rc=$? pids
  pids=$(inside)
  if [ -n "$pids" ]; then
    kill -TERM $pids 2>/dev/null || true
    for _ in $(seq 100); do [ -n "$(inside)" ] || break; sleep 0.1; done
    pids=$(inside); [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  fi
  if [ $rc != 0 ] && [ -f "$work/server.log" ]; then
    echo "--- server log (last 40 lines) ---" >&2; tail -40 "$work/server.log" >&2
  fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
trap "exit 130" INT
trap "exit 143" TERM

# Polls "$@" until it succeeds or DEADLINE passes; fails naming what it waited for. (The sleep
# is the interval between two polls; the condition itself is what is waited for.)
until_true() {
  local what=$1; shift
  local end=$((SECONDS + DEADLINE))
  until "$@"; do
    [ -z "$server_pid" ] || kill -0 "$server_pid" 2>/dev/null || fail "the server exited while waiting for $what"
    [ $SECONDS -lt $end ] || fail "no $what within ${DEADLINE}s"
    sleep 0.2
  done
}

# --- what the image says ---------------------------------------------------------------------
config=$(skopeo inspect --config "oci:$layout:$tag")
jq -e '.config.Entrypoint | length > 0' <<<"$config" >/dev/null || fail "the image has no entrypoint"
mapfile -t entrypoint < <(jq -r '.config.Entrypoint[]' <<<"$config")
mapfile -t cmd < <(jq -r '(.config.Cmd // [])[]' <<<"$config")
mapfile -t image_env < <(jq -r '(.config.Env // [])[]' <<<"$config")
user=$(jq -r '.config.User // ""' <<<"$config")
workdir=$(jq -r '.config.WorkingDir // "/"' <<<"$config")
step "image $tag: entrypoint ${entrypoint[*]} | cmd ${cmd[*]} | user $user | workdir $workdir"
for port in 7450/tcp 7451/tcp 9464/tcp; do
  jq -e --arg p "$port" '.config.ExposedPorts | has($p)' <<<"$config" >/dev/null || fail "port $port is not exposed"
done
jq -e '.config.Volumes | has("/data")' <<<"$config" >/dev/null || fail "/data is not a volume"
label_version=$(jq -r '.config.Labels["org.opencontainers.image.version"] // ""' <<<"$config")
[ "$label_version" = "$VERSION" ] || fail "version label is '$label_version', Cargo.toml says $VERSION"

# --- the root filesystem ---------------------------------------------------------------------
umoci unpack --image "$layout:$tag" "$work/bundle" >/dev/null
root=$work/bundle/rootfs
# The user as numbers, from the image's own /etc/passwd when it is a name.
uid=${user%%:*}; gid=${user#*:}; [ "$gid" != "$user" ] || gid=
if ! [[ $uid =~ ^[0-9]+$ ]]; then
  line=$(grep "^$uid:" "$root/etc/passwd") || fail "user $uid is not in the image's /etc/passwd"
  uid=$(cut -d: -f3 <<<"$line"); [ -n "$gid" ] || gid=$(cut -d: -f4 <<<"$line")
fi
[ -n "$gid" ] || gid=$(awk -F: -v u="$uid" '$3 == u {print $4}' "$root/etc/passwd")
[[ $uid =~ ^[0-9]+$ && $gid =~ ^[0-9]+$ ]] || fail "cannot tell the image's uid/gid from '$user'"
[ "$uid" != 0 ] || fail "the image runs as root"
awk -F: -v u="$uid" '$3 == u {found=1} END {exit !found}' "$root/etc/passwd" || fail "uid $uid is not in /etc/passwd"
[ "$(stat -c %u:%g "$root/data")" = "$uid:$gid" ] || fail "/data is owned by $(stat -c %u:%g "$root/data"), not $uid:$gid"
[ "$(stat -c %a "$root/tmp")" = 1777 ] || fail "/tmp is not mode 1777"
[ -s "$root/etc/ssl/certs/ca-certificates.crt" ] || fail "no CA bundle in the image"
step "rootfs: $(du -sh "$root" | cut -f1), $(find "$root" -type f | wc -l) files; /data owned by $uid:$gid"

# A certificate where the image's command looks for one, as a mounted secret would be.
tls=$root/etc/waymark/tls
WAYMARK_UID=$uid DAYS=2 "$here/make-certs.sh" "$tls" >/dev/null
[ "$(stat -c '%u %a' "$tls/tls.key")" = "$uid 600" ] || fail "make-certs.sh left tls.key as $(stat -c '%u %a' "$tls/tls.key")"

# Three free ports, two on loopback and one on every address (bound and released here; the
# server binds them right after).
read -r grpc_port console_port metrics_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x, host in zip(s, ("127.0.0.1", "127.0.0.1", "0.0.0.0")): x.bind((host, 0))
print(*[x.getsockname()[1] for x in s])')

# Runs a command inside the image's root filesystem, as its user, in its working directory, with
# its environment and the listen addresses moved to those ports (what `docker run -e …` does).
in_image() {
  $exec env -i "${image_env[@]}" \
    WAYMARK_LISTEN="127.0.0.1:$grpc_port" \
    WAYMARK_CONSOLE_LISTEN="127.0.0.1:$console_port" \
    WAYMARK_METRICS_LISTEN="0.0.0.0:$metrics_port" \
    "${extra_env[@]}" \
    "$PYTHON" -c "$enter" "$root" "$workdir" "$uid" "$gid" "$@"
}
# chroot(2) into the root filesystem, chdir to the image's working directory, drop every group
# and become the image's user, then exec the command found on the image's PATH. (coreutils
# chroot cannot keep a working directory, and `unshare --setuid` only acts inside a user
# namespace.)
enter='
import os, sys
root, wd, uid, gid, argv = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
os.chroot(root)
os.chdir(wd)
os.setgroups([])
os.setresgid(gid, gid, gid)
os.setresuid(uid, uid, uid)
os.execvp(argv[0], argv)
'
extra_env=()
exec=
server_cmd=("${cmd[@]}")
start_server() {
  # In the background subshell `exec` hands its pid to the server, so $! is the server's.
  exec=exec in_image "${entrypoint[@]}" "${server_cmd[@]}" >>"$work/server.log" 2>&1 &
  server_pid=$!
  step "server started (pid $server_pid): ${entrypoint[*]} ${server_cmd[*]}"
}
stop_server() {
  kill -TERM "$server_pid"
  set +e; wait "$server_pid"; rc=$?; set -e
  server_pid=
  [ $rc = 0 ] || fail "the server exited with $rc on SIGTERM, not 0"
}
ready() { [ "$(curl -s --max-time 2 "http://127.0.0.1:$metrics_port/readyz")" = ready ]; }
serving() {
  [ "$("$GRPCURL" -cacert "$tls/ca.crt" -max-time 2 "127.0.0.1:$grpc_port" grpc.health.v1.Health/Check 2>/dev/null |
    jq -r .status 2>/dev/null)" = SERVING ]
}
# The image's CLI with KEY and the test CA; cli: with the admin key the server wrote.
cli_as() {
  local key=$1 saved=("${extra_env[@]}"); shift
  extra_env=(WAYMARK_SERVER="https://localhost:$grpc_port" WAYMARK_TLS_CA=/etc/waymark/tls/ca.crt WAYMARK_API_KEY="$key")
  in_image "${entrypoint[@]}" "$@"
  local rc=$?
  extra_env=("${saved[@]}")
  return $rc
}
cli() { cli_as "$(tr -d '\n' <"$root/data/admin.key")" "$@"; }
status_of() { cli workflow get "$1" --json | jq -r .status; }

# --- first run -------------------------------------------------------------------------------
start_server
until_true "answer from /readyz (ready)" ready
until_true "SERVING from grpc.health.v1.Health/Check" serving
step "ready: /readyz says ready, gRPC health SERVING"
# The image's own health check (the Dockerfile's HEALTHCHECK), run inside it as its user.
said=$(in_image waymark health --ready) || fail "waymark health --ready inside the image: $said"
[ "$said" = ready ] || fail "waymark health --ready said '$said'"
step "health check: waymark health --ready inside the image says ready"
# The ops listener is beyond loopback under --auth: /readyz still answers anyone (a kubelet's
# probe carries no key), /metrics does not.
code=$(curl -s -o "$work/readyz.out" --max-time 5 -w '%{http_code}' "http://127.0.0.1:$metrics_port/readyz")
said=$(cat "$work/readyz.out")
[ "$code $said" = "200 ready" ] || fail "/readyz without a key answered $code '$said', not 200 'ready'"
code=$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' "http://127.0.0.1:$metrics_port/metrics")
[ "$code" = 401 ] || fail "/metrics without a key answered $code, not 401"
step "ops listener on 0.0.0.0: /readyz answers 200 without a key, /metrics 401 without one"

# Who the server runs as: every uid and gid the image's, no supplementary group.
read -r _ ruid euid suid fsuid < <(grep '^Uid:' "/proc/$server_pid/status")
read -r _ rgid egid sgid fsgid < <(grep '^Gid:' "/proc/$server_pid/status")
groups=$(grep '^Groups:' "/proc/$server_pid/status" | cut -f2- | tr -d ' \t')
[ "$ruid $euid $suid $fsuid" = "$uid $uid $uid $uid" ] || fail "server uids are $ruid $euid $suid $fsuid, not $uid"
[ "$rgid $egid $sgid $fsgid" = "$gid $gid $gid $gid" ] || fail "server gids are $rgid $egid $sgid $fsgid, not $gid"
[ -z "$groups" ] || fail "server keeps supplementary groups: $groups"
[ "$(readlink "/proc/$server_pid/root")" = "$root" ] || fail "server root is $(readlink "/proc/$server_pid/root")"
step "process: uid $uid gid $gid, no supplementary groups, root $root"

[ -s "$root/data/admin.key" ] || fail "the server wrote no admin key to /data/admin.key"
[ "$(stat -c '%u %a' "$root/data/admin.key")" = "$uid 600" ] || fail "admin key is $(stat -c '%u %a' "$root/data/admin.key")"
key_before=$(cat "$root/data/admin.key")

# Keys are required (the image turns --auth on): no key, refused with the CLI's exit code 8.
set +e
extra_env=(WAYMARK_SERVER="https://localhost:$grpc_port" WAYMARK_TLS_CA=/etc/waymark/tls/ca.crt)
in_image "${entrypoint[@]}" queue list >/dev/null 2>"$work/nokey.err"; rc=$?
extra_env=()
set -e
[ $rc = 8 ] || fail "a call without a key ended with exit code $rc, not 8 (refused): $(cat "$work/nokey.err")"
step "a call without a key is refused (exit 8)"

id=smoke-$$-$RANDOM
started=$(cli workflow start smoke.hello --id "$id" --allow-unregistered --input '{"n": 1}' 2>"$work/start.err") ||
  fail "workflow start failed: $(cat "$work/start.err")"
[ "$started" = "$id" ] || fail "workflow start printed '$started', not $id"
s=$(status_of "$id"); [ "$s" = ENQUEUED ] || fail "after start the workflow is $s, not ENQUEUED"
step "workflow $id started: ENQUEUED"
cli workflow cancel "$id" >/dev/null || fail "workflow cancel failed"
s=$(status_of "$id"); [ "$s" = CANCELLED ] || fail "after cancel the workflow is $s, not CANCELLED"
step "workflow $id cancelled: CANCELLED"
input=$(cli workflow get "$id" --json | jq -c .input)
[ "$input" = '{"n":1}' ] || fail "the workflow's input reads back as $input"

console=$(curl -s --max-time 5 --cacert "$tls/ca.crt" "https://localhost:$console_port/")
grep -qi '<html' <<<"$console" || fail "the console did not answer with a page on port $console_port"
metrics=$(curl -s --max-time 5 -H "authorization: Bearer $key_before" "http://127.0.0.1:$metrics_port/metrics")
for m in StartWorkflow CancelWorkflow; do
  grep -q "^waymark_rpc_requests_total{method=\"waymark.v1.WorkflowService/$m\",code=\"Ok\"} 1\$" <<<"$metrics" ||
    fail "/metrics does not count the one $m answered Ok"
done
step "console answers over TLS; /metrics counts the start and the cancel"

# A key made by the image's CLI, registered nowhere yet: refused (it is registered below).
generated=$(in_image "${entrypoint[@]}" key generate) || fail "waymark key generate inside the image failed"
[[ $generated =~ ^wmk_[0-9a-f]{16}_[0-9a-f]{64}$ ]] || fail "waymark key generate printed '$generated'"
set +e; cli_as "$generated" queue list >/dev/null 2>"$work/generated.err"; rc=$?; set -e
[ $rc = 8 ] || fail "a call with a generated, unregistered key ended with exit code $rc, not 8: $(cat "$work/generated.err")"

# --- restart on the same root filesystem -----------------------------------------------------
stop_server
step "SIGTERM: the server drained and exited 0"
[ -s "$root/data/waymark.db" ] || fail "no database at /data/waymark.db"
[ "$(stat -c %u "$root/data/waymark.db")" = "$uid" ] || fail "/data/waymark.db is not owned by $uid"

start_server
until_true "answer from /readyz (ready) after the restart" ready
until_true "SERVING after the restart" serving
[ "$(cat "$root/data/admin.key")" = "$key_before" ] || fail "the admin key file changed across the restart"
s=$(status_of "$id"); [ "$s" = CANCELLED ] || fail "after the restart the workflow is $s, not CANCELLED"
step "after the restart: ready, the same admin key works, workflow $id still CANCELLED"
stop_server

# --- as the Helm chart starts it: --admin-key-file -------------------------------------------
# The image's command with --admin-key-file in place of --init-admin-key-file, reading the key
# from a file as a Secret volume holds it: root's, mode 0440, group the pod's fsGroup (here the
# user's own group, since in_image drops supplementary groups).
server_cmd=()
for ((i = 0; i < ${#cmd[@]}; i++)); do
  if [ "${cmd[i]}" = --init-admin-key-file ]; then
    server_cmd+=(--admin-key-file /etc/waymark/admin/admin.key); i=$((i + 1))
  else
    server_cmd+=("${cmd[i]}")
  fi
done
[[ " ${server_cmd[*]} " == *" --admin-key-file "* ]] || fail "the image's command has no --init-admin-key-file to replace: ${cmd[*]}"
install -d -m 0755 "$root/etc/waymark/admin"
printf '%s\n' "$generated" >"$root/etc/waymark/admin/admin.key"
chown "0:$gid" "$root/etc/waymark/admin/admin.key"; chmod 0440 "$root/etc/waymark/admin/admin.key"
start_server
until_true "answer from /readyz (ready) with --admin-key-file" ready
s=$(cli_as "$generated" workflow get "$id" --json | jq -r .status) || fail "a call with the key of --admin-key-file failed"
[ "$s" = CANCELLED ] || fail "with the key of --admin-key-file the workflow reads as $s, not CANCELLED"
grep -q "admin key registered from its file" "$work/server.log" || fail "the server did not log registering the key file's key"
stop_server
step "--admin-key-file: the generated key, refused before, registered at start and answered as admin"
step "PASS ($SECONDS s)"
