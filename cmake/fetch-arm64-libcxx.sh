#!/usr/bin/env bash
# Downloads Debian's arm64 libc++/libc++abi (LLVM 14) debs into .deps/ with a private apt state and
# unpacks them with dpkg -x (no multiarch install: it clashes with the host's amd64 libunwind-14).
# Prints the unpacked root, for -DARM64_LIBCXX_ROOT=. Usage: cmake/fetch-arm64-libcxx.sh [DEPS_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS=${1:-$ROOT/.deps}
OUT=$DEPS/arm64-libcxx
HEADER=$OUT/usr/lib/llvm-14/include/c++/v1/vector
if [ -f "$HEADER" ] && [ -f "$OUT/usr/lib/llvm-14/lib/libc++.a" ] && [ -f "$OUT/usr/lib/llvm-14/lib/libc++abi.a" ]; then
  echo "$OUT"; exit 0
fi
D=$DEPS/apt
mkdir -p "$D/parts" "$D/lists/partial" "$D/cache/archives/partial" "$DEPS/debs"
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  cp /etc/apt/sources.list.d/debian.sources "$D/parts/bin.sources"
elif [ -f /etc/apt/sources.list ]; then
  cp /etc/apt/sources.list "$D/parts/bin.list"
else
  echo "fetch-arm64-libcxx: no Debian apt source list found (/etc/apt/sources.list.d/debian.sources)" >&2; exit 1
fi
APT=(-o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Dir::Etc::SourceList=/dev/null
     -o "Dir::Etc::SourceParts=$D/parts" -o "Dir::State::Lists=$D/lists" -o "Dir::Cache=$D/cache"
     -o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
apt-get -qq "${APT[@]}" update >&2
cd "$DEPS/debs"
apt-get -qq "${APT[@]}" download libc++-14-dev libc++1-14 libc++abi-14-dev libc++abi1-14 >&2
rm -rf "$OUT"; mkdir -p "$OUT"
for f in libc++*.deb; do dpkg -x "$f" "$OUT"; done
if [ ! -f "$HEADER" ] || [ ! -f "$OUT/usr/lib/llvm-14/lib/libc++.a" ]; then
  echo "fetch-arm64-libcxx: unpacked debs lack $HEADER or libc++.a" >&2; exit 1
fi
echo "$OUT"
