#!/bin/sh
# mca_neon.sh [OUTDIR]: cycles per 256 weights of each NEON dotprod kernel's block loop on the
# llvm-mca Cortex-A55 model (recipe: shared docs arm64-toolchain.md §8.2 - no .arch lines, loop cut
# by label, any "error:" from llvm-mca fails the run). Compares with llama.cpp's kernels measured
# the same way and the 0.8x target. A model, not a measurement: use it to compare loop variants.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-${TMPDIR:-/tmp}/edgellm-mca}
mkdir -p "$out"
CXX=${CXX:-aarch64-linux-gnu-g++}
MCA=${MCA:-llvm-mca-14}
ITER=1000
"$CXX" -std=c++17 -O3 -mcpu=cortex-a55 -I"$here/include" -S "$here/bench/mca_neon.cpp" -o "$out/mca_neon.s"

# The first loop of function $2 (from a local label to the first branch back to it), minus .arch.
cut_loop() {
  awk -v fn="$2" '
    index($0, fn ":") == 1       { on = 1; n = 0; next }
    !on                          { next }
    /^[ \t]*\.size[ \t]/         { exit 1 }
    /^[ \t]*\.arch[ \t]/         { next }
    { line[++n] = $0 }
    /^\.L[A-Za-z0-9_$.]+:/       { lab = $1; sub(/:.*/, "", lab); at[lab] = n; next }
    ($NF in at)                  { for (i = at[$NF]; i <= n; i++) print line[i]; exit 0 }
  ' "$1"
}

# type, weights per loop iteration, llama.cpp NEON dotprod cycles per 256 weights
printf '%-6s %10s %8s %12s %10s %8s\n' type cyc/iter insns cyc/256w llama.cpp ratio
status=0
while read -r type wpi ref; do
  cut_loop "$out/mca_neon.s" "mca_$type" > "$out/$type.loop.s"
  if ! "$MCA" -mtriple=aarch64-linux-gnu -mcpu=cortex-a55 -iterations=$ITER "$out/$type.loop.s" \
       > "$out/$type.mca.txt" 2> "$out/$type.mca.err" || grep -q 'error:' "$out/$type.mca.err"; then
    echo "$type: llvm-mca failed, see $out/$type.mca.err" >&2
    status=1
    continue
  fi
  awk -v t="$type" -v w="$wpi" -v r="$ref" -v it=$ITER '
    /^Total Cycles:/ { c = $3 } /^Instructions:/ { i = $2 }
    END { per = c / it * 256 / w
          if (r > 0) printf "%-6s %10.1f %8.0f %12.1f %10d %7.2fx%s\n", t, c / it, i / it, per, r, per / r, (per <= 0.8 * r ? "" : "  (above 0.8x)")
          else printf "%-6s %10.1f %8.0f %12.1f %10s %8s\n", t, c / it, i / it, per, "-", "-" }
  ' "$out/$type.mca.txt"
done <<'TABLE'
q4_0 128 200
q4_1 32 0
q5_0 32 0
q5_1 32 0
q8_0 128 188
q2_K 256 234
q3_K 256 297
q4_K 256 216
q5_K 256 262
q6_K 256 290
TABLE
echo "(ratio = ours / llama.cpp; target <= 0.80x; loops and llvm-mca reports in $out)"
exit $status
