// The headers the x86 kernels use, and EDGELLM_X86_BEGIN / EDGELLM_X86_END around a level's code.
//
// A level's kernels are written in kernels/x86/*-inl.hpp: plain code (intrinsics, #if or
// `if constexpr` on the level's forms below), no include guard, no includes, no namespace. They are
// compiled once per level from one place: kernels/x86/register.hpp defines the level's macros and
// includes kernels/x86/register_level-inl.hpp, which opens
//   EDGELLM_X86_BEGIN namespace edgellm::EDGELLM_X86_LEVEL_NS {
// includes the *-inl.hpp files in dependency order, adds the level's table, and closes both.
// While a level is compiled register.hpp defines
//   EDGELLM_X86_LEVEL_NS      the namespace (x86_avx2, x86_avx2_vnni, x86_avx512, x86_avx512_vnni)
//   EDGELLM_X86_LEVEL_ISA     its Isa (Isa::Avx2, ...)
//   EDGELLM_X86_LEVEL_TARGET  the function target attribute (dispatch builds)
//   EDGELLM_X86_AVXVNNI, EDGELLM_X86_AVX512 (F+BW+VL+DQ), EDGELLM_X86_AVX512VNNI, EDGELLM_X86_GFNI,
//   EDGELLM_X86_AVX512VBMI, EDGELLM_X86_VNNI (either VNNI)
//                             0 / 1: the forms the code takes (#if), not the compiler's macros.
// Why intrinsics per level and not xsimd: docs/ARCHITECTURE.md, "The x86 kernels".
#pragma once
#include "edgellm/config.hpp"

#if EDGELLM_HAS_X86_KERNELS
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "edgellm/core/dtype.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/layouts/packed_kquants.hpp"
#include "edgellm/kernels/layouts/packed_legacy.hpp"
#include "edgellm/kernels/layouts/transcoded_iquants.hpp"
#include "edgellm/kernels/layouts/unpack_u8.hpp"
#include "edgellm/kernels/scalar/float_ops.hpp"
#include "edgellm/kernels/x86/cpu.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/iq_tables.hpp"
#include "edgellm/quant/scales.hpp"

#define EDGELLM_PRAGMA_(...) _Pragma(#__VA_ARGS__)
#define EDGELLM_PRAGMA(...) EDGELLM_PRAGMA_(__VA_ARGS__)  // expands macros in the pragma first

// In a dispatch build (no AVX2 compile flags) every function of a level gets the level's target
// attribute; in a build for an AVX2 target the flags cover them. g++ 12 reports false positives
// (-Wmaybe-uninitialized, -Wuninitialized) inside <immintrin.h>'s _mm512_undefined_* helpers
// expanded into the kernels: silenced for the kernels' code only.
#if defined(__clang__)
#define EDGELLM_X86_WARNINGS_BEGIN
#define EDGELLM_X86_WARNINGS_END
#else
#define EDGELLM_X86_WARNINGS_BEGIN                                  \
  _Pragma("GCC diagnostic push")                                    \
  _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")       \
  _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define EDGELLM_X86_WARNINGS_END _Pragma("GCC diagnostic pop")
#endif
#if !EDGELLM_X86_DISPATCH
#define EDGELLM_X86_BEGIN EDGELLM_X86_WARNINGS_BEGIN
#define EDGELLM_X86_END EDGELLM_X86_WARNINGS_END
#elif defined(__clang__)
#define EDGELLM_X86_BEGIN \
  EDGELLM_PRAGMA(clang attribute push(__attribute__((target(EDGELLM_X86_LEVEL_TARGET))), apply_to = function))
#define EDGELLM_X86_END _Pragma("clang attribute pop")
#else
#define EDGELLM_X86_BEGIN \
  EDGELLM_X86_WARNINGS_BEGIN _Pragma("GCC push_options") EDGELLM_PRAGMA(GCC target(EDGELLM_X86_LEVEL_TARGET))
#define EDGELLM_X86_END _Pragma("GCC pop_options") EDGELLM_X86_WARNINGS_END
#endif
#endif  // EDGELLM_HAS_X86_KERNELS
