#!/usr/bin/env bash
# Debian bookworm's arm64 Node.js (18) with the libraries it needs, unpacked into .deps/arm64-node
# (cmake/fetch-arm64-debs.sh: no multiarch install), to run under qemu-aarch64 -L <that folder>.
# Prints the folder, for -DEDGELLM_ARM64_NODE_ROOT= (bindings/napi/test). Usage:
# cmake/fetch-arm64-node.sh [DEPS_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS=${1:-$ROOT/.deps}
OUT=$DEPS/arm64-node
if [ -x "$OUT/usr/bin/node" ] && [ -f "$OUT/lib/ld-linux-aarch64.so.1" ]; then
  echo "$OUT"; exit 0
fi
bash "$ROOT/cmake/fetch-arm64-debs.sh" "$DEPS" "$OUT" nodejs libnode108 node-acorn node-cjs-module-lexer node-undici \
  libuv1 libicu72 libssl3 libbrotli1 libc-ares2 libnghttp2-14 zlib1g libc6 libstdc++6 libgcc-s1
if [ ! -x "$OUT/usr/bin/node" ]; then
  echo "fetch-arm64-node: unpacked debs lack usr/bin/node" >&2; exit 1
fi
echo "$OUT"
