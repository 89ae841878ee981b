#!/usr/bin/env bash
# A PostgreSQL server for the tests: 127.0.0.1:$COEVO_PG_PORT (default 5432), trust auth,
# superuser "postgres", database "test" (the URL tests/conftest.py uses).
#
#   bash .ci/postgres.sh [up]   nothing when the port already answers; otherwise find the
#                               server binaries (or, as root, apt-get install postgresql),
#                               create a throw-away cluster in $COEVO_PG_DATA (default
#                               /tmp/coevo-postgres-$PORT) if there is none, start it
#                               (as user postgres when run as root), wait until it answers,
#                               create database "test"
#   bash .ci/postgres.sh down   stop the server of $COEVO_PG_DATA, if it runs (never any other)
#
# Both are idempotent. `up` writes the data folder into $COEVO_PG_STARTED_FILE when it
# started a server, so a caller (.ci/run) stops only what it started.
# Environment: COEVO_PG_PORT, COEVO_PG_DATA, COEVO_PG_BINDIR (the server's bin folder).
#
# The cluster is our own (initdb + pg_ctl) rather than Debian's pg_createcluster: its
# pg_hba says trust from the start, it needs no edit of /etc/postgresql, it runs the same
# with or without root and whether or not the Debian wrappers are there, and `down` can
# only ever touch this folder.
set -euo pipefail

PORT="${COEVO_PG_PORT:-5432}"
DATA="${COEVO_PG_DATA:-/tmp/coevo-postgres-$PORT}"
LOG="$DATA/server.log"
ACTION="${1:-up}"

say() { echo "postgres.sh: $*" >&2; }
die() {
  say "$*"
  exit 1
}

# The server's bin folder: $COEVO_PG_BINDIR, else the newest /usr/lib/postgresql/*/bin,
# else the folder of an initdb on PATH. Empty when there is none.
find_bindir() {
  if [ -n "${COEVO_PG_BINDIR:-}" ]; then
    [ -x "$COEVO_PG_BINDIR/pg_ctl" ] && echo "$COEVO_PG_BINDIR"
    return 0
  fi
  local dir
  dir="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
    echo "$dir"
  elif command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
    dirname "$(readlink -f "$(command -v initdb)")"
  fi
}

# Whether 127.0.0.1:$PORT accepts connections: the server's own pg_isready when there is
# one, else a TCP connect (Debian's /usr/bin/pg_isready is a wrapper that fails without a
# client package, so PATH is not asked).
answers() {
  local isready="${BINDIR:+$BINDIR/pg_isready}"
  if [ -n "$isready" ] && [ -x "$isready" ]; then
    "$isready" -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -t 3
  else
    timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null
  fi
}

# Run a server command as the owner of the cluster: user postgres under root (the server
# refuses to run as root), oneself otherwise; from / so postgres may read its working folder.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    (cd / && runuser -u postgres -- "$@")
  else
    (cd / && "$@")
  fi
}

install_postgresql() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    say "no PostgreSQL server binaries found, and installing them needs root and apt-get"
    say "install PostgreSQL (Debian: apt-get install postgresql) or set COEVO_PG_BINDIR"
    return 1
  fi
  say "installing the Debian postgresql package (apt-get, at most 10 minutes)"
  # Keep the package from creating and starting its own "main" cluster on 5432 (its
  # password auth would not suit the tests, and it would take the port): we make our own.
  local confdir=/etc/postgresql-common/createcluster.d made=0
  local conf="$confdir/zz-coevo-ci.conf"
  [ -d "$confdir" ] || made=1
  mkdir -p "$confdir"
  echo "create_main_cluster = false" >"$conf"
  local ok=0
  export DEBIAN_FRONTEND=noninteractive
  if timeout 600 apt-get install -y -qq postgresql >/dev/null 2>&1; then
    ok=1
  elif timeout 300 apt-get update -qq >/dev/null 2>&1 &&
    timeout 600 apt-get install -y -qq postgresql >/dev/null 2>&1; then
    ok=1
  fi
  rm -f "$conf"
  if [ "$made" = 1 ]; then rmdir "$confdir" 2>/dev/null || true; fi
  [ "$ok" = 1 ] || say "apt-get install postgresql failed (run it by hand to see why)"
  [ "$ok" = 1 ]
}

up() {
  BINDIR="$(find_bindir)"
  if answers; then
    say "a server already answers on 127.0.0.1:$PORT; using it as it is"
    return 0
  fi
  if [ -z "$BINDIR" ]; then
    install_postgresql || die "cannot bring up PostgreSQL on 127.0.0.1:$PORT"
    BINDIR="$(find_bindir)"
    [ -n "$BINDIR" ] || die "postgresql is installed but no server binaries were found under /usr/lib/postgresql"
  fi
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    die "running as root, but there is no user postgres to run the server as"
  fi
  say "no server on 127.0.0.1:$PORT: starting one from $BINDIR in $DATA"

  if [ ! -s "$DATA/PG_VERSION" ]; then
    if [ -e "$DATA" ] && [ -n "$(ls -A "$DATA" 2>/dev/null)" ]; then
      die "$DATA exists and is not a PostgreSQL cluster; remove it or set COEVO_PG_DATA"
    fi
    mkdir -p "$DATA"
    [ "$(id -u)" = 0 ] && chown postgres: "$DATA"
    chmod 700 "$DATA"
    as_owner "$BINDIR/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 --locale=C --no-sync >/dev/null ||
      die "initdb failed in $DATA"
  fi
  # TCP on 127.0.0.1 only, no Unix socket (nothing to clash with a system server's socket);
  # durability off: a throw-away server for tests.
  [ -n "${COEVO_PG_STARTED_FILE:-}" ] && echo "$DATA" >"$COEVO_PG_STARTED_FILE"
  if ! as_owner "$BINDIR/pg_ctl" start -D "$DATA" -l "$LOG" -w -t 60 \
    -o "-h 127.0.0.1 -p $PORT -k '' -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >/dev/null; then
    tail -n 20 "$LOG" >&2 2>/dev/null || true
    die "the server did not start (log: $LOG)"
  fi
  local i
  for i in $(seq 30); do
    answers && break
    [ "$i" = 30 ] && die "the server started but 127.0.0.1:$PORT does not answer (log: $LOG)"
    sleep 1
  done
  local psql=("$BINDIR/psql" -X -q -h 127.0.0.1 -p "$PORT" -U postgres -v ON_ERROR_STOP=1)
  if [ -z "$("${psql[@]}" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'")" ]; then
    "${psql[@]}" -d postgres -c "CREATE DATABASE test" >/dev/null || die "could not create database test"
  fi
  say "PostgreSQL $("${psql[@]}" -d test -tAc 'SHOW server_version') answers on 127.0.0.1:$PORT (trust, database test); stop it with: COEVO_PG_PORT=$PORT COEVO_PG_DATA=$DATA bash .ci/postgres.sh down"
}

down() {
  BINDIR="$(find_bindir)"
  if [ ! -s "$DATA/PG_VERSION" ] || [ -z "$BINDIR" ]; then
    say "no cluster in $DATA: nothing to stop"
    return 0
  fi
  if ! as_owner "$BINDIR/pg_ctl" status -D "$DATA" >/dev/null 2>&1; then
    say "the server of $DATA is not running"
    return 0
  fi
  as_owner "$BINDIR/pg_ctl" stop -D "$DATA" -m fast -w -t 60 >/dev/null || die "could not stop the server of $DATA"
  say "stopped the server of $DATA"
}

case "$ACTION" in
up) up ;;
down) down ;;
*) die "usage: bash .ci/postgres.sh [up|down]" ;;
esac
