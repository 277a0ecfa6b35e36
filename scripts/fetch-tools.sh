#!/usr/bin/env bash
# Installs the Rust tools CI runs beside the test command, pinned, from crates.io into the user
# cache (${REGISTRY_TOOLS_DIR:-$HOME/.cache/harness-registry/tools}/bin):
#   cargo-machete  unused dependencies
#   cargo-deny     licences, bans and sources of the dependency tree (deny.toml)
# Idempotent: a tool already at its pinned version is left alone. Prints the bin directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ROOT="${REGISTRY_TOOLS_DIR:-$HOME/.cache/harness-registry/tools}"
TOOLS=("cargo-machete 0.9.2" "cargo-deny 0.20.2")

for entry in "${TOOLS[@]}"; do
  read -r name version <<< "$entry"
  if [[ -x "$ROOT/bin/$name" ]] && "$ROOT/bin/$name" --version 2>/dev/null | grep -qF "$version"; then
    continue
  fi
  echo "fetch-tools: installing $name $version into $ROOT" >&2
  cargo install --quiet --locked --root "$ROOT" "$name@$version" >&2
done
echo "$ROOT/bin"
