#!/bin/sh
# Checks of the x86 kernel dispatch on a program built without -m flags (tests/consumer/project/
# main.cpp, built by the include_only_gxx test). Run by ctest (tests/selfcontained/CMakeLists.txt):
#   x86_dispatch_checks.sh level-env PLAIN_BIN
#     EDGELLM_X86_LEVEL=avx2 / ref give that table; an unknown level fails naming the variable
#     and the levels available.
#   x86_dispatch_checks.sh same-bits CXX INCLUDE_DIR SOURCE PLAIN_BIN NATIVE_OUT MODEL
#     builds SOURCE (with its logits hash) with -march=native into NATIVE_OUT, runs MODEL through it
#     and through PLAIN_BIN (include_only_gxx's plain -O2 build, with the hash too) at the native
#     build's level and compares the hashes: the same level must give the same bits.
set -u
fail() { echo "FAIL: $*"; exit 1; }
case "$1" in
level-env)
  bin=$2
  EDGELLM_X86_LEVEL=avx2 "$bin" | grep -q '^kernels: avx2,' || fail "EDGELLM_X86_LEVEL=avx2 did not give the avx2 table"
  EDGELLM_X86_LEVEL=ref "$bin" | grep -q '^kernels: ref,' || fail "EDGELLM_X86_LEVEL=ref did not give the ref table"
  out=$(EDGELLM_X86_LEVEL=avx3 "$bin")
  rc=$?
  echo "$out"
  [ "$rc" = 1 ] || fail "EDGELLM_X86_LEVEL=avx3: exit code $rc, expected 1"
  echo "$out" | grep -q '^error: EDGELLM_X86_LEVEL=avx3: .*(available: ref, avx2' || fail "no error naming the variable and the levels"
  ;;
same-bits)
  cxx=$2 inc=$3 src=$4 plain=$5 native=$6 model=$7
  "$cxx" -std=c++17 -O2 -march=native -DEDGELLM_CONSUMER_LOGITS_HASH -Wall -Wextra -Werror -I "$inc" "$src" -pthread -o "$native" ||
    fail "build -march=native"
  [ -x "$plain" ] || fail "no plain build $plain (include_only_gxx)"
  n=$("$native" "$model") || fail "native run: $n"
  level=$(echo "$n" | sed -n 's/^kernels: \([^,]*\),.*/\1/p')
  d=$(EDGELLM_X86_LEVEL=$level "$plain" "$model") || fail "plain run at $level: $d"
  hn=$(echo "$n" | grep '^logits hash')
  hd=$(echo "$d" | grep '^logits hash')
  echo "-march=native: $level, $hn"
  echo "plain -O2 at EDGELLM_X86_LEVEL=$level: $hd"
  [ -n "$hn" ] && [ "$hn" = "$hd" ] || fail "the two builds differ at level $level"
  ;;
*)
  fail "usage: $0 level-env BIN | same-bits CXX INCLUDE_DIR SOURCE PLAIN_BIN NATIVE_OUT MODEL"
  ;;
esac
