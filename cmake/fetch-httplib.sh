#!/usr/bin/env bash
# Unpacks cpp-httplib's single header (header-only httplib.h) from Debian's *source* package into
# .deps/, for the builds that cannot link Debian's libcpp-httplib.so (which splits the header into
# declarations + a compiled library): cross, static (dayu200, arm64-*) and libc++ builds. Uses a
# private apt state with the system's Debian mirror as deb-src (nothing is installed). Prints the
# folder holding httplib.h, for -DEDGELLM_HTTPLIB_INCLUDE=. Usage: cmake/fetch-httplib.sh [DEPS_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS=${1:-$ROOT/.deps}
OUT=$DEPS/httplib
if [ -f "$OUT/httplib.h" ] && grep -q "inline bool Server::listen_after_bind" "$OUT/httplib.h"; then
  echo "$OUT"; exit 0
fi
D=$DEPS/apt-src
mkdir -p "$D/parts" "$D/lists/partial" "$D/cache/archives/partial" "$DEPS/src"
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > "$D/parts/src.sources"
elif [ -f /etc/apt/sources.list ]; then
  sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > "$D/parts/src.list"
else
  echo "fetch-httplib: no Debian apt source list found (/etc/apt/sources.list.d/debian.sources)" >&2; exit 1
fi
APT=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$D/parts" -o "Dir::State::Lists=$D/lists"
     -o "Dir::Cache=$D/cache" -o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
apt-get -qq "${APT[@]}" update >&2
cd "$DEPS/src"
apt-get -qq "${APT[@]}" source --download-only cpp-httplib >&2
orig=$(ls cpp-httplib_*.orig.tar.* | head -n 1)
[ -n "$orig" ] || { echo "fetch-httplib: no cpp-httplib orig tarball downloaded" >&2; exit 1; }
rm -rf "$OUT" unpack; mkdir -p "$OUT" unpack
tar -xf "$orig" -C unpack
hdr=$(find unpack -maxdepth 2 -name httplib.h | head -n 1)
[ -n "$hdr" ] || { echo "fetch-httplib: $orig has no httplib.h" >&2; exit 1; }
cp "$hdr" "$OUT/httplib.h"
lic=$(find unpack -maxdepth 2 -name LICENSE | head -n 1)
[ -z "$lic" ] || cp "$lic" "$OUT/LICENSE"
rm -rf unpack
grep -q "inline bool Server::listen_after_bind" "$OUT/httplib.h" || { echo "fetch-httplib: $OUT/httplib.h is not the header-only form" >&2; exit 1; }
echo "$OUT"
