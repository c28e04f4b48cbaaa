# Toolchain file: build for arm64 Linux (glibc) on an x86_64 Debian 12 machine with Debian's cross
# compiler, and run what was built (tests, try_run) through qemu's user-mode emulator.
#
#   sudo apt-get install g++-aarch64-linux-gnu qemu-user        # clang-14 too for ARM64_COMPILER=clang
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release
#   cmake --build build-arm64 -j2 --target tests_text && ctest --test-dir build-arm64 -L '^text$'
#
# The CMake presets dayu200, arm64-generic and arm64-libcxx use this file; .ci/run too, unless
# ../shared/cmake/aarch64-linux-gnu.cmake exists or EDGELLM_ARM64_TOOLCHAIN names another file.
#
# Settings (cache variables: give them with -D when a build folder is first configured):
#   ARM64_COMPILER     gcc (aarch64-linux-gnu-gcc/g++, the default) or clang (clang++ with
#                      --target=aarch64-linux-gnu, using the GNU cross toolchain's libraries).
#   ARM64_ARCH_FLAGS   target flags for every compile. Default -mcpu=cortex-a55, the RK3568's core
#                      (ARMv8.2-A with dotprod and fp16, no i8mm); -march=armv8-a for the ARMv8.0
#                      baseline that picks dotprod at run time.
#   ARM64_QEMU_CPU     the CPU qemu emulates for the tests. Default cortex-a76, which has the A55's
#                      user-visible instruction set (qemu has no A55 model); cortex-a53 has no
#                      dotprod. Set it to "" to leave the choice to QEMU_CPU in the environment.
#   ARM64_SYSROOT      Debian's arm64 cross libc (/usr/aarch64-linux-gnu): headers and libraries
#                      of the target, and qemu's -L for the dynamic loader.
#   ARM64_LIBCXX_ROOT  clang only: where cmake/fetch-arm64-libcxx.sh unpacked Debian's arm64 libc++;
#                      the build then uses -stdlib=libc++ and links statically.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(ARM64_COMPILER "gcc" CACHE STRING "gcc or clang")
set(ARM64_ARCH_FLAGS "-mcpu=cortex-a55" CACHE STRING "arm64 code-generation flags")
set(ARM64_QEMU_CPU "cortex-a76" CACHE STRING "qemu-aarch64 -cpu for the tests (empty: QEMU_CPU decides)")
set(ARM64_SYSROOT "/usr/aarch64-linux-gnu" CACHE PATH "arm64 cross libc")
set(ARM64_LIBCXX_ROOT "" CACHE PATH "unpacked arm64 libc++ (clang only)")
# try_compile and try_run configure small projects that read this file again without our cache.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES
     ARM64_COMPILER ARM64_ARCH_FLAGS ARM64_QEMU_CPU ARM64_SYSROOT ARM64_LIBCXX_ROOT)

if(ARM64_COMPILER STREQUAL "clang")
  find_program(ARM64_CLANG NAMES clang-14 clang REQUIRED)
  find_program(ARM64_CLANGXX NAMES clang++-14 clang++ REQUIRED)
  set(CMAKE_C_COMPILER "${ARM64_CLANG}")
  set(CMAKE_CXX_COMPILER "${ARM64_CLANGXX}")
  set(CMAKE_C_COMPILER_TARGET aarch64-linux-gnu)
  set(CMAKE_CXX_COMPILER_TARGET aarch64-linux-gnu)
elseif(ARM64_COMPILER STREQUAL "gcc")
  set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
  set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
else()
  message(FATAL_ERROR "ARM64_COMPILER=${ARM64_COMPILER}: expected gcc or clang")
endif()

set(CMAKE_C_FLAGS_INIT "${ARM64_ARCH_FLAGS}")
set(CMAKE_CXX_FLAGS_INIT "${ARM64_ARCH_FLAGS}")

if(ARM64_LIBCXX_ROOT)
  if(NOT ARM64_COMPILER STREQUAL "clang")
    message(FATAL_ERROR "ARM64_LIBCXX_ROOT is for clang builds: add -DARM64_COMPILER=clang")
  endif()
  string(APPEND CMAKE_CXX_FLAGS_INIT
         " -stdlib=libc++ -isystem ${ARM64_LIBCXX_ROOT}/usr/lib/llvm-14/include/c++/v1")
  # Linked statically, so no arm64 libc++.so is needed to run the tests. libc++abi is a library of
  # its own in Debian; unwinding comes from libgcc_eh.
  set(CMAKE_EXE_LINKER_FLAGS_INIT "-static -L${ARM64_LIBCXX_ROOT}/usr/lib/llvm-14/lib")
  set(CMAKE_CXX_STANDARD_LIBRARIES "-lc++abi")
endif()

# Target headers, libraries and packages come from the sysroot only; programs from the host.
set(CMAKE_FIND_ROOT_PATH "${ARM64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Built programs run under qemu-aarch64; -L points it at the sysroot's dynamic loader.
find_program(ARM64_QEMU NAMES qemu-aarch64 qemu-aarch64-static REQUIRED NO_CMAKE_FIND_ROOT_PATH)
set(CMAKE_CROSSCOMPILING_EMULATOR "${ARM64_QEMU};-L;${ARM64_SYSROOT}")
if(ARM64_QEMU_CPU)
  list(APPEND CMAKE_CROSSCOMPILING_EMULATOR -cpu "${ARM64_QEMU_CPU}")
endif()
