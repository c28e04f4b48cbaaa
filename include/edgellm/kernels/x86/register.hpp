// The x86 kernels (kernels/x86/*.hpp: AVX2 / AVX-VNNI / AVX-512 intrinsics), compiled once per
// level into namespace edgellm::x86_<level> (kernels/x86/register_level-inl.hpp, level.hpp), and register_x86_kernels(t,
// level) to fill a table with one of them.
//   Built for an AVX2 + FMA + F16C target (-march=native, -march=haswell ...): one level, the
//   target's (its compile macros say which), compiled with the target's flags.
//   Built without (plain -O2): avx2, avx2-vnni and avx512-vnni, each under a function target
//   attribute, for kernels/select.hpp to pick at run time from cpuid (kernels/x86/cpu.hpp).
// The same source either way, so a level computes the same bits in both builds.
#pragma once
#include "edgellm/config.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/entry.hpp"

#if EDGELLM_HAS_X86_KERNELS
#include "edgellm/kernels/x86/cpu.hpp"
#include "edgellm/kernels/x86/level.hpp"

#if EDGELLM_X86_DISPATCH
#define EDGELLM_X86_LEVEL_NS x86_avx2
#define EDGELLM_X86_LEVEL_ISA Isa::Avx2
#define EDGELLM_X86_LEVEL_TARGET "avx2,fma,f16c"
#define EDGELLM_X86_AVXVNNI 0
#define EDGELLM_X86_AVX512 0
#define EDGELLM_X86_AVX512VNNI 0
#define EDGELLM_X86_GFNI 0
#define EDGELLM_X86_AVX512VBMI 0
#include "edgellm/kernels/x86/register_level-inl.hpp"

#define EDGELLM_X86_LEVEL_NS x86_avx2_vnni
#define EDGELLM_X86_LEVEL_ISA Isa::Avx2Vnni
// EDGELLM_X86_EMULATE_AVXVNNI, for tests only (a dispatch build of the kernel tests, tests/
// CMakeLists.txt): this level without the avxvnni target, its one VNNI instruction computed exactly
// from AVX2 (kernels/x86/common-inl.hpp), run on every AVX2 CPU, so that a machine without AVX-VNNI
// checks the rest of the level's code against the reference. Not for programs: it is slower.
#if defined(EDGELLM_X86_EMULATE_AVXVNNI)
#define EDGELLM_X86_LEVEL_TARGET "avx2,fma,f16c"
#else
#define EDGELLM_X86_LEVEL_TARGET "avx2,fma,f16c,avxvnni"
#endif
#define EDGELLM_X86_AVXVNNI 1
#define EDGELLM_X86_AVX512 0
#define EDGELLM_X86_AVX512VNNI 0
#define EDGELLM_X86_GFNI 0
#define EDGELLM_X86_AVX512VBMI 0
#include "edgellm/kernels/x86/register_level-inl.hpp"

// What AVX-512 VNNI Xeons (Cascade Lake on) and Zen 4 run; GFNI / VBMI forms only in builds
// for a target that has them.
#define EDGELLM_X86_LEVEL_NS x86_avx512_vnni
#define EDGELLM_X86_LEVEL_ISA Isa::Avx512Vnni
#define EDGELLM_X86_LEVEL_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"
#define EDGELLM_X86_AVXVNNI 0
#define EDGELLM_X86_AVX512 1
#define EDGELLM_X86_AVX512VNNI 1
#define EDGELLM_X86_GFNI 0
#define EDGELLM_X86_AVX512VBMI 0
#include "edgellm/kernels/x86/register_level-inl.hpp"

namespace edgellm {
// The levels compiled in, lowest first.
inline const std::vector<Isa>& x86_compiled_levels() {
  static const std::vector<Isa> levels{Isa::Avx2, Isa::Avx2Vnni, Isa::Avx512Vnni};
  return levels;
}
}  // namespace edgellm

#else  // the build target's level
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#define EDGELLM_X86_AVX512 1
#if defined(__AVX512VNNI__)
#define EDGELLM_X86_AVX512VNNI 1
#define EDGELLM_X86_LEVEL_NS x86_avx512_vnni
#define EDGELLM_X86_LEVEL_ISA Isa::Avx512Vnni
#else
#define EDGELLM_X86_AVX512VNNI 0
#define EDGELLM_X86_LEVEL_NS x86_avx512
#define EDGELLM_X86_LEVEL_ISA Isa::Avx512
#endif
#else
#define EDGELLM_X86_AVX512 0
#define EDGELLM_X86_AVX512VNNI 0
#endif
#if defined(__AVXVNNI__)
#define EDGELLM_X86_AVXVNNI 1
#else
#define EDGELLM_X86_AVXVNNI 0
#endif
#if !defined(EDGELLM_X86_LEVEL_NS) && EDGELLM_X86_AVXVNNI
#define EDGELLM_X86_LEVEL_NS x86_avx2_vnni
#define EDGELLM_X86_LEVEL_ISA Isa::Avx2Vnni
#elif !defined(EDGELLM_X86_LEVEL_NS)
#define EDGELLM_X86_LEVEL_NS x86_avx2
#define EDGELLM_X86_LEVEL_ISA Isa::Avx2
#endif
#if defined(__GFNI__)
#define EDGELLM_X86_GFNI 1
#else
#define EDGELLM_X86_GFNI 0
#endif
#if defined(__AVX512VBMI__)
#define EDGELLM_X86_AVX512VBMI 1
#else
#define EDGELLM_X86_AVX512VBMI 0
#endif
namespace edgellm {
namespace EDGELLM_X86_LEVEL_NS {}
namespace x86_native = EDGELLM_X86_LEVEL_NS;  // the one level of this build
}  // namespace edgellm
#include "edgellm/kernels/x86/register_level-inl.hpp"

namespace edgellm {
inline const std::vector<Isa>& x86_compiled_levels() {
  static const std::vector<Isa> levels{x86_native::kIsa};
  return levels;
}
}  // namespace edgellm
#endif

namespace edgellm {

// Does this CPU run the level? (A build for an AVX2 target runs on such a CPU by construction.)
inline bool x86_cpu_runs(Isa level) {
#if !EDGELLM_X86_DISPATCH
  if (level == x86_native::kIsa) return true;
#endif
  const X86Cpu& c = x86_cpu();
  switch (level) {
    case Isa::Avx2: return c.avx2;
#if EDGELLM_X86_DISPATCH && defined(EDGELLM_X86_EMULATE_AVXVNNI)
    case Isa::Avx2Vnni: return c.avx2;
#else
    case Isa::Avx2Vnni: return c.avx_vnni;
#endif
    case Isa::Avx512: return c.avx512;
    case Isa::Avx512Vnni: return c.avx512_vnni;
    default: return false;
  }
}

// A compiled level's registration table (the completeness test reads it); entries empty for a
// level this build does not carry.
inline IsaKernelEntries x86_kernel_entries(Isa level) {
#if EDGELLM_X86_DISPATCH
  switch (level) {
    case Isa::Avx2: return {level, x86_avx2::kKernelEntries, x86_avx2::kNotSupported};
    case Isa::Avx2Vnni: return {level, x86_avx2_vnni::kKernelEntries, x86_avx2_vnni::kNotSupported};
    case Isa::Avx512Vnni: return {level, x86_avx512_vnni::kKernelEntries, x86_avx512_vnni::kNotSupported};
    default: return {level, {}, {}};
  }
#else
  if (level != x86_native::kIsa) return {level, {}, {}};
  return {level, x86_native::kKernelEntries, x86_native::kNotSupported};
#endif
}

// Fills t with a compiled level's kernels (over register_ref_kernels' entries); false for a level
// this build does not carry.
inline bool register_x86_kernels(KernelTable& t, Isa level) {
#if EDGELLM_X86_DISPATCH
  switch (level) {
    case Isa::Avx2: x86_avx2::register_kernels(t); return true;
    case Isa::Avx2Vnni: x86_avx2_vnni::register_kernels(t); return true;
    case Isa::Avx512Vnni: x86_avx512_vnni::register_kernels(t); return true;
    default: return false;
  }
#else
  if (level != x86_native::kIsa) return false;
  x86_native::register_kernels(t);
  return true;
#endif
}

}  // namespace edgellm
#endif  // EDGELLM_HAS_X86_KERNELS
