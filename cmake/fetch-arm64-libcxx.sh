#!/usr/bin/env bash
# Downloads Debian's arm64 libc++/libc++abi (LLVM 14) debs into .deps/ with a private apt state and
# unpacks them with dpkg -x (cmake/fetch-arm64-debs.sh; no multiarch install: it clashes with the
# host's amd64 libunwind-14).
# Prints the unpacked root, for -DARM64_LIBCXX_ROOT=. Usage: cmake/fetch-arm64-libcxx.sh [DEPS_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS=${1:-$ROOT/.deps}
OUT=$DEPS/arm64-libcxx
HEADER=$OUT/usr/lib/llvm-14/include/c++/v1/vector
if [ -f "$HEADER" ] && [ -f "$OUT/usr/lib/llvm-14/lib/libc++.a" ] && [ -f "$OUT/usr/lib/llvm-14/lib/libc++abi.a" ]; then
  echo "$OUT"; exit 0
fi
bash "$ROOT/cmake/fetch-arm64-debs.sh" "$DEPS" "$OUT" libc++-14-dev libc++1-14 libc++abi-14-dev libc++abi1-14
if [ ! -f "$HEADER" ] || [ ! -f "$OUT/usr/lib/llvm-14/lib/libc++.a" ]; then
  echo "fetch-arm64-libcxx: unpacked debs lack $HEADER or libc++.a" >&2; exit 1
fi
echo "$OUT"
