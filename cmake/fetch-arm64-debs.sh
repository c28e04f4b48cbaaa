#!/usr/bin/env bash
# fetch-arm64-debs.sh DEPS_DIR OUT_DIR PACKAGE...: downloads Debian's arm64 builds of the packages
# with a private apt state in DEPS_DIR/apt (the host's apt and dpkg are untouched: no multiarch,
# which clashes with some amd64 packages) and unpacks them into OUT_DIR (emptied first) with
# dpkg -x. Used by fetch-arm64-libcxx.sh and fetch-arm64-node.sh.
set -euo pipefail
DEPS=$1; OUT=$2; shift 2
D=$DEPS/apt
mkdir -p "$D/parts" "$D/lists/partial" "$D/cache/archives/partial" "$OUT.debs"
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  cp /etc/apt/sources.list.d/debian.sources "$D/parts/bin.sources"
elif [ -f /etc/apt/sources.list ]; then
  cp /etc/apt/sources.list "$D/parts/bin.list"
else
  echo "fetch-arm64-debs: no Debian apt source list found (/etc/apt/sources.list.d/debian.sources)" >&2; exit 1
fi
APT=(-o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Dir::Etc::SourceList=/dev/null
     -o "Dir::Etc::SourceParts=$D/parts" -o "Dir::State::Lists=$D/lists" -o "Dir::Cache=$D/cache"
     -o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
apt-get -qq "${APT[@]}" update >&2
(cd "$OUT.debs" && apt-get -qq "${APT[@]}" download "$@" >&2)
rm -rf "$OUT"; mkdir -p "$OUT"
for p in "$@"; do
  for f in "$OUT.debs/${p}_"*.deb; do dpkg -x "$f" "$OUT"; done
done
