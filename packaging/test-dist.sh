#!/usr/bin/env bash
# Installs the release artifacts in OUT as a user would, each in a fresh temp folder, and runs
# every SDK README's quickstart (worker and client, twice) and replay test against servers
# started from them:
#
#   test-dist.sh VERSION OUT
#
#   (a) the archive: SHA256SUMS checked, unpacked, the server started from it
#   (b) Python: a venv with the waymark-sdk wheel (its dependencies from PyPI) runs the
#       quickstart against (a)'s server, then against the `waymark` of the waymark-server wheel
#   (c) TypeScript: a folder npm-installs the waymark-sdk and waymark-server tarballs and runs
#       the quickstart (with tsx) against `npx waymark-server server`
#   (d) Go: a module outside the repository uses the SDK through a replace directive
#
# Nothing here comes from the checkout but the README examples (checked byte for byte against
# the READMEs first) and, for Go, the SDK's source. Waits poll a condition, with a deadline.
set -euo pipefail

version=$1
out=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
target=x86_64-unknown-linux-gnu
# What the TypeScript quickstart's folder installs besides the two tarballs.
TSX_VERSION=4.23.15
TYPESCRIPT_VERSION=5.9.3
TYPES_NODE_VERSION=20.19.8
PYTEST_VERSION=9.2.0

# No setting of the caller's may point the programs elsewhere.
unset WAYMARK_SERVER WAYMARK_API_KEY WAYMARK_NAMESPACE WAYMARK_TLS_CA WAYMARK_TLS_CERT WAYMARK_TLS_KEY WAYMARK_BIN
export PIP_DISABLE_PIP_VERSION_CHECK=1 npm_config_fund=false npm_config_audit=false GOWORK=off GOFLAGS=-mod=mod

work=$(mktemp -d "${TMPDIR:-/tmp}/waymark-test-dist.XXXXXX")
pids=()
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$status" != 0 ]; then
    echo "test-dist FAILED (exit $status); logs kept in $work:" >&2
    find "$work" -maxdepth 2 -name '*.log' -newer "$work" -print0 2>/dev/null |
      while IFS= read -r -d '' f; do echo "--- $f (last 30 lines)" >&2; tail -30 "$f" >&2; done
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

say() { printf '\n== %s\n' "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds; fails after SECONDS.
wait_for() {
  local limit=$1 what=$2
  local deadline=$((SECONDS + limit))
  shift 2
  until "$@" > /dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "waited $limit s for $what"
    sleep 0.1
  done
}

alive() { kill -0 "$1" 2>/dev/null; }

# start_server NAME COMMAND...: starts a server (COMMAND server ...) on a free port with its data
# in a temp folder, and sets $addr to the address it logged once ready.
start_server() {
  local name=$1
  shift
  local dir=$work/server-$name
  mkdir -p "$dir"
  "$@" server --listen 127.0.0.1:0 --console-listen off --database-url "sqlite:$dir/waymark.db" > "$dir/server.log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  local deadline=$((SECONDS + 60))
  until grep -qs 'ready listen=' "$dir/server.log"; do
    alive "$server_pid" || fail "server $name exited: $(cat "$dir/server.log")"
    [ "$SECONDS" -lt "$deadline" ] || fail "server $name not ready after 60 s"
    sleep 0.1
  done
  addr=$(grep -o 'ready listen=[^ ]*' "$dir/server.log" | head -1 | cut -d= -f2)
  echo "server $name ready on $addr (pid $server_pid)"
}

# stop LABEL PID: SIGTERM, then waits for it to end (not in a pipe: `wait` needs this shell);
# sets $stopped_status to its exit status.
stop() {
  kill -TERM "$2"
  stopped_status=0
  wait "$2" || stopped_status=$?
  echo "    $1 stopped by SIGTERM (pid $2, exit $stopped_status)"
}

# worker_serves NAME: a connected worker registers workflow NAME (asked with the archive's CLI).
worker_serves() { "$cli" worker list --json --server "http://$addr" | grep -q "\"$1\""; }

# run_client LABEL COMMAND...: runs a quickstart client; it must exit 0 and print the order's
# result (total 3 x 450 = 1350). Sets $workflow_id to the id it started.
run_client() {
  local label=$1
  shift
  local log=$work/$label.log status=0
  WAYMARK_SERVER=$addr "$@" > "$log" 2>&1 || status=$?
  sed 's/^/    /' "$log"
  [ "$status" = 0 ] || fail "$label: the client exited $status"
  grep -q '1350' "$log" || fail "$label: no total of 1350 in the client's output"
  grep -q 'LABEL-' "$log" || fail "$label: no label in the client's output"
  workflow_id=$(grep -o 'order-[a-z0-9]*' "$log" | head -1)
  [ -n "$workflow_id" ] || fail "$label: no workflow id in the client's output"
  "$cli" workflow await "$workflow_id" --server "http://$addr" > /dev/null ||
    fail "$label: $workflow_id did not end SUCCESS on the server"
}

# client_without_worker LABEL COMMAND...: with no worker up, a client must fail, naming why.
client_without_worker() {
  local label=$1
  shift
  local log=$work/$label.log status=0
  WAYMARK_SERVER=$addr "$@" > "$log" 2>&1 || status=$?
  [ "$status" != 0 ] || fail "$label: the client exited 0 with no worker up"
  grep -q WORKFLOW_NAME_UNKNOWN "$log" || { cat "$log"; fail "$label: the client's failure does not say WORKFLOW_NAME_UNKNOWN"; }
  echo "    with no worker up: exit $status; it says: $(grep -m1 -E 'WORKFLOW_NAME_UNKNOWN|no worker has registered' "$log" | sed 's/^ *//' | cut -c1-150)"
}

# export_history DIR: saves the last client's workflow history where the replay test reads it.
export_history() {
  mkdir -p "$1"
  "$cli" workflow export "$workflow_id" --server "http://$addr" > "$1/$workflow_id.json"
  echo "    exported $workflow_id ($(grep -c '"step_id"' "$1/$workflow_id.json") steps) into ${1#$work/}/"
}

# replay_must_fail LABEL DIR FILE COMMAND...: a copy of the example folder whose FILE names the
# step "total" differently must fail its replay test (the test can fail).
replay_must_fail() {
  local label=$1 dir=$2 file=$3
  shift 3
  rm -rf "$dir.changed" && cp -a "$dir" "$dir.changed"
  sed -i 's/"total"/"sum"/' "$dir.changed/$file"
  grep -q '"sum"' "$dir.changed/$file" || fail "$label: could not change the step's name in $file"
  if (cd "$dir.changed" && "$@") > "$work/$label.log" 2>&1; then
    fail "$label: the replay test passed on code that calls another step"
  fi
  echo "    replay of code renaming step total: fails as it should ($(grep -o -m1 'NonDeterminism' "$work/$label.log" || echo 'failed'))"
  rm -rf "$dir.changed"
}

say "README examples are the files the tests run"
for sdk in python typescript go; do
  python3 "$here/readme_examples.py" check "$root/sdk-clients/$sdk/README.md" | sed 's/^/    /'
done

say "(a) the server archive"
download=$work/download
mkdir -p "$download"
cp "$out"/* "$download/"
(cd "$download" && sha256sum -c SHA256SUMS) | sed 's/^/    /'
for f in "$download"/*; do
  [ "$(basename "$f")" = SHA256SUMS ] || grep -q " $(basename "$f")\$" "$download/SHA256SUMS" || fail "SHA256SUMS does not cover $(basename "$f")"
done
mkdir -p "$work/archive"
tar -xzf "$download/waymark-$version-$target.tar.gz" -C "$work/archive"
listing=$(cd "$work/archive" && find . -type f -not -path "*/docs/*" | sort | tr '\n' ' ')
expected="./waymark-$version-$target/CHANGELOG.md ./waymark-$version-$target/LICENSE ./waymark-$version-$target/README.md ./waymark-$version-$target/waymark "
[ "$listing" = "$expected" ] || fail "the archive holds: $listing"
# Every docs/ link of the README resolves inside the archive.
for link in $(grep -o '](docs/[^)#]*' "$work/archive/waymark-$version-$target/README.md" | cut -c3- | sort -u); do
  [ -e "$work/archive/waymark-$version-$target/$link" ] || fail "the archive's README links to $link, which it lacks"
done
echo "    unpacked: $listing"
cli=$work/archive/waymark-$version-$target/waymark
[ "$("$cli" --version)" = "waymark $version" ] || fail "the archive's binary says $("$cli" --version)"
echo "    $("$cli" --version)"
start_server archive "$cli"

say "(b) Python: the waymark-sdk wheel in a fresh venv"
py=$work/python
python3 -m venv "$py/venv"
"$py/venv/bin/pip" install --quiet "$download/waymark_sdk-$version-py3-none-any.whl" "pytest==$PYTEST_VERSION"
"$py/venv/bin/pip" list 2>/dev/null | grep -E -i '^(waymark-sdk|grpcio|protobuf) ' | sed 's/^/    /'
mkdir -p "$py/quickstart"
cp "$root"/sdk-clients/python/examples/quickstart/{worker.py,client.py,test_replay.py} "$py/quickstart/"
cd "$py/quickstart"
client_without_worker python-no-worker "$py/venv/bin/python" client.py
WAYMARK_SERVER=$addr "$py/venv/bin/python" worker.py > "$work/python-worker.log" 2>&1 &
worker=$!
pids+=("$worker")
wait_for 60 "the Python worker to register checkout" worker_serves checkout
echo "    worker up (pid $worker); client, twice:"
run_client python-client-1 "$py/venv/bin/python" client.py
run_client python-client-2 "$py/venv/bin/python" client.py
export_history "$py/quickstart/histories"
"$py/venv/bin/python" -m pytest -q -p no:cacheprovider test_replay.py 2>&1 | tail -1 | sed 's/^/    replay test: /'
replay_must_fail python-replay-changed "$py/quickstart" worker.py "$py/venv/bin/python" -m pytest -q -p no:cacheprovider test_replay.py
stop "worker" "$worker"
stop "server" "$server_pid"

say "(b) Python: the server from the waymark-server wheel"
python3 -m venv "$py/server-venv"
"$py/server-venv/bin/pip" install --quiet "$download"/waymark_server-"$version"-py3-none-manylinux_*.whl
[ "$("$py/server-venv/bin/waymark" --version)" = "waymark $version" ] || fail "the wheel's waymark says $("$py/server-venv/bin/waymark" --version)"
[ "$("$py/server-venv/bin/waymark-server" --version)" = "waymark $version" ] || fail "the wheel's waymark-server says $("$py/server-venv/bin/waymark-server" --version)"
echo "    venv/bin/waymark --version: $("$py/server-venv/bin/waymark" --version); venv/bin/waymark-server --version: $("$py/server-venv/bin/waymark-server" --version)"
start_server wheel "$py/server-venv/bin/waymark"
WAYMARK_SERVER=$addr "$py/venv/bin/python" worker.py > "$work/python-worker-2.log" 2>&1 &
worker=$!
pids+=("$worker")
wait_for 60 "the Python worker to register checkout" worker_serves checkout
run_client python-client-wheel-1 "$py/venv/bin/python" client.py
run_client python-client-wheel-2 "$py/venv/bin/python" client.py
stop "worker" "$worker"
stop "server" "$server_pid"

say "(c) TypeScript: npm install of the waymark-sdk and waymark-server tarballs"
ts=$work/typescript
mkdir -p "$ts"
cd "$ts"
printf '{ "name": "quickstart", "private": true, "type": "module" }\n' > package.json
npm install --silent --no-audit --no-fund "$download/waymark-sdk-$version.tgz" "$download/waymark-server-$version.tgz" \
  "tsx@$TSX_VERSION" "typescript@$TYPESCRIPT_VERSION" "@types/node@$TYPES_NODE_VERSION"
node -e 'const d = require("./package.json").dependencies; for (const [k, v] of Object.entries(d)) console.log(`    ${k} ${v}`)'
[ -f node_modules/waymark-sdk/dist/src/index.js ] || fail "the installed waymark-sdk has no dist/src/index.js"
cp "$root"/sdk-clients/typescript/examples/quickstart/{workflows.ts,worker.ts,client.ts,replay.test.ts} .
cat > tsconfig.json <<'JSON'
{ "compilerOptions": { "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "strict": true, "noEmit": true, "types": ["node"] }, "include": ["*.ts"] }
JSON
npx tsc -p tsconfig.json && echo "    tsc: the quickstart type-checks against the installed package"
[ "$(npx waymark-server --version)" = "waymark $version" ] || fail "npx waymark-server --version says $(npx waymark-server --version)"
echo "    npx waymark-server --version: $(npx waymark-server --version)"
start_server npx node_modules/.bin/waymark-server
client_without_worker ts-no-worker npx tsx client.ts
WAYMARK_SERVER=$addr node_modules/.bin/tsx worker.ts > "$work/ts-worker.log" 2>&1 &
worker=$!
pids+=("$worker")
wait_for 60 "the TypeScript worker to register checkout" worker_serves checkout
echo "    worker up (pid $worker); client, twice:"
run_client ts-client-1 npx tsx client.ts
run_client ts-client-2 npx tsx client.ts
export_history "$ts/histories"
npx tsx --test replay.test.ts > "$work/ts-replay.log" 2>&1 || { cat "$work/ts-replay.log"; fail "the TypeScript replay test failed"; }
grep -E '^# (pass|fail)' "$work/ts-replay.log" | tr '\n' ' ' | sed 's/^/    replay test: /'
echo
grep -q '^# pass 1' "$work/ts-replay.log" || fail "the TypeScript replay test did not pass its one test"
replay_must_fail ts-replay-changed "$ts" workflows.ts npx tsx --test replay.test.ts
stop "worker" "$worker"
# The launcher passes SIGTERM on: the server shuts down, and the launcher ends with its status.
server_binary_pids=$(pgrep -P "$server_pid" || true)
stop "npx server" "$server_pid"
[ -n "$server_binary_pids" ] || fail "the launcher had no child process"
for p in $server_binary_pids; do
  if alive "$p"; then fail "the server binary (pid $p) outlived its launcher"; fi
done
[ "$stopped_status" = 0 ] || fail "the launcher exited $stopped_status after SIGTERM (the server's shutdown should be clean)"
grep -q 'ready listen=' "$work/server-npx/server.log" || fail "no server output through the launcher"

say "(d) Go: a module outside the repository, the SDK through replace"
gomod=$work/go
mkdir -p "$gomod/worker" "$gomod/client"
cd "$gomod"
go mod init example.com/quickstart > /dev/null 2>&1
go mod edit -replace "github.com/waymark-dev/waymark/sdk-clients/go=$root/sdk-clients/go"
cp "$root"/sdk-clients/go/examples/quickstart/worker/{main.go,replay_test.go} worker/
cp "$root"/sdk-clients/go/examples/quickstart/client/main.go client/
go mod tidy > "$work/go-tidy.log" 2>&1 || { cat "$work/go-tidy.log"; fail "go mod tidy"; }
grep -E 'replace|waymark-dev' go.mod | sed 's/^/    go.mod: /'
go build -o bin/ ./worker ./client
start_server go "$cli"
client_without_worker go-no-worker bin/client
WAYMARK_SERVER=$addr bin/worker > "$work/go-worker.log" 2>&1 &
worker=$!
pids+=("$worker")
wait_for 60 "the Go worker to register checkout" worker_serves checkout
echo "    worker up (pid $worker); client, twice:"
run_client go-client-1 bin/client
run_client go-client-2 bin/client
export_history "$gomod/worker/histories"
go test -count=1 ./worker 2>&1 | sed 's/^/    replay test: /'
replay_must_fail go-replay-changed "$gomod" worker/main.go go test -count=1 ./worker
stop "worker" "$worker"
stop "server" "$server_pid"

say "test-dist passed: every artifact installed and ran"
