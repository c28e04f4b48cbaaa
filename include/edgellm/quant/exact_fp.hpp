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
#elif defined(__GNUC__)
#define EDGELLM_EXACT_FP_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"fp-contract=off\")")
#define EDGELLM_EXACT_FP_END _Pragma("GCC pop_options")
#define EDGELLM_EXACT_FP_SCOPE
#else
#define EDGELLM_EXACT_FP_BEGIN
#define EDGELLM_EXACT_FP_END
#define EDGELLM_EXACT_FP_SCOPE
#endif
