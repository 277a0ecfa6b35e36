#!/usr/bin/env bash
# A throw-away PostgreSQL for the tests: installed from Debian's postgresql-15 when no server is
# found, initialised into a fresh temporary directory as a non-root user, listening on a free
# port of 127.0.0.1 only, removed when done.
#
#   scripts/pg-test.sh -- CMD [ARG...]  start a cluster, run CMD with REGISTRY_TEST_PG_URL set,
#                                       stop and remove the cluster; exits with CMD's status
#   eval "$(scripts/pg-test.sh start)"  start one and export REGISTRY_TEST_PG_URL and
#                                       REGISTRY_TEST_PG_DIR into this shell
#   scripts/pg-test.sh stop [DIR]       stop and remove it (DIR: $REGISTRY_TEST_PG_DIR)
#   scripts/pg-test.sh install          only install the server if it is missing
#
# With REGISTRY_TEST_PG_URL already set, `--` runs CMD against that database and starts nothing;
# with REGISTRY_SKIP_PG=1 it runs CMD without one (the PostgreSQL tests then skip, by name).
#
# The cluster is for tests only: fsync and synchronous_commit are off (a crash of the machine may
# lose it, which nobody minds), so start-up and the suites stay fast. The test database uses an
# ICU collation (en-US), not C, so that a query whose order depends on the database's default
# collation, rather than the schema's explicit one, fails the contract suite here first.
set -euo pipefail

PG_USER_OS="${REGISTRY_PG_OS_USER:-registry-pg}"
DB_NAME=registry_test
DB_ROLE=registry

log() { echo "pg-test: $*" >&2; }
die() { log "$*"; exit 1; }
now_ms() { date +%s%3N; }

# The directory holding initdb/pg_ctl/postgres: $REGISTRY_PG_BIN, else Debian's versioned
# directory (15 first, then the newest), else whatever is on PATH.
find_bindir() {
    if [[ -n "${REGISTRY_PG_BIN:-}" ]]; then
        [[ -x "$REGISTRY_PG_BIN/initdb" ]] && { echo "$REGISTRY_PG_BIN"; return 0; }
        return 1
    fi
    local d
    for d in /usr/lib/postgresql/15/bin $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [[ -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]] && { echo "$d"; return 0; }
    done
    local i
    if i="$(command -v initdb)" && [[ -x "$(dirname "$(readlink -f "$i")")/pg_ctl" ]]; then
        dirname "$(readlink -f "$i")"
        return 0
    fi
    return 1
}

as_root() {
    if [[ "$(id -u)" == 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo -n "$@"
    else
        die "need root (or password-less sudo) to run: $*"
    fi
}

install_server() {
    find_bindir >/dev/null && return 0
    command -v apt-get >/dev/null || die "no PostgreSQL server found and no apt-get to install one; set REGISTRY_PG_BIN"
    local t0; t0=$(now_ms)
    log "installing Debian's postgresql-15 (no server found)"
    export DEBIAN_FRONTEND=noninteractive
    # Package lists may be missing or stale on a fresh machine: update once, only if needed.
    if ! as_root apt-get install -y -q --no-install-recommends postgresql-15 >&2; then
        as_root apt-get update -q >&2
        as_root apt-get install -y -q --no-install-recommends postgresql-15 >&2
    fi
    find_bindir >/dev/null || die "postgresql-15 installed but initdb was not found"
    log "installed in $(( $(now_ms) - t0 )) ms"
}

# Runs a command as the unprivileged owner of the cluster (initdb and postgres refuse root).
as_owner() {
    if [[ "$(id -u)" == 0 ]]; then
        runuser -u "$PG_USER_OS" -- "$@"
    else
        "$@"
    fi
}

ensure_owner() {
    [[ "$(id -u)" == 0 ]] || return 0
    id -u "$PG_USER_OS" >/dev/null 2>&1 && return 0
    log "creating system user $PG_USER_OS to own test clusters"
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin "$PG_USER_OS"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Starts a cluster; prints `export` lines for REGISTRY_TEST_PG_URL and REGISTRY_TEST_PG_DIR.
start() {
    local t0; t0=$(now_ms)
    install_server
    local bin; bin="$(find_bindir)"
    ensure_owner
    local base="${REGISTRY_PG_TMPDIR:-/tmp}"
    local dir; dir="$(mktemp -d "$base/registry-pg.XXXXXX")"
    [[ "$(id -u)" == 0 ]] && chown "$PG_USER_OS:" "$dir"
    chmod 700 "$dir"
    local pw; pw="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    printf '%s\n' "$pw" >"$dir/pw"
    [[ "$(id -u)" == 0 ]] && chown "$PG_USER_OS:" "$dir/pw"
    if ! as_owner "$bin/initdb" -D "$dir/data" -U "$DB_ROLE" --pwfile="$dir/pw" \
        --auth=scram-sha-256 -E UTF8 --locale=C --no-sync --no-instructions >"$dir/initdb.log" 2>&1; then
        cat "$dir/initdb.log" >&2
        rm -rf "$dir"
        die "initdb failed"
    fi
    rm -f "$dir/pw"
    local t_init; t_init=$(now_ms)
    local port="" try
    for try in $(seq 1 20); do
        local p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
        port_in_use "$p" && continue
        if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 -s \
            -o "-c listen_addresses=127.0.0.1 -c port=$p -c unix_socket_directories=$dir \
                -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
                -c max_connections=300 -c shared_buffers=64MB" start >&2; then
            port="$p"
            break
        fi
        # Lost a race for the port (or another failure, which the next try repeats).
        tail -n 5 "$dir/server.log" >&2 || true
    done
    if [[ -z "$port" ]]; then
        rm -rf "$dir"
        die "the server did not start"
    fi
    local psql=("$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$DB_ROLE")
    if ! PGPASSWORD="$pw" "${psql[@]}" -d postgres -c "CREATE DATABASE $DB_NAME TEMPLATE template0 ENCODING 'UTF8'
            LOCALE 'C' LOCALE_PROVIDER icu ICU_LOCALE 'en-US'" >&2 2>"$dir/createdb.err"; then
        log "no ICU collation ($(tr '\n' ' ' <"$dir/createdb.err")); the test database uses C"
        PGPASSWORD="$pw" "${psql[@]}" -d postgres -c "CREATE DATABASE $DB_NAME" >&2
    fi
    # pageinspect lets the PostgreSQL store's tests look at what a purge leaves on each page.
    PGPASSWORD="$pw" "${psql[@]}" -d "$DB_NAME" -c "CREATE EXTENSION pageinspect" >&2
    local url="postgres://$DB_ROLE:$pw@127.0.0.1:$port/$DB_NAME"
    printf '%s\n' "$url" >"$dir/url"
    chmod 600 "$dir/url"
    log "$("$bin/postgres" --version) on 127.0.0.1:$port in $dir: ready in $(( $(now_ms) - t0 )) ms (initdb $(( t_init - t0 )) ms)"
    printf 'export REGISTRY_TEST_PG_URL=%q\nexport REGISTRY_TEST_PG_DIR=%q\n' "$url" "$dir"
}

stop() {
    local dir="${1:-${REGISTRY_TEST_PG_DIR:-}}"
    [[ -n "$dir" && -d "$dir" ]] || die "stop: no cluster directory (give DIR or set REGISTRY_TEST_PG_DIR)"
    [[ -f "$dir/url" || -d "$dir/data" ]] || die "stop: $dir is not a test cluster"
    local bin; bin="$(find_bindir)" || die "stop: no pg_ctl found"
    if [[ -f "$dir/data/postmaster.pid" ]]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -s -w stop >&2 || true
    fi
    rm -rf "$dir"
}

run() {
    if [[ -n "${REGISTRY_TEST_PG_URL:-}" ]]; then
        log "using REGISTRY_TEST_PG_URL from the environment"
        exec "$@"
    fi
    if [[ "${REGISTRY_SKIP_PG:-}" == 1 ]]; then
        log "REGISTRY_SKIP_PG=1: no PostgreSQL; its tests skip"
        exec "$@"
    fi
    local lines; lines="$(start)"
    eval "$lines"
    # shellcheck disable=SC2064 # expand now: the directory of this cluster
    trap "stop '$REGISTRY_TEST_PG_DIR'" EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    local rc=0
    "$@" || rc=$?
    return "$rc"
}

case "${1:-}" in
    --) shift; [[ $# -gt 0 ]] || die "usage: $0 -- CMD [ARG...]"; run "$@" ;;
    start) start ;;
    stop) shift; stop "${1:-}" ;;
    install) install_server ;;
    *) die "usage: $0 -- CMD [ARG...] | start | stop [DIR] | install" ;;
esac
