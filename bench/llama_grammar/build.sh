#!/bin/sh
# Builds the llama.cpp reference tools for the grammar engine (not part of the CMake build):
# grammar_diff (acceptance and masks vs llama.cpp's src/llama-grammar.cpp) and side_by_side (mask
# time vs llama.cpp's grammar sampler). LLAMA: a llama.cpp checkout (e.g. the source in the npm
# package node-llama-cpp: npm pack node-llama-cpp && tar xzf node-llama-cpp-*.tgz &&
# git clone package/llama/gitRelease.bundle llama.cpp). Outputs go to OUT (default ./build-llama-grammar).
set -e
LLAMA=${LLAMA:?set LLAMA to a llama.cpp checkout}
OUT=${OUT:-build-llama-grammar}
HERE=$(cd "$(dirname "$0")" && pwd)
INC="-I$LLAMA/src -I$LLAMA/include -I$LLAMA/ggml/include"
mkdir -p "$OUT"
CXX=${CXX:-g++}
$CXX -std=c++17 -O2 -c $INC "$LLAMA/src/llama-grammar.cpp" -o "$OUT/llama-grammar.o"
$CXX -std=c++17 -O2 -c $INC "$HERE/stubs.cpp" -o "$OUT/stubs.o"
$CXX -std=c++17 -O2 -c $INC "$HERE/llama_side.cpp" -o "$OUT/llama_side.o"
for t in grammar_diff side_by_side; do
  $CXX -std=c++17 -O2 -I"$HERE/../../include" "$HERE/$t.cpp" "$OUT/llama_side.o" "$OUT/llama-grammar.o" "$OUT/stubs.o" -o "$OUT/$t"
done
echo "built $OUT/grammar_diff $OUT/side_by_side"
