// select_kernels(): fills the KernelTable once. x86 SIMD (kernels/x86/) is chosen at compile time;
// on arm64 the dotprod kernels are used directly when the target has dotprod, and in a baseline
// build chosen at run time from getauxval(AT_HWCAP) & HWCAP_ASIMDDP.
#pragma once
#include <string>
#include <vector>

#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/scalar/register.hpp"
#include "edgellm/kernels/neon/register.hpp"
#include "edgellm/kernels/x86/register.hpp"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

namespace edgellm {

// Does this CPU execute sdot/udot? Compile-time yes for a dotprod target, else asked of the kernel.
inline bool cpu_has_dotprod() {
#if EDGELLM_HAS_DOTPROD
  return true;
#elif defined(__aarch64__) && defined(__linux__)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}

// The instruction sets this build carries and this CPU can run, best last.
inline std::vector<Isa> available_isas() {
  std::vector<Isa> v{Isa::Ref};
#if EDGELLM_HAS_XSIMD
  v.push_back(Isa::X86);
#endif
#if EDGELLM_HAS_NEON
  v.push_back(Isa::Neon);
  if (cpu_has_dotprod()) v.push_back(Isa::Dotprod);
#endif
  return v;
}

// A table using the best variants up to max_isa (tests build one per ISA to compare them).
inline KernelTable make_kernel_table(Isa max_isa) {
  KernelTable t;
  register_ref_kernels(t);
  t.isa = Isa::Ref;
  if (max_isa == Isa::Ref) return t;
#if EDGELLM_HAS_XSIMD
  if (max_isa == Isa::X86) {
    register_x86_kernels(t);
    t.isa = Isa::X86;
    t.stream_decode = true;
  }
#endif
#if EDGELLM_HAS_NEON
  if (max_isa == Isa::Neon || max_isa == Isa::Dotprod) {
    const bool dp = max_isa == Isa::Dotprod && cpu_has_dotprod();
    register_neon_kernels(t, dp);
    t.isa = dp ? Isa::Dotprod : Isa::Neon;
  }
#endif
  return t;
}

// The process-wide table, built on first use (thread-safe static initialisation).
inline const KernelTable& kernels() {
  static const KernelTable table = make_kernel_table(available_isas().back());
  return table;
}

// One line per weight type that can be multiplied: "q4_K: dotprod (activations q8_K)".
inline std::string describe_kernels(const KernelTable& t) {
  std::string s = std::string("kernels: ") + isa_name(t.isa) + ", float helpers " + t.f.variant + "\n";
  for (uint32_t id = 0; id < kDTypeCount; ++id) {
    const TypeKernels& k = t.types[id];
    if (!k.vec_dot) continue;
    s += std::string("  ") + kDTypeTable[id].name + ": " + k.variant + " (activations " +
         dtype_name(k.vec_dot_type) + ")\n";
  }
  return s;
}

}  // namespace edgellm
