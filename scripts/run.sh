#!/usr/bin/env bash
# Sets up and starts the registry on the embedded default: SQLite + tantivy + in-process
# vectors in one data directory (default ./registry-data). On the first start it creates an
# admin key and prints it once.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$REPO_ROOT"
command -v cargo >/dev/null || { echo "run: cargo (Rust) is required" >&2; exit 1; }
bash scripts/fetch-models.sh
cargo build --release --locked -p registry-server -p skillctl
BIN="$CARGO_TARGET_DIR/release/registry"
DATA_DIR="${REGISTRY_DATA_DIR:-./registry-data}"
"$BIN" --data-dir "$DATA_DIR" migrate >/dev/null
if [ -z "$("$BIN" --data-dir "$DATA_DIR" keys list)" ]; then
  echo "First start: creating an admin key for tenant 'default' (shown once):"
  "$BIN" --data-dir "$DATA_DIR" keys create --tenant default --user admin --role admin --role writer --role reviewer
fi
exec "$BIN" --data-dir "$DATA_DIR" serve "$@"
