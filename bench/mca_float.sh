#!/bin/sh
# mca_float.sh [OUTDIR]: the arm64 float loops (kernels/neon/float_ops.hpp) hand-written NEON vs
# written with xsimd (bench/mca_float.cpp), on the llvm-mca Cortex-A55 model: for each op, every
# vector loop of its function (a backward branch over code that touches a .4s / q register), in
# order (single-block loops, a loop g++ emitted twice once), with its cycles and instructions per iteration. Needs xsimd's headers (XSIMD_INCLUDE, the
# folder holding xsimd/xsimd.hpp; default /usr/include, reached through a private symlink so that
# the cross compiler does not see the host's other headers). A model, not a measurement.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-${TMPDIR:-/tmp}/edgellm-mca-float}
mkdir -p "$out/inc"
CXX=${CXX:-aarch64-linux-gnu-g++}  # may carry flags: CXX="clang++-14 --target=aarch64-linux-gnu"
MCA=${MCA:-llvm-mca-14}
OPT=${OPT:--O2}
ITER=1000
ln -sfn "${XSIMD_INCLUDE:-/usr/include}/xsimd" "$out/inc/xsimd"
$CXX -std=c++17 $OPT -mcpu=cortex-a55 -I"$here/include" -isystem "$out/inc" -S "$here/bench/mca_float.cpp" -o "$out/mca_float.s"

# loops FILE.s FN: writes FN.<k>.loop.s for the k-th vector loop of FN (no .arch lines).
loops() {
  awk -v fn="$2" -v dir="$out" '
    BEGIN { br = "^[ \t]+(b|bl|br|blr|ret|b\\.?(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)|cbn?z|tbn?z)([ \t]|$)" }
    index($0, fn ":") == 1       { on = 1; n = 0; k = 0; next }
    !on                          { next }
    /^[ \t]*\.size[ \t]/         { exit }
    /^[ \t]*\.arch[ \t]/         { next }
    { line[++n] = $0 }
    /^\.L[A-Za-z0-9_$.]+:/       { lab = $1; sub(/:.*/, "", lab); at[lab] = n; next }
    $0 ~ br && ($NF in at)       {
      vec = 0; body = ""
      for (i = at[$NF] + 1; i <= n; i++) {
        if (line[i] ~ /^\.L/ || (i < n && line[i] ~ br)) next  # not one block
        if (line[i] ~ /\.4s|\tq[0-9]|, q[0-9]|\.16b|\.8h/) vec = 1
        if (i < n) body = body line[i] "\n"
      }
      if (!vec || (body in seen)) next                 # g++ sometimes emits a loop twice
      seen[body] = 1
      f = dir "/" fn "." (++k) ".loop.s"
      for (i = at[$NF]; i <= n; i++) print line[i] > f
      close(f)
    }
  ' "$1"
}

printf '%-22s %5s %9s %6s\n' function loop cyc/iter insns
for op in rmsnorm softmax silu rope rope_neox gemm; do
  for v in neon xsimd; do
    fn=mca_${v}_$op
    rm -f "$out/$fn".*.loop.s
    loops "$out/mca_float.s" "$fn"
    for f in "$out/$fn".*.loop.s; do
      [ -e "$f" ] || { echo "$fn: no vector loop" >&2; exit 1; }
      k=${f#"$out/$fn."}; k=${k%.loop.s}
      "$MCA" -mtriple=aarch64-linux-gnu -mcpu=cortex-a55 -iterations=$ITER "$f" > "$out/$fn.$k.mca.txt" 2> "$out/$fn.$k.err"
      if grep -q 'error:' "$out/$fn.$k.err"; then echo "$fn loop $k: llvm-mca failed" >&2; exit 1; fi
      awk -v t="$fn" -v k="$k" -v it=$ITER '/^Total Cycles:/ { c = $3 } /^Instructions:/ { i = $2 }
        END { printf "%-22s %5s %9.1f %6.0f\n", t, k, c / it, i / it }' "$out/$fn.$k.mca.txt"
    done
  done
done
echo "(loops and llvm-mca reports in $out)"
