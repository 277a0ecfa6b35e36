#!/usr/bin/env bash
# The console's vendored browser script (ui/assets/htmx.min.js), from the htmx.org npm package
# at the version pinned in ui/assets/VENDORED.
#   scripts/vendor-ui.sh           fetch the pinned tarball with npm, check its integrity and
#                                  the file's sha256 against VENDORED, and write the file
#   scripts/vendor-ui.sh --check   only check the vendored file against VENDORED (no network)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
line="$(grep -E '^htmx\.org ' ui/assets/VENDORED)"
read -r pkg version path sha integrity <<<"$line"
check() {
  local got; got="$(sha256sum "$1" | cut -d' ' -f1)"
  [[ "$got" == "$sha" ]] || { echo "vendor-ui: $1 has sha256 $got, VENDORED records $sha" >&2; exit 1; }
}
if [[ "${1:-}" == "--check" ]]; then
  check ui/assets/htmx.min.js
  echo "vendor-ui: ui/assets/htmx.min.js is $pkg@$version ($sha)" >&2
  exit 0
fi
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$pkg@$version" >/dev/null)
tgz="$(ls "$tmp"/*.tgz)"
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
[[ "$got" == "$integrity" ]] || { echo "vendor-ui: tarball integrity $got, VENDORED records $integrity" >&2; exit 1; }
tar -xzf "$tgz" -C "$tmp"
check "$tmp/package/$path"
cp "$tmp/package/$path" ui/assets/htmx.min.js
cp "$tmp/package/LICENSE" ui/assets/htmx.LICENSE
echo "vendor-ui: wrote ui/assets/htmx.min.js from $pkg@$version" >&2
