# Checks a cross-built module's ELF with READELF: no C++ runtime among its libraries (NEEDED), as
# an OpenHarmony app ships it (libstdc++ / libgcc linked in), the napi_* functions left undefined
# for the host process, and its registration: the symbol DEFINES exported (Node's
# napi_register_module_v1), UNDEFINED among the undefined ones (napi_module_register for OpenHarmony).
# A module that was not built is reported, not failed (ctest may run before the targets are built).
cmake_minimum_required(VERSION 3.16)
if(NOT EXISTS "${MODULE}")
  message("skipped: ${MODULE} not built")
  return()
endif()
execute_process(COMMAND "${READELF}" -d -W "${MODULE}" OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${READELF} -d ${MODULE} failed")
endif()
string(REGEX MATCHALL "Shared library: \\[[^]]+\\]" needed "${dyn}")
message("${MODULE}: ${needed}")
if(needed MATCHES "libstdc\\+\\+|libc\\+\\+|libgcc_s")
  message(FATAL_ERROR "${MODULE} needs a shared C++ runtime: ${needed}")
endif()
execute_process(COMMAND "${READELF}" --dyn-syms -W "${MODULE}" OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(NOT syms MATCHES "UND napi_create_async_work")
  message(FATAL_ERROR "${MODULE}: napi_create_async_work is not an undefined symbol")
endif()
if(DEFINES AND NOT syms MATCHES "FUNC +GLOBAL +DEFAULT +[0-9]+ ${DEFINES}")
  message(FATAL_ERROR "${MODULE}: ${DEFINES} is not exported")
endif()
if(UNDEFINED AND NOT syms MATCHES "UND ${UNDEFINED}")
  message(FATAL_ERROR "${MODULE}: ${UNDEFINED} is not among the undefined symbols")
endif()
# Nothing of the C++ runtime is exported (-Wl,--exclude-libs,ALL and hidden visibility).
if(syms MATCHES "FUNC +(GLOBAL|WEAK) +DEFAULT +[0-9]+ _Z")
  message(FATAL_ERROR "${MODULE} exports C++ symbols")
endif()
