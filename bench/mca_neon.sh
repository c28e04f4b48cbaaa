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

# measure FILE.s SYMBOL WPI ROWS REF: one table line for the loop of SYMBOL in FILE.s.
measure() {
  if ! cut_loop "$1" "$2" > "$out/$2.loop.s"; then
    echo "$2: no loop found in $1" >&2
    return 1
  fi
  if ! "$MCA" -mtriple=aarch64-linux-gnu -mcpu=cortex-a55 -iterations=$ITER "$out/$2.loop.s" \
       > "$out/$2.mca.txt" 2> "$out/$2.mca.err" || grep -q 'error:' "$out/$2.mca.err"; then
    echo "$2: llvm-mca failed, see $out/$2.mca.err" >&2
    return 1
  fi
  awk -v t="$2" -v w="$3" -v rows="$4" -v r="$5" -v it=$ITER '
    /^Total Cycles:/ { c = $3 } /^Instructions:/ { i = $2 }
    END { per = c / it * 256 / (w * rows)
          if (r > 0) printf "%-18s %9.1f %6.0f %14.1f %10d %7.2fx%s\n", t, c / it, i / it, per, r, per / r, (per <= 0.8 * r ? "" : "  (above 0.8x)")
          else printf "%-18s %9.1f %6.0f %14.1f %10s %8s\n", t, c / it, i / it, per, "-", "-" }
  ' "$out/$2.mca.txt"
}

# kernel symbol, weights per row per loop iteration, rows per call, llama.cpp NEON dotprod
# cycles per 256 weights of the kernel doing the same job, measured the same way (g++ 12.2 -O3
# -mcpu=cortex-a55 on ggml-cpu's arch/arm/quants.c and repack.cpp, llama.cpp de3ff81): its one-row
# vec_dot for our one-row and rows kernels; for the packed x4 decode lines, the repacked 4x4 GEMV
# that llama.cpp runs on a dotprod CPU without i8mm (ggml_gemv_q4_0_4x4_q8_0 118,
# ggml_gemv_q8_0_4x4_q8_0 132). The packed prefill and K-quant lines still compare with the one-row
# vec_dot (ggml's 4x4 GEMM is inline asm, its K-quant 8x4 GEMVs were not measured).
printf '%-18s %9s %6s %14s %10s %8s\n' kernel cyc/iter insns cyc/256w/row llama.cpp ratio
status=0
while read -r sym wpi rows ref; do
  case $sym in ''|'#'*) continue ;; esac
  measure "$out/mca_neon.s" "$sym" "$wpi" "$rows" "$ref" || status=1
done <<'TABLE'
# dotprod, one row (VecDotFn)
mca_q4_0 256 1 200
mca_q4_1 128 1 204
mca_q5_0 128 1 380
mca_q5_1 128 1 364
mca_q8_0 256 1 188
mca_q2_K 256 1 234
mca_q3_K 256 1 297
mca_q4_K 256 1 216
mca_q5_K 256 1 262
mca_q6_K 256 1 290
# dotprod, rows_per_call rows (VecDotRowsFn: what the GEMV/GEMM drivers call)
mca_rows_q4_0 64 4 200
mca_rows_q4_1 64 4 204
mca_rows_q5_0 64 4 380
mca_rows_q5_1 64 4 364
mca_rows_q8_0 64 4 188
mca_rows_q2_K 256 2 234
mca_rows_q3_K 256 2 297
mca_rows_q4_K 256 2 216
mca_rows_q5_K 256 2 262
mca_rows_q6_K 256 2 290
# packed x4 legacy (dotprod): one group of 4 rows, one token (decode) / 4 tokens (prefill tile)
mca_packed_q4_0 64 4 118
mca_packed_q8_0 64 4 132
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
# i-quants and ternary types, one row: dotprod, then ARMv8.0 (IQ4_NL also four rows). llama.cpp:
# its vec_dot's block loop the same way; for IQ4_NL and the IQ2 / IQ3 / IQ1 types that is its inner
# loop of 64 weights (x 4; the per-256 scale arithmetic outside it is not counted, in its favour).
mca_iq4_xs 256 1 205
mca_iq4_nl 512 1 228
mca_rows_iq4_nl 64 4 228
mca_iq2_xxs 256 1 292
mca_iq2_xs 256 1 288
mca_iq2_s 256 1 440
mca_iq3_xxs 256 1 408
mca_iq3_s 256 1 492
mca_iq1_s 256 1 360
mca_iq1_m 256 1 440
mca_tq2_0 256 1 136
mca_tq1_0 256 1 175
mca_v80_iq4_xs 256 1 0
mca_v80_iq4_nl 256 1 0
mca_v80_rows_iq4_nl 64 4 0
mca_v80_iq2_xxs 256 1 0
mca_v80_iq2_xs 256 1 0
mca_v80_iq2_s 256 1 0
mca_v80_iq3_xxs 256 1 0
mca_v80_iq3_s 256 1 0
mca_v80_iq1_s 256 1 0
mca_v80_iq1_m 256 1 0
mca_v80_tq2_0 256 1 0
mca_v80_tq1_0 256 1 0
# transcoded i-quant forms (resident IQ3_S, IQ2_XXS, IQ2_XS, IQ3_XXS; IQ2_S runs IQ2_XS's loops):
# decode (one row, one token) and the prefill tile (per token of kNibbleToks: 4 with dotprod, 2 on
# ARMv8.0, 4 with a scale per 16 weights); llama.cpp: its file-form vec_dot as above.
mca_iq3_s_t 256 1 492
mca_iq2_xxs_t 256 1 292
mca_iq2_xs_t 256 1 288
mca_iq3_xxs_t 256 1 408
mca_tile_iq3_s_t 256 4 492
mca_tile_iq2_xxs_t 256 4 292
mca_tile_iq2_xs_t 256 4 288
mca_tile_iq3_xxs_t 256 4 408
mca_v80_iq3_s_t 256 1 0
mca_v80_iq2_xxs_t 256 1 0
mca_v80_iq2_xs_t 256 1 0
mca_v80_iq3_xxs_t 256 1 0
mca_v80_tile_iq3_s_t 256 2 0
mca_v80_tile_iq2_xxs_t 256 2 0
mca_v80_tile_iq2_xs_t 256 4 0
mca_v80_tile_iq3_xxs_t 256 2 0
mca_iq4_xs_t 256 1 205
mca_v80_iq4_xs_t 256 1 0
mca_tile_iq4_xs_t 256 4 205
mca_v80_tile_iq4_xs_t 256 3 0
TABLE
# LLAMA_CPP=/path/to/llama.cpp: also measures llama.cpp's kernels the reference column quotes, from
# ggml-cpu's own sources under the same flags (gcc for its C file).
if [ -n "${LLAMA_CPP:-}" ]; then
  g=$LLAMA_CPP/ggml
  inc="-I$g/include -I$g/src -I$g/src/ggml-cpu"
  "${CC:-aarch64-linux-gnu-gcc}" -std=gnu11 -O3 -mcpu=cortex-a55 -DNDEBUG $inc -S "$g/src/ggml-cpu/arch/arm/quants.c" -o "$out/ggml_quants.s"
  "$CXX" -std=gnu++17 -O3 -mcpu=cortex-a55 -DNDEBUG $inc -S "$g/src/ggml-cpu/arch/arm/repack.cpp" -o "$out/ggml_repack.s"
  echo "llama.cpp ($(git -C "$LLAMA_CPP" log -1 --format=%h 2>/dev/null || echo '?')), same method:"
  while read -r file sym wpi rows; do
    measure "$out/ggml_$file.s" "$sym" "$wpi" "$rows" 0 || status=1
  done <<'GGML'
quants ggml_vec_dot_q4_0_q8_0 64 1
quants ggml_vec_dot_q4_1_q8_1 64 1
quants ggml_vec_dot_q5_0_q8_0 64 1
quants ggml_vec_dot_q5_1_q8_1 64 1
quants ggml_vec_dot_q8_0_q8_0 64 1
repack ggml_gemv_q4_0_4x4_q8_0 32 4
repack ggml_gemv_q8_0_4x4_q8_0 32 4
quants ggml_vec_dot_iq4_xs_q8_K 256 1
quants ggml_vec_dot_iq4_nl_q8_0 64 1
quants ggml_vec_dot_iq2_xxs_q8_K 64 1
quants ggml_vec_dot_iq2_xs_q8_K 64 1
quants ggml_vec_dot_iq2_s_q8_K 64 1
quants ggml_vec_dot_iq3_xxs_q8_K 64 1
quants ggml_vec_dot_iq3_s_q8_K 64 1
quants ggml_vec_dot_iq1_s_q8_K 64 1
quants ggml_vec_dot_iq1_m_q8_K 64 1
quants ggml_vec_dot_tq2_0_q8_K 256 1
quants ggml_vec_dot_tq1_0_q8_K 256 1
GGML
fi
echo "(ratio = ours / llama.cpp's dotprod kernel for the same job: one-row vec_dot, packed decode: its 4x4 GEMV; target <= 0.80x; loops and llvm-mca reports in $out)"
exit $status
