// kernels(): fills the process-wide KernelTable once with the best kernels this build carries and
// this CPU runs. x86: the build target's level, or in a dispatch build (no AVX2 compile flags) the
// best level cpuid allows (kernels/x86/register.hpp), which the environment variable
// EDGELLM_X86_LEVEL can lower (to test another level). arm64: the dotprod kernels directly when
// the target has dotprod, and in a baseline build chosen at run time from getauxval(AT_HWCAP) &
// HWCAP_ASIMDDP.
#pragma once
#include <cstdlib>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/entry.hpp"
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
#if EDGELLM_HAS_X86_KERNELS
  for (Isa level : x86_compiled_levels())
    if (x86_cpu_runs(level)) v.push_back(level);
#endif
#if EDGELLM_HAS_NEON
  v.push_back(Isa::Neon);
  if (cpu_has_dotprod()) v.push_back(Isa::Dotprod);
#endif
  return v;
}

inline std::string isa_list(const std::vector<Isa>& isas) {
  std::string s;
  for (Isa i : isas) s += (s.empty() ? "" : ", ") + std::string(isa_name(i));
  return s;
}

// The registration tables this build carries (kernels/entry.hpp), whether or not this CPU runs
// them: the reference, each compiled x86 level, NEON and dotprod.
inline std::vector<IsaKernelEntries> compiled_kernel_entries() {
  std::vector<IsaKernelEntries> v{{Isa::Ref, kRefKernelEntries, kRefNotSupported}};
#if EDGELLM_HAS_X86_KERNELS
  for (Isa level : x86_compiled_levels()) v.push_back(x86_kernel_entries(level));
#endif
#if EDGELLM_HAS_NEON
  v.push_back({Isa::Neon, kNeonKernelEntries, kNeonNotSupported});
  v.push_back({Isa::Dotprod, kDotprodKernelEntries, kDotprodNotSupported, Isa::Neon});
#endif
  return v;
}

// A table using the best variants up to max_isa (tests build one per ISA to compare them). An x86
// level this build does not carry or this CPU does not run is an Error.
inline KernelTable make_kernel_table(Isa max_isa) {
  KernelTable t;
  register_ref_kernels(t);
  t.isa = Isa::Ref;
  if (max_isa == Isa::Ref) return t;
#if EDGELLM_HAS_X86_KERNELS
  if (max_isa != Isa::Neon && max_isa != Isa::Dotprod) {
    EDGELLM_CHECK(x86_cpu_runs(max_isa) && register_x86_kernels(t, max_isa), "x86 kernel level ",
                  isa_name(max_isa), ": not one this build and CPU run (", isa_list(available_isas()), ")");
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

// The ISA of the process-wide table: the best available one, or on x86 the level named by
// `x86_level` (the environment variable EDGELLM_X86_LEVEL: "ref", "avx2", ...; null or empty: the
// best) if this build and CPU run it, else an Error naming the variable and the levels available.
inline Isa default_isa(const char* x86_level) {
  const std::vector<Isa> isas = available_isas();
#if EDGELLM_HAS_X86_KERNELS
  if (x86_level && *x86_level) {
    for (Isa i : isas)
      if (std::string(isa_name(i)) == x86_level) return i;
    throw_error("EDGELLM_X86_LEVEL=", x86_level, ": not a kernel level this build and CPU run (available: ",
                isa_list(isas), ")");
  }
#else
  (void)x86_level;
#endif
  return isas.back();
}

// The process-wide table, built on first use (thread-safe static initialisation; a bad
// EDGELLM_X86_LEVEL throws Error from the first call).
inline const KernelTable& kernels() {
  static const KernelTable table = make_kernel_table(default_isa(std::getenv("EDGELLM_X86_LEVEL")));
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
