#!/usr/bin/env bash
# Runs the polyglot scenario against a fresh server on a temp SQLite database and checks every
# result; exits non-zero if one is not what it should be. Logs stay in the temp dir on failure.
#
#   sdk-clients/examples/polyglot/run.sh        (make -C sdk-clients/examples/polyglot run)
#
# Needs cargo, go, node and python3; installs each SDK's dependencies first (make deps).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/waymark-polyglot.XXXXXX")
pids=()
failed=0

cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "$failed" = 0 ]; then rm -rf "$tmp"; else echo "logs: $tmp" >&2; fi
}
trap cleanup EXIT
trap 'failed=1' ERR

# Polls "$@" until it succeeds, for up to 60 s.
poll() {
  local deadline=$((SECONDS + 60))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then echo "timed out waiting for: $*" >&2; failed=1; exit 1; fi
    sleep 0.1
  done
}

echo "== building"
(cd "$root" && cargo build -q -p waymark-cli --bin waymark -p waymark-sdk --example polyglot)
make -s -C "$here" build >/dev/null
waymark=${WAYMARK_BIN:-$root/target/debug/waymark}
py=$root/sdk-clients/python/.venv/bin/python

port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export WAYMARK_SERVER=127.0.0.1:$port
echo "== server on $WAYMARK_SERVER, database $tmp/waymark.db"
"$waymark" server --listen "$WAYMARK_SERVER" --database-url "sqlite:$tmp/waymark.db" 2>"$tmp/server.log" &
pids+=($!)
# Answers "not found" once it is up.
poll bash -c "'$waymark' workflow get readiness-probe 2>&1 | grep -q WORKFLOW_NOT_FOUND"

echo "== workers: Rust, Go, Python, TypeScript"
"$root/target/debug/examples/polyglot" >"$tmp/rust-worker.log" 2>&1 &
pids+=($!)
"$here/bin/go-worker" >"$tmp/go-worker.log" 2>&1 &
pids+=($!)
"$py" "$here/python/worker.py" >"$tmp/python-worker.log" 2>&1 &
pids+=($!)
node "$here/ts/dist/worker.js" >"$tmp/ts-worker.log" 2>&1 &
pids+=($!)

# Starts a workflow, retrying while no worker has registered its name yet (the start is
# idempotent on the id, so a retry never starts two).
start() { # name id input
  poll "$waymark" workflow start "$1" --id "$2" --input "$3"
}

start inbox inbox-1 null                                                     # Go
start combine combine-1 '"waymark"'                                          # Python
start courier courier-1 '{"to": "inbox-1", "text": "Hello from a Rust workflow"}'  # Rust

check() { # what expected actual
  if [ "$2" == "$3" ]; then
    echo "ok   $1: $3"
  else
    echo "FAIL $1: expected $2, got $3"
    failed=1
  fi
}

echo "== results"
check "Python combine-1 called TypeScript \"shout\" and Go \"reverse\"" \
  '{"reverse": "kramyaw", "shout": "WAYMARK!"}' \
  "$("$waymark" workflow await combine-1 --timeout 60s --json | "$py" -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["output"], sort_keys=True))')"
check "Go client started and awaited Rust greet-Gopher" \
  "Hello, Gopher, from a Rust workflow!" \
  "$("$here/bin/go-client" Gopher 2>>"$tmp/go-client.log")"
check "TypeScript client read Python countdown-1's stream live" \
  "3 2 1" \
  "$(node "$here/ts/dist/read-stream.js" countdown-1 3 2>>"$tmp/ts-client.log" | tr '\n' ' ' | sed 's/ $//')"
check "Rust courier-1" '"sent to inbox-1"' "$("$waymark" workflow await courier-1 --timeout 60s)"
check "Go inbox-1 received the Rust workflow's message" \
  '"Hello from a Rust workflow"' "$("$waymark" workflow await inbox-1 --timeout 60s)"

if [ "$failed" != 0 ]; then echo "== FAILED" >&2; exit 1; fi
echo "== all results as expected"
