#!/bin/sh
# install-prereqs.sh [--tests] [--server]: the Debian / Ubuntu packages edgellm's build needs
# (cmake, make, g++; with --tests also doctest-dev, and node with node_api.h for the Node-API module and
# its tests: nodejs + libnode-dev, unless a node and the header are there already, e.g.
# NodeSource's nodejs; --server adds nothing now: edgellm-server and edgellm-eval --server need no
# HTTP library; npm for the server's client test comes from elsewhere: it skips without it;
# python3-jinja2 for the chat template tests' reference, Python's Jinja2; python3-jsonschema checks
# constrained answers), installed only when missing,
# as root or through sudo. Used by README's commands and .ci/run.
set -eu
pkgs="cmake make g++"
for a in "$@"; do
  case "$a" in
    --tests)
      pkgs="$pkgs doctest-dev pkg-config python3-jinja2 python3-jsonschema"  # pkg-config: the consumer test of edgellm.pc
      command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
      [ -f /usr/include/node/node_api.h ] || pkgs="$pkgs libnode-dev" ;;
    --server) ;;  # kept for old command lines: the server tools need no library
    *) echo "install-prereqs.sh: unknown option $a (--tests, --server)" >&2; exit 1 ;;
  esac
done
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-prereqs.sh: no apt-get here; install:$missing" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-prereqs.sh: run as root or install sudo (needed:$missing)" >&2; exit 1; }
  sudo=sudo
fi
echo "installing:$missing" >&2
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
