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

// xsimd is optional: used only by kernels/x86/, and only where its headers are visible and the
// target is x86 (arm64 has hand-written NEON kernels). Define EDGELLM_NO_XSIMD to switch it off.
#if !defined(EDGELLM_NO_XSIMD) && (defined(__x86_64__) || defined(_M_X64)) && defined(__has_include)
#if __has_include(<xsimd/xsimd.hpp>) && defined(__AVX2__) && defined(__FMA__)
#define EDGELLM_HAS_XSIMD 1
#endif
#endif
#ifndef EDGELLM_HAS_XSIMD
#define EDGELLM_HAS_XSIMD 0
#endif

// The x86 level the kernels of kernels/x86/ are compiled for, as -v and edgellm-bench name it:
// the forms each level adds are listed in docs/ARCHITECTURE.md ("Kernels").
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define EDGELLM_X86_LEVEL "avx512-vnni"
#elif defined(__AVX512F__) && defined(__AVX512BW__)
#define EDGELLM_X86_LEVEL "avx512"
#elif defined(__AVXVNNI__)
#define EDGELLM_X86_LEVEL "avx2-vnni"
#else
#define EDGELLM_X86_LEVEL "avx2"
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
