#!/bin/sh
# run.sh [--in-process] TEST.mjs NODE [NODE ARGS...]: NODE --test TEST.mjs, or "skipped" (exit 77)
# when the shared test data is absent. NODE may be an emulator command line (qemu-aarch64 -L ROOT
# .../node): then --in-process runs the file as a script (node:test still runs its tests and exits
# 1 on a failure), since --test would start a child node, which the host cannot execute. The
# module, edgellm-cli and the data folder come in the environment (CMakeLists.txt).
set -eu
if [ ! -f "${EDGELLM_SHARED_DATA:-}/models/stories260K.gguf" ]; then
  echo "skipped: ${EDGELLM_SHARED_DATA:-../shared/data}/models/stories260K.gguf not found"
  exit 77
fi
mode=--test
if [ "$1" = --in-process ]; then
  mode=""
  shift
fi
test=$1
shift
exec "$@" $mode "$test"
