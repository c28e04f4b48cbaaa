// Stand-in for the OpenHarmony SDK's napi/native_api.h (not available here): OpenHarmony's NAPI
// declares the same napi_* functions and napi_module / napi_module_register as Node's node_api.h,
// so building edgellm_napi.cpp with -DEDGELLM_OHOS against this header checks the OpenHarmony
// registration path compiles and links. It says nothing about the real SDK beyond that.
#pragma once
#include <node_api.h>
