#!/bin/sh
# mca_neon.sh [OUTDIR]: cycles per 256 weights (per row) of each NEON kernel's block loop on the
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

# kernel symbol, weights per row per loop iteration, rows per call, llama.cpp NEON dotprod
# cycles per 256 weights (its one-row vec_dot: on a CPU without i8mm that is also its GEMV).
printf '%-18s %9s %6s %14s %10s %8s\n' kernel cyc/iter insns cyc/256w/row llama.cpp ratio
status=0
while read -r sym wpi rows ref; do
  case $sym in ''|'#'*) continue ;; esac
  if ! cut_loop "$out/mca_neon.s" "$sym" > "$out/$sym.loop.s"; then
    echo "$sym: no loop found in $out/mca_neon.s" >&2
    status=1
    continue
  fi
  if ! "$MCA" -mtriple=aarch64-linux-gnu -mcpu=cortex-a55 -iterations=$ITER "$out/$sym.loop.s" \
       > "$out/$sym.mca.txt" 2> "$out/$sym.mca.err" || grep -q 'error:' "$out/$sym.mca.err"; then
    echo "$sym: llvm-mca failed, see $out/$sym.mca.err" >&2
    status=1
    continue
  fi
  awk -v t="$sym" -v w="$wpi" -v rows="$rows" -v r="$ref" -v it=$ITER '
    /^Total Cycles:/ { c = $3 } /^Instructions:/ { i = $2 }
    END { per = c / it * 256 / (w * rows)
          if (r > 0) printf "%-18s %9.1f %6.0f %14.1f %10d %7.2fx%s\n", t, c / it, i / it, per, r, per / r, (per <= 0.8 * r ? "" : "  (above 0.8x)")
          else printf "%-18s %9.1f %6.0f %14.1f %10s %8s\n", t, c / it, i / it, per, "-", "-" }
  ' "$out/$sym.mca.txt"
done <<'TABLE'
# dotprod, one row (VecDotFn)
mca_q4_0 256 1 200
mca_q4_1 128 1 0
mca_q5_0 128 1 0
mca_q5_1 128 1 0
mca_q8_0 256 1 188
mca_q2_K 256 1 234
mca_q3_K 256 1 297
mca_q4_K 256 1 216
mca_q5_K 256 1 262
mca_q6_K 256 1 290
# dotprod, rows_per_call rows (VecDotRowsFn: what the GEMV/GEMM drivers call)
mca_rows_q4_0 64 4 200
mca_rows_q4_1 64 4 0
mca_rows_q5_0 64 4 0
mca_rows_q5_1 64 4 0
mca_rows_q8_0 64 4 188
mca_rows_q2_K 256 2 234
mca_rows_q3_K 256 2 297
mca_rows_q4_K 256 2 216
mca_rows_q5_K 256 2 262
mca_rows_q6_K 256 2 290
# packed x4 legacy (dotprod): one group of 4 rows, one token (decode) / 4 tokens (prefill tile)
mca_packed_q4_0 64 4 200
mca_packed_q8_0 64 4 188
mca_packed4_q4_0 128 4 200
mca_packed4_q8_0 128 4 188
# ARMv8.0 (smull/smlal2/sadalp), one row and rows_per_call rows
mca_v80_q4_0 256 1 0
mca_v80_q4_1 128 1 0
mca_v80_q5_0 128 1 0
mca_v80_q5_1 128 1 0
mca_v80_q8_0 256 1 0
mca_v80_q2_K 256 1 0
mca_v80_q3_K 256 1 0
mca_v80_q4_K 256 1 0
mca_v80_q5_K 256 1 0
mca_v80_q6_K 256 1 0
mca_v80_rows_q4_0 64 4 0
mca_v80_rows_q4_1 64 4 0
mca_v80_rows_q5_0 64 4 0
mca_v80_rows_q5_1 64 4 0
mca_v80_rows_q8_0 64 4 0
mca_v80_rows_q2_K 256 2 0
mca_v80_rows_q3_K 256 2 0
mca_v80_rows_q4_K 256 2 0
mca_v80_rows_q5_K 256 2 0
mca_v80_rows_q6_K 256 2 0
# packed x4 K-quants (dotprod, decode)
mca_packed_q2_K 256 4 234
mca_packed_q3_K 256 4 297
mca_packed_q4_K 256 4 216
mca_packed_q5_K 256 4 262
mca_packed_q6_K 256 4 290
mca_packed2_q2_K 512 4 234
mca_packed2_q3_K 512 4 297
mca_packed2_q4_K 512 4 216
mca_packed2_q5_K 512 4 262
mca_packed2_q6_K 512 4 290
mca_unpacked_q2_K 1024 4 234
mca_unpacked_q3_K 1024 4 297
mca_unpacked_q6_K 1024 4 290
mca_unpacked_q4_K 1024 4 216
mca_unpacked_q5_K 1024 4 262
mca_unpack_q2_K 256 4 0
mca_unpack_q3_K 256 4 0
mca_unpack_q6_K 256 4 0
mca_unpack_q4_K 256 4 0
mca_unpack_q5_K 256 4 0
TABLE
echo "(ratio = ours / llama.cpp's one-row dotprod kernel; target <= 0.80x; loops and llvm-mca reports in $out)"
exit $status
