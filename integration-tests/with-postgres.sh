#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL built from this machine's own binaries.
#
#   integration-tests/with-postgres.sh cargo test -p waymark-store
#
# The server lives in a fresh temp dir (data + unix socket), listens on a free port on
# 127.0.0.1 only, trusts every local connection, and is stopped and deleted on exit, whatever
# the command does. The command sees WAYMARK_TEST_POSTGRES_URL and its exit code is ours.
# When WAYMARK_TEST_POSTGRES_URL is already set (CI with a service container, a developer's own
# server), the command just runs against that.
set -euo pipefail

if [[ $# -eq 0 ]]; then
    echo "usage: $0 COMMAND [ARGS...]" >&2
    exit 2
fi

if [[ -n "${WAYMARK_TEST_POSTGRES_URL:-}" ]]; then
    exec "$@"
fi

# initdb/pg_ctl are usually on PATH; Debian/Ubuntu keep them in a versioned dir instead.
find_pg_bin() {
    if command -v "$1" >/dev/null 2>&1; then
        command -v "$1"
        return
    fi
    local candidate
    for candidate in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
        if [[ -x "$candidate/$1" ]]; then
            echo "$candidate/$1"
            return
        fi
    done
    echo "with-postgres.sh: $1 not found (install PostgreSQL server binaries)" >&2
    exit 1
}
INITDB=$(find_pg_bin initdb)
PG_CTL=$(find_pg_bin pg_ctl)

# initdb refuses to run as root, so as root the cluster belongs to the postgres user.
as_pg=()
if [[ $(id -u) -eq 0 ]]; then
    as_pg=(runuser -u postgres --)
fi

# A free port: bind to port 0 and let the kernel choose. Another process could take it before
# PostgreSQL does; `pg_ctl start -w` then fails loudly rather than testing the wrong server.
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

DIR=$(mktemp -d -t waymark-pg.XXXXXX)
started=0
cleanup() {
    local code=$?
    if [[ $started -eq 1 ]]; then
        # Fast shutdown: disconnects the (finished) test sessions instead of waiting for them.
        "${as_pg[@]}" "$PG_CTL" -D "$DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$DIR"
    exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ ${#as_pg[@]} -gt 0 ]]; then
    chown postgres: "$DIR"
fi

# UTF-8 so JSON text round-trips whatever the machine's locale; C collation keeps it fast.
"${as_pg[@]}" "$INITDB" -D "$DIR/data" -U postgres --auth=trust --encoding=UTF8 --no-locale \
    >"$DIR/initdb.log" 2>&1 || {
    cat "$DIR/initdb.log" >&2
    exit 1
}

# Tests open a pool per case and run cases in parallel, hence the connection headroom.
# fsync stays on: the suite should see the same durability costs production pays.
# WAYMARK_TEST_PG_SETTINGS adds server settings (`-c name=value ...`), as `make profile` does to
# load pg_stat_statements.
"${as_pg[@]}" "$PG_CTL" -D "$DIR/data" -l "$DIR/postgres.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$DIR \
        -c max_connections=300 -c shared_buffers=64MB ${WAYMARK_TEST_PG_SETTINGS:-}" \
    start >/dev/null || {
    cat "$DIR/postgres.log" >&2 2>/dev/null || true
    exit 1
}
started=1

export WAYMARK_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$PORT/postgres"
echo "with-postgres.sh: PostgreSQL running at $WAYMARK_TEST_POSTGRES_URL (data in $DIR)" >&2

# Not exec: the EXIT trap must run after the command to stop the server.
set +e
"$@"
status=$?
set -e
exit "$status"
