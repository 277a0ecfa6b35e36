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
# throw-away cluster; then the integration tests of what the vectors serve (memory, knowledge,
# skill discovery, deletion) once more with the vectors on Qdrant (REGISTRY_TEST_VECTORS=qdrant).
# All of it beside one throw-away Qdrant (scripts/qdrant-test.sh), which the Qdrant tests use;
# without a Qdrant binary they skip by name, unless REGISTRY_REQUIRE_QDRANT=1.
# Every test binary runs and every failure is reported (--no-fail-fast); each later pass runs
# even when an earlier one failed, and the command fails if any did.
(cd fixtures && sha256sum --quiet -c SHA256SUMS) || { echo "test: fixtures/ differs from fixtures/SHA256SUMS" >&2; exit 1; }
bash scripts/qdrant-test.sh -- bash scripts/pg-test.sh -- bash -c '
    set -uo pipefail
    status=0
    # registry-bench holds only the bench binaries (no tests): CI lints them, the tests skip them.
    cargo test --workspace --exclude registry-bench --all-targets --locked --no-fail-fast "$@" || status=$?
    if [[ "${REGISTRY_SKIP_PG:-}" != 1 ]]; then
        echo "test: the integration suite again, on PostgreSQL" >&2
        REGISTRY_TEST_STORE=postgres cargo test -p registry-server --test integration --locked --no-fail-fast "$@" || status=$?
    fi
    if [[ -n "${REGISTRY_TEST_QDRANT_URL:-}" ]]; then
        echo "test: memory, knowledge, skill discovery and deletion again, with the vectors on Qdrant" >&2
        REGISTRY_TEST_VECTORS=qdrant cargo test -p registry-server --test integration --locked \
            --no-fail-fast "$@" -- memory:: knowledge:: deletion:: skills::discover \
            skills::public_skills skills::skills_are_tenant_isolated || status=$?
    fi
    exit "$status"
' test.sh "$@"
