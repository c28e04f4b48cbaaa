// Compile-time feature detection and small macros. Includes nothing but <cassert>.
#pragma once
#include <cassert>

#if defined(__aarch64__) && defined(__ARM_NEON)
#define EDGELLM_HAS_NEON 1
#else
#define EDGELLM_HAS_NEON 0
#endif

// Whole translation unit compiled for a dotprod CPU (e.g. -mcpu=cortex-a55).
#if EDGELLM_HAS_NEON && defined(__ARM_FEATURE_DOTPROD)
#define EDGELLM_HAS_DOTPROD 1
#else
#define EDGELLM_HAS_DOTPROD 0
#endif

#if EDGELLM_HAS_NEON && defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)
#define EDGELLM_HAS_NEON_FP16 1
#else
#define EDGELLM_HAS_NEON_FP16 0
#endif

// x86 SIMD kernels (kernels/x86/, intrinsics) with GCC or clang on x86-64; define
// EDGELLM_NO_X86_KERNELS to leave them out (scalar reference kernels only). A translation unit
// compiled for an AVX2 + FMA + F16C target (-march=native, -march=haswell, ...) carries its target's
// level only; any other (a plain -O2 build) is a dispatch build: every level compiled with function
// target attributes, the best one this CPU runs chosen at run time (kernels/x86/register.hpp).
#if !defined(EDGELLM_NO_X86_KERNELS) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EDGELLM_HAS_X86_KERNELS 1
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define EDGELLM_X86_DISPATCH 0
#else
#define EDGELLM_X86_DISPATCH 1
#endif
#else
#define EDGELLM_HAS_X86_KERNELS 0
#define EDGELLM_X86_DISPATCH 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define EDGELLM_RESTRICT __restrict__
#define EDGELLM_LIKELY(x) __builtin_expect(!!(x), 1)
#define EDGELLM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define EDGELLM_RESTRICT
#define EDGELLM_LIKELY(x) (x)
#define EDGELLM_UNLIKELY(x) (x)
#endif

// Debug-only check for hot paths (compiled out with NDEBUG).
#define EDGELLM_DASSERT(cond) assert(cond)
