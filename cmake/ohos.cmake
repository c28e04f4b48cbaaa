# Toolchain wrapper for the OpenHarmony NDK (DAYU200 and other OpenHarmony boards): includes the
# NDK's build/cmake/ohos.toolchain.cmake for arm64-v8a with libc++ linked statically (c++_static).
# The NDK folder comes from the environment: OHOS_NDK_HOME=<sdk>/native (or -DOHOS_NDK_HOME=...).
#   OHOS_NDK_HOME=$HOME/ohos-sdk/linux/native cmake --preset ohos
# Knobs: OHOS_ARCH (default arm64-v8a), OHOS_STL (default c++_static), OHOS_PLATFORM (default OHOS),
# OHOS_ARM64_ARCH_FLAGS (default -mcpu=cortex-a55: RK3568; empty = the NDK's ARMv8.0 baseline).
if(NOT OHOS_NDK_HOME)
  set(OHOS_NDK_HOME "$ENV{OHOS_NDK_HOME}")
endif()
if(NOT OHOS_NDK_HOME)
  message(FATAL_ERROR
    "cmake/ohos.cmake: OHOS_NDK_HOME is not set. Point it at the OpenHarmony NDK, the 'native' folder "
    "of an OpenHarmony SDK that holds build/cmake/ohos.toolchain.cmake, e.g.\n"
    "  export OHOS_NDK_HOME=$HOME/ohos-sdk/linux/native\n"
    "(or configure with -DOHOS_NDK_HOME=<folder>).")
endif()
set(_ohos_tc "${OHOS_NDK_HOME}/build/cmake/ohos.toolchain.cmake")
if(NOT EXISTS "${_ohos_tc}" AND EXISTS "${OHOS_NDK_HOME}/native/build/cmake/ohos.toolchain.cmake")
  set(_ohos_tc "${OHOS_NDK_HOME}/native/build/cmake/ohos.toolchain.cmake")  # given the SDK folder
endif()
if(NOT EXISTS "${_ohos_tc}")
  message(FATAL_ERROR "cmake/ohos.cmake: OHOS_NDK_HOME=${OHOS_NDK_HOME} has no build/cmake/ohos.toolchain.cmake; "
                      "it must be the NDK ('native') folder of an OpenHarmony SDK")
endif()
# try_compile re-reads this file without the cache: keep the NDK path for it.
set(ENV{OHOS_NDK_HOME} "${OHOS_NDK_HOME}")

if(NOT OHOS_ARCH)
  set(OHOS_ARCH "arm64-v8a")
endif()
if(NOT OHOS_STL)
  set(OHOS_STL "c++_static")  # the app/board then needs no libc++_shared.so
endif()
if(NOT OHOS_PLATFORM)
  set(OHOS_PLATFORM "OHOS")
endif()
if(NOT DEFINED OHOS_ARM64_ARCH_FLAGS)
  set(OHOS_ARM64_ARCH_FLAGS "-mcpu=cortex-a55")
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES OHOS_NDK_HOME OHOS_ARCH OHOS_STL OHOS_PLATFORM OHOS_ARM64_ARCH_FLAGS)

include("${_ohos_tc}")

# CMake reads a toolchain file several times in one scope: append the flags once.
if(OHOS_ARCH STREQUAL "arm64-v8a" AND OHOS_ARM64_ARCH_FLAGS)
  string(FIND "${CMAKE_CXX_FLAGS_INIT}" "${OHOS_ARM64_ARCH_FLAGS}" _ohos_at)
  if(_ohos_at EQUAL -1)
    string(APPEND CMAKE_C_FLAGS_INIT " ${OHOS_ARM64_ARCH_FLAGS}")
    string(APPEND CMAKE_CXX_FLAGS_INIT " ${OHOS_ARM64_ARCH_FLAGS}")
  endif()
endif()
