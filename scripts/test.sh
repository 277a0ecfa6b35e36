#!/usr/bin/env bash
# Sets up everything the tests need (model files, crates) and runs the whole test suite.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$REPO_ROOT"
command -v cargo >/dev/null || { echo "test: cargo (Rust) is required" >&2; exit 1; }
bash scripts/fetch-models.sh
bash scripts/fetch-clients.sh
# CI=true makes insta refuse to write new snapshots: a changed OpenAPI document fails the run.
export INSTA_UPDATE="${INSTA_UPDATE:-no}"
# The PostgreSQL store's tests run against a throw-away cluster (installed from Debian's
# postgresql-15 if missing), or against REGISTRY_TEST_PG_URL when set; REGISTRY_SKIP_PG=1 skips
# them by name.
# Every test, then every integration test of the HTTP API once more with the registry on
# PostgreSQL (REGISTRY_TEST_STORE=postgres; REGISTRY_SKIP_PG=1 skips that pass), both on one
# throw-away cluster.
# Every test binary runs and every failure is reported (--no-fail-fast); the PostgreSQL pass runs
# even when the first pass failed, and the command fails if either did.
(cd fixtures && sha256sum --quiet -c SHA256SUMS) || { echo "test: fixtures/ differs from fixtures/SHA256SUMS" >&2; exit 1; }
bash scripts/pg-test.sh -- bash -c '
    set -uo pipefail
    status=0
    cargo test --workspace --all-targets --locked --no-fail-fast "$@" || status=$?
    if [[ "${REGISTRY_SKIP_PG:-}" != 1 ]]; then
        echo "test: the integration suite again, on PostgreSQL" >&2
        REGISTRY_TEST_STORE=postgres cargo test -p registry-server --test integration --locked --no-fail-fast "$@" || status=$?
    fi
    exit "$status"
' test.sh "$@"
