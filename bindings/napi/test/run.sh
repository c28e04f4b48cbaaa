#!/bin/sh
# run.sh NODE TEST.mjs: node --test TEST.mjs, or "skipped" (exit 77) when the shared test data is
# absent. The module, edgellm-cli and the data folder come in the environment (CMakeLists.txt).
set -eu
if [ ! -f "${EDGELLM_SHARED_DATA:-}/models/stories260K.gguf" ]; then
  echo "skipped: ${EDGELLM_SHARED_DATA:-../shared/data}/models/stories260K.gguf not found"
  exit 77
fi
exec "$1" --test "$2"
