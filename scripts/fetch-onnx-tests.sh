#!/usr/bin/env bash
# Fetches ONNX's backend node conformance tests (model.onnx + test_data_set_*/*.pb per case) from
# the onnx wheel on PyPI (only the data is used; nothing is installed). Idempotent. 1.22 is the
# last release whose wheel carries the data (opsets to 25, with Attention, RMSNormalization, ...).
# Usage: scripts/fetch-onnx-tests.sh DEST_DIR   -> DEST_DIR/node/<test_name>/...
set -euo pipefail
ONNX_VERSION="${ALMA_ONNX_TESTS_VERSION:-1.22.0}"
dest="${1:?usage: $0 DEST_DIR}"
if [ -f "$dest/.onnx-$ONNX_VERSION" ]; then exit 0; fi
rm -rf "$dest/node" "$dest"/.onnx-* # another version's cases: some were renamed or dropped since
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
py="$(command -v python3)"
"$py" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
  --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 "onnx==$ONNX_VERSION" -d "$tmp"
mkdir -p "$dest"
"$py" - "$tmp"/onnx-*.whl "$dest" <<'PY'
import sys, zipfile, os
whl, dest = sys.argv[1], sys.argv[2]
prefix = "onnx/backend/test/data/node/"
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.startswith(prefix) and not n.endswith("/"):
            out = os.path.join(dest, "node", n[len(prefix):])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(n) as src, open(out, "wb") as f:
                f.write(src.read())
PY
touch "$dest/.onnx-$ONNX_VERSION"
echo "ONNX $ONNX_VERSION node tests in $dest/node ($(ls "$dest/node" | wc -l) cases)"
