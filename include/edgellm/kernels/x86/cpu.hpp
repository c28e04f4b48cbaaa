// What this x86 CPU runs, asked of cpuid and of the OS (xgetbv: the vector register state it saves
// on a context switch), for the run-time choice of the x86 kernel level (kernels/select.hpp).
// GCC / clang on x86-64 only; standard library and <cpuid.h>.
#pragma once
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

#include <cstdint>

namespace edgellm {

struct X86Cpu {
  bool avx2 = false;        // AVX2 + FMA + F16C, with the OS saving the ymm state
  bool avx_vnni = false;    // AVX-VNNI (VEX vpdpbusd: Alder Lake and later)
  bool avx512 = false;      // AVX-512 F + BW + VL + DQ, with the OS saving the zmm and mask state
  bool avx512_vnni = false;  // and AVX512-VNNI
  bool gfni = false;
  bool avx512_vbmi = false;
};

inline X86Cpu detect_x86_cpu() {
  X86Cpu c;
  unsigned a = 0, b = 0, cx = 0, d = 0;
  if (!__get_cpuid_count(1, 0, &a, &b, &cx, &d)) return c;
  const bool fma = cx >> 12 & 1, osxsave = cx >> 27 & 1, avx = cx >> 28 & 1, f16c = cx >> 29 & 1;
  if (!osxsave || !avx) return c;
  uint32_t xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool os_ymm = (xcr0_lo & 0x6) == 0x6;             // SSE and AVX state
  const bool os_zmm = os_ymm && (xcr0_lo & 0xE0) == 0xE0;  // opmask, ZMM0-15 high halves, ZMM16-31
  unsigned a7 = 0, b7 = 0, c7 = 0, d7 = 0;
  if (!__get_cpuid_count(7, 0, &a7, &b7, &c7, &d7)) return c;
  c.avx2 = os_ymm && fma && f16c && (b7 >> 5 & 1);
  const bool f = b7 >> 16 & 1, dq = b7 >> 17 & 1, bw = b7 >> 30 & 1, vl = b7 >> 31 & 1;
  c.avx512 = c.avx2 && os_zmm && f && dq && bw && vl;
  c.avx512_vnni = c.avx512 && (c7 >> 11 & 1);
  c.avx512_vbmi = c.avx512 && (c7 >> 1 & 1);
  c.gfni = c.avx2 && (c7 >> 8 & 1);
  unsigned a71 = 0, b71 = 0, c71 = 0, d71 = 0;
  if (a7 >= 1 && __get_cpuid_count(7, 1, &a71, &b71, &c71, &d71)) c.avx_vnni = c.avx2 && (a71 >> 4 & 1);
  return c;
}

// Asked once per process.
inline const X86Cpu& x86_cpu() {
  static const X86Cpu cpu = detect_x86_cpu();
  return cpu;
}

}  // namespace edgellm
#endif
