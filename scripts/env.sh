# Sourced by the project's scripts: one place for the paths they share.
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Each checkout builds into its own target directory (the clone's `target/`, ignored by git), so
# two checkouts never run each other's test binaries: a test binary built from another path reads
# that path's fixtures and snapshots. CARGO_TARGET_DIR set by the caller still wins.
: "${CARGO_TARGET_DIR:=$REPO_ROOT/target}"
: "${REGISTRY_MODEL_DIR:=${XDG_CACHE_HOME:-$HOME/.cache}/harness-registry/models}"
export CARGO_TARGET_DIR REGISTRY_MODEL_DIR REPO_ROOT
