# Sourced by the project's scripts: one place for the paths they share.
# CARGO_TARGET_DIR lives outside the clone so that builds can be reused between runs when the
# machine keeps it; nothing depends on it being there.
: "${CARGO_TARGET_DIR:=${XDG_CACHE_HOME:-$HOME/.cache}/harness-registry/target}"
: "${REGISTRY_MODEL_DIR:=${XDG_CACHE_HOME:-$HOME/.cache}/harness-registry/models}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${REGISTRY_SHARED_DATA:=$REPO_ROOT/../shared/data}"
export CARGO_TARGET_DIR REGISTRY_MODEL_DIR REGISTRY_SHARED_DATA REPO_ROOT
