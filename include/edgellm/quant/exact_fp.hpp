// Exact ggml arithmetic: no fusing of a * b + c into an FMA. ggml's reference (de)quantizers live
// in ggml-base, built without FMA on x86, so matching llama.cpp's bytes and floats needs every
// product rounded on its own. Wrap a file's functions in EDGELLM_EXACT_FP_BEGIN / _END (GCC, file
// scope) and open each function body with EDGELLM_EXACT_FP_SCOPE (clang, statement scope: clang 14
// has no float_control push/pop on arm64, and a file-scope contract pragma would leak to includers).
#pragma once

#if defined(__clang__)
#define EDGELLM_EXACT_FP_BEGIN
#define EDGELLM_EXACT_FP_END
#define EDGELLM_EXACT_FP_SCOPE _Pragma("clang fp contract(off)")
#elif defined(__GNUC__) && defined(__aarch64__)
// g++ 12 (arm64): right after a function with a target attribute (a NEON *_dotprod kernel in a
// baseline build, e.g. at the end of neon/dot_iquants.hpp) the options that "push_options" saves
// still carry that target, so the references (and, after "pop_options", the rest of the file) were
// compiled for armv8.2-a+dotprod and could contain sdot. A target pragma followed by "reset_options" puts the command line's options back first,
// so the include order does not matter (tests/selfcontained: include_order_aarch64_gxx).
#define EDGELLM_EXACT_FP_BEGIN                                                                    \
  _Pragma("GCC target(\"+nodotprod\")") _Pragma("GCC reset_options") _Pragma("GCC push_options") \
      _Pragma("GCC optimize(\"fp-contract=off\")")
#define EDGELLM_EXACT_FP_END _Pragma("GCC pop_options")
#define EDGELLM_EXACT_FP_SCOPE
#elif defined(__GNUC__)
#define EDGELLM_EXACT_FP_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"fp-contract=off\")")
#define EDGELLM_EXACT_FP_END _Pragma("GCC pop_options")
#define EDGELLM_EXACT_FP_SCOPE
#else
#define EDGELLM_EXACT_FP_BEGIN
#define EDGELLM_EXACT_FP_END
#define EDGELLM_EXACT_FP_SCOPE
#endif
