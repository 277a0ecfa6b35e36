#!/usr/bin/env bash
# A throw-away Qdrant for the tests: the server binary from REGISTRY_QDRANT_BIN, else `qdrant` on
# PATH, else ../shared/bin/qdrant beside the checkout; listening on free ports of 127.0.0.1 only,
# its storage in a fresh temporary directory, stopped and removed when done.
#
#   scripts/qdrant-test.sh -- CMD [ARG...]  start a server, run CMD with REGISTRY_TEST_QDRANT_URL
#                                           (gRPC, what the index's client uses),
#                                           REGISTRY_TEST_QDRANT_HTTP (its REST API) and
#                                           REGISTRY_TEST_QDRANT_STORAGE (its storage directory)
#                                           set, then stop it; exits with CMD's status
#
# With REGISTRY_TEST_QDRANT_URL already set, it runs CMD against that server and starts nothing.
# Without a binary it says so on one line and runs CMD anyway: the Qdrant tests then skip, by
# name. REGISTRY_REQUIRE_QDRANT=1 (CI) turns that skip into a failure, here and in the tests.
#
# Users get a binary from Qdrant's container image (`docker run -p 6333:6333 -p 6334:6334
# qdrant/qdrant`, the binary is /qdrant/qdrant inside) or its release archives
# (https://github.com/qdrant/qdrant/releases).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

log() { echo "qdrant-test: $*" >&2; }
die() { log "$*"; exit 1; }
now_ms() { date +%s%3N; }

find_bin() {
    if [[ -n "${REGISTRY_QDRANT_BIN:-}" ]]; then
        [[ -x "$REGISTRY_QDRANT_BIN" ]] && { echo "$REGISTRY_QDRANT_BIN"; return 0; }
        die "REGISTRY_QDRANT_BIN=$REGISTRY_QDRANT_BIN is not an executable"
    fi
    command -v qdrant && return 0
    local shared="$REPO_ROOT/../shared/bin/qdrant"
    [[ -x "$shared" ]] && { echo "$shared"; return 0; }
    return 1
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
        port_in_use "$p" || { echo "$p"; return 0; }
    done
    return 1
}

DIR=""
PID=""
stop() {
    if [[ -n "$PID" ]] && kill -0 "$PID" 2>/dev/null; then
        kill "$PID" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
    [[ -n "$DIR" ]] && rm -rf "$DIR"
}

# Starts the server in $DIR; sets PID and exports the test variables. Retries on a lost port race.
start() {
    local bin="$1" t0; t0=$(now_ms)
    DIR="$(mktemp -d "${TMPDIR:-/tmp}/registry-qdrant.XXXXXX")"
    mkdir -p "$DIR/storage" "$DIR/snapshots"
    local http grpc
    for _ in $(seq 1 10); do
        http="$(free_port)" && grpc="$(free_port)" || die "no free port"
        [[ "$http" != "$grpc" ]] || continue
        # Its working directory is $DIR: Qdrant looks for config/ and static/ there (none).
        ( cd "$DIR" && exec env \
            QDRANT__SERVICE__HOST=127.0.0.1 \
            QDRANT__SERVICE__HTTP_PORT="$http" \
            QDRANT__SERVICE__GRPC_PORT="$grpc" \
            QDRANT__STORAGE__STORAGE_PATH="$DIR/storage" \
            QDRANT__STORAGE__SNAPSHOTS_PATH="$DIR/snapshots" \
            QDRANT__TELEMETRY_DISABLED=true \
            QDRANT__LOG_LEVEL=WARN \
            "$bin" >"$DIR/server.log" 2>&1 ) &
        PID=$!
        local deadline=$(( $(now_ms) + 60000 ))
        while kill -0 "$PID" 2>/dev/null && (( $(now_ms) < deadline )); do
            if curl -fsS "http://127.0.0.1:$http/healthz" >/dev/null 2>&1 && port_in_use "$grpc"; then
                local version
                version="$(curl -fsS "http://127.0.0.1:$http/" | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')"
                log "Qdrant $version ($bin) on 127.0.0.1:$http (HTTP) and :$grpc (gRPC) in $DIR: ready in $(( $(now_ms) - t0 )) ms"
                export REGISTRY_TEST_QDRANT_URL="http://127.0.0.1:$grpc"
                export REGISTRY_TEST_QDRANT_HTTP="http://127.0.0.1:$http"
                export REGISTRY_TEST_QDRANT_STORAGE="$DIR/storage"
                return 0
            fi
            sleep 0.1
        done
        tail -n 5 "$DIR/server.log" >&2 || true
        kill -9 "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
        PID=""
    done
    die "the server did not start"
}

run() {
    if [[ -n "${REGISTRY_TEST_QDRANT_URL:-}" ]]; then
        log "using REGISTRY_TEST_QDRANT_URL from the environment"
        exec "$@"
    fi
    local bin
    if ! bin="$(find_bin)"; then
        if [[ "${REGISTRY_REQUIRE_QDRANT:-}" == 1 ]]; then
            die "no Qdrant binary (REGISTRY_QDRANT_BIN, qdrant on PATH, ../shared/bin/qdrant) and REGISTRY_REQUIRE_QDRANT=1"
        fi
        log "no Qdrant binary (set REGISTRY_QDRANT_BIN; see README): the Qdrant tests skip"
        exec "$@"
    fi
    command -v curl >/dev/null || die "curl is needed to wait for Qdrant"
    trap stop EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    start "$bin"
    local rc=0
    "$@" || rc=$?
    return "$rc"
}

case "${1:-}" in
    --) shift; [[ $# -gt 0 ]] || die "usage: $0 -- CMD [ARG...]"; run "$@" ;;
    *) die "usage: $0 -- CMD [ARG...]" ;;
esac
