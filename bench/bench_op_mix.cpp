// bench_op_mix: cycles per step of the AVX2 instruction mixes our integer tiles are made of, run
// from L1 on independent registers (no data dependence across steps but the accumulators'), so
// what is measured is how many of each mix the core issues a cycle. One step is 32 int8
// products into int32 lanes (one 32-byte vector of 8 rows x 4 weights, or of 32 weights, against
// one token). The mixes:
//   mul      vpmaddubsw + vpmaddwd + vpaddd: the multiply pair every AVX2 tile without VNNI pays
//   k        + vpshufd: the K-form tiles' step (a token's 4 bytes taken to every lane)
//   signed   + vpbroadcastd + vpsignb: the sign trick of the IQ4_XS / IQ4_NL tiles (and of
//            llama.cpp's iqp and tinyBLAS tiles): |w| x (a with w's sign), both int8 signed
//   signed-xs  the same with (a ^ m) - m for vpsignb (m: w's sign bytes): more operations, on any port
//   t3       the 3-bit IQ2 decode step: code mask, table shuffle, sign bits or 1, activation load,
//            vpsignb, the multiply pair, the sign bits' doubling
//   t3-blend   the same with one vpblendvb between the activations and their negations instead
//            of the or and vpsignb
//   biased   a sign-free lookup (weights + bias from one shuffle, the bias's share subtracted in
//            int16 from a per-token vector): the lower bound of a form with the sign in its index
// The clock is estimated from a chain of dependent adds (1 cycle each), so turbo and the host's
// speed regime are in both. Prints a markdown table. x86-64 with AVX2 only; elsewhere it says so.
// Usage: bench_op_mix [--iters N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cpu_name.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
namespace {

alignas(64) unsigned char g_buf[128];

// Registers: temporaries 1-6, accumulators 7-8, constants 9-15 (set once, values do not matter
// for the timing). %0: g_buf.
#define EL_MUL(t, a)                                                                            \
  "vpmaddubsw %%ymm15, %%ymm12, %%ymm" #t "\n vpmaddwd %%ymm13, %%ymm" #t ", %%ymm" #t "\n " \
  "vpaddd %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n "
#define EL_K(t, a)                                                                                       \
  "vpshufd $0x55, %%ymm15, %%ymm" #t "\n vpmaddubsw %%ymm" #t ", %%ymm12, %%ymm" #t "\n "              \
  "vpmaddwd %%ymm13, %%ymm" #t ", %%ymm" #t "\n vpaddd %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n "
#define EL_SIGNED(t, a)                                                                                  \
  "vpbroadcastd (%0), %%ymm" #t "\n vpsignb %%ymm11, %%ymm" #t ", %%ymm" #t "\n "                       \
  "vpmaddubsw %%ymm" #t ", %%ymm12, %%ymm" #t "\n vpmaddwd %%ymm13, %%ymm" #t ", %%ymm" #t "\n "        \
  "vpaddd %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n "
#define EL_SIGNED_XS(t, a)                                                                               \
  "vpbroadcastd (%0), %%ymm" #t "\n vpxor %%ymm11, %%ymm" #t ", %%ymm" #t "\n "                         \
  "vpsubb %%ymm11, %%ymm" #t ", %%ymm" #t "\n vpmaddubsw %%ymm" #t ", %%ymm12, %%ymm" #t "\n "          \
  "vpmaddwd %%ymm13, %%ymm" #t ", %%ymm" #t "\n vpaddd %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n "
// t3: t = table[codes & mask]; s = signs | 1; y = load; y = sign(y, s); mul; signs += signs
#define EL_T3(t, s, a)                                                                                   \
  "vpand %%ymm10, %%ymm15, %%ymm" #t "\n vpshufb %%ymm" #t ", %%ymm14, %%ymm" #t "\n "                  \
  "vpor %%ymm11, %%ymm9, %%ymm" #s "\n vmovdqu (%0), %%ymm6\n vpsignb %%ymm" #s ", %%ymm6, %%ymm6\n "    \
  "vpmaddubsw %%ymm6, %%ymm" #t ", %%ymm" #t "\n vpmaddwd %%ymm13, %%ymm" #t ", %%ymm" #t "\n "         \
  "vpaddd %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n vpaddb %%ymm9, %%ymm9, %%ymm9\n "
#define EL_T3_BLEND(t, s, a)                                                                             \
  "vpand %%ymm10, %%ymm15, %%ymm" #t "\n vpshufb %%ymm" #t ", %%ymm14, %%ymm" #t "\n "                  \
  "vmovdqu (%0), %%ymm" #s "\n vpblendvb %%ymm9, 32(%0), %%ymm" #s ", %%ymm" #s "\n "                   \
  "vpmaddubsw %%ymm" #s ", %%ymm" #t ", %%ymm" #t "\n vpmaddwd %%ymm13, %%ymm" #t ", %%ymm" #t "\n "    \
  "vpaddd %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n vpaddb %%ymm9, %%ymm9, %%ymm9\n "
#define EL_BIASED(t, a)                                                                                  \
  "vpand %%ymm10, %%ymm15, %%ymm" #t "\n vpshufb %%ymm" #t ", %%ymm14, %%ymm" #t "\n "                  \
  "vpmaddubsw (%0), %%ymm" #t ", %%ymm" #t "\n vpsubw 32(%0), %%ymm" #t ", %%ymm" #t "\n "               \
  "vpmaddwd %%ymm13, %%ymm" #t ", %%ymm" #t "\n vpaddd %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n "

#define EL_CLOBBER                                                                                   \
  "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", \
      "xmm13", "xmm14", "xmm15", "memory"
#define EL_8(M) M(1, 7) M(2, 8) M(3, 7) M(4, 8) M(5, 7) M(1, 8) M(2, 7) M(3, 8)
#define EL_8S(M) M(1, 4, 7) M(2, 5, 8) M(3, 4, 7) M(1, 5, 8) M(2, 4, 7) M(3, 5, 8) M(1, 4, 7) M(2, 5, 8)

enum Mix { kAdds, kMul, kK, kSigned, kSignedXs, kT3, kT3Blend, kBiased };

template <Mix M>
__attribute__((target("avx2"))) double seconds(long iters) {
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < iters; ++i) {
    if constexpr (M == kAdds)  // 8 dependent adds: 8 cycles
      asm volatile("add $1, %%rax\n add $1, %%rax\n add $1, %%rax\n add $1, %%rax\n"
                   "add $1, %%rax\n add $1, %%rax\n add $1, %%rax\n add $1, %%rax\n" ::: "rax");
    if constexpr (M == kMul) asm volatile(EL_8(EL_MUL)::"r"(g_buf) : EL_CLOBBER);
    if constexpr (M == kK) asm volatile(EL_8(EL_K)::"r"(g_buf) : EL_CLOBBER);
    if constexpr (M == kSigned) asm volatile(EL_8(EL_SIGNED)::"r"(g_buf) : EL_CLOBBER);
    if constexpr (M == kSignedXs) asm volatile(EL_8(EL_SIGNED_XS)::"r"(g_buf) : EL_CLOBBER);
    if constexpr (M == kT3) asm volatile(EL_8S(EL_T3)::"r"(g_buf) : EL_CLOBBER);
    if constexpr (M == kT3Blend) asm volatile(EL_8S(EL_T3_BLEND)::"r"(g_buf) : EL_CLOBBER);
    if constexpr (M == kBiased) asm volatile(EL_8(EL_BIASED)::"r"(g_buf) : EL_CLOBBER);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Row {
  const char* name;
  int ops;  // vector instructions a step, loads counted
  double (*run)(long);
};

}  // namespace

int main(int argc, char** argv) {
  long iters = 20000000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iters = std::strtol(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "error: unknown argument %s (usage: bench_op_mix [--iters N])\n", argv[i]);
      return 1;
    }
  }
  if (iters < 1) {
    std::fprintf(stderr, "error: --iters must be at least 1\n");
    return 1;
  }
  if (!__builtin_cpu_supports("avx2")) {
    std::printf("bench_op_mix: skipped: this CPU has no AVX2\n");
    return 0;
  }
  std::printf("bench_op_mix on %s, %ld iterations of 8 steps\n\n", cpu_name().c_str(), iters);
  const Row rows[] = {{"mul", 3, seconds<kMul>},        {"k", 4, seconds<kK>},
                      {"signed", 5, seconds<kSigned>},  {"signed-xs", 6, seconds<kSignedXs>},
                      {"t3", 9, seconds<kT3>},          {"t3-blend", 8, seconds<kT3Blend>},
                      {"biased", 6, seconds<kBiased>}};
  std::printf("| mix | instructions a step | cycles a step | instructions a cycle |\n| --- | ---: | ---: | ---: |\n");
  for (const Row& r : rows) {
    // the clock measured next to each mix: the host's speed may change between rows
    const double clock = 8.0 * double(iters) / seconds<kAdds>(iters);
    const double cycles = r.run(iters) * clock / (8.0 * double(iters));
    std::printf("| %s | %d | %.2f | %.2f |\n", r.name, r.ops, cycles, r.ops / cycles);
  }
  return 0;
}
#else
int main() {
  std::printf("bench_op_mix: skipped: x86-64 only (%s)\n", cpu_name().c_str());
  return 0;
}
#endif
