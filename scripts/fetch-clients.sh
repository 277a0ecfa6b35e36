#!/usr/bin/env bash
# Installs the outside clients the integration tests drive, pinned, into the user cache:
#   ${REGISTRY_CLIENTS_DIR:-$HOME/.cache/harness-registry/clients}/
#     venv/         Python: the official MCP SDK, langchain-community, llama-index-retrievers-pathway,
#                   pytest (sdk/python's tests), schemathesis (fuzzes /openapi.json)
#                   (tests/clients/requirements.txt, a full freeze)
#     inspector/    npm: @modelcontextprotocol/inspector (its --cli mode) and axe-core (the console's
#                   accessibility check, injected into each page by tests/clients/console.py)
# and Debian's chromium (the browser Playwright drives; Playwright's own download is not used).
#     STAMP         present only after a complete install of exactly these pins
# Idempotent: when STAMP matches, it exits without touching the network.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

INSPECTOR_VERSION="2.12.0"
AXE_VERSION="4.14.1"
ROOT="${REGISTRY_CLIENTS_DIR:-$HOME/.cache/harness-registry/clients}"
REQ="tests/clients/requirements.txt"
want="$(sha256sum "$REQ" | cut -d' ' -f1) inspector@$INSPECTOR_VERSION axe-core@$AXE_VERSION chromium"

# Debian's chromium, for the console's browser tests (as scripts/pg-test.sh installs PostgreSQL).
install_chromium() {
  command -v chromium >/dev/null && return 0
  command -v apt-get >/dev/null || { echo "fetch-clients: no chromium and no apt-get to install it" >&2; exit 1; }
  local root=()
  [[ "$(id -u)" == 0 ]] || root=(sudo -n)
  echo "fetch-clients: installing Debian's chromium" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! "${root[@]}" apt-get install -y -q --no-install-recommends chromium >&2; then
    "${root[@]}" apt-get update -q >&2
    "${root[@]}" apt-get install -y -q --no-install-recommends chromium >&2
  fi
  command -v chromium >/dev/null || { echo "fetch-clients: chromium did not install" >&2; exit 1; }
}
install_chromium

if [[ -f "$ROOT/STAMP" && "$(cat "$ROOT/STAMP")" == "$want" ]]; then
  exit 0
fi
command -v python3 >/dev/null || { echo "fetch-clients: python3 is required" >&2; exit 1; }
command -v npm >/dev/null || { echo "fetch-clients: npm (Node.js) is required" >&2; exit 1; }
rm -rf "$ROOT"
mkdir -p "$ROOT"
echo "fetch-clients: installing the Python clients into $ROOT/venv" >&2
python3 -m venv "$ROOT/venv"
"$ROOT/venv/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$REQ"
"$ROOT/venv/bin/python" -W ignore -c "import mcp, langchain_community, llama_index.retrievers.pathway, pytest, schemathesis, playwright.sync_api"
echo "fetch-clients: installing @modelcontextprotocol/inspector@$INSPECTOR_VERSION" >&2
mkdir -p "$ROOT/inspector"
(cd "$ROOT/inspector" && echo '{"name":"registry-test-clients","private":true}' > package.json \
  && npm install --no-audit --no-fund --loglevel=error --save-exact \
       "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" "axe-core@$AXE_VERSION" >/dev/null)
test -f "$ROOT/inspector/node_modules/axe-core/axe.min.js" || {
  echo "fetch-clients: axe-core did not install" >&2; exit 1; }
test -x "$ROOT/inspector/node_modules/.bin/mcp-inspector" || test -x "$ROOT/inspector/node_modules/.bin/inspector" || {
  echo "fetch-clients: the inspector did not install" >&2; exit 1; }
echo "$want" > "$ROOT/STAMP"
