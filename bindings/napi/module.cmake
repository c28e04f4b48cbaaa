# edgellm_napi_standalone(<target> <root>): the Node-API module built outside edgellm's own CMake
# project, from edgellm_napi.cpp and <root>/include: what `npm install` (npm/CMakeLists.txt) and an
# OpenHarmony HAR's DevEco build (ohos/src/main/cpp/CMakeLists.txt) call. The module exports its
# entry point only (exports.map).
function(edgellm_napi_standalone target root)
  set(here "${CMAKE_CURRENT_FUNCTION_LIST_DIR}")
  add_library(${target} SHARED "${here}/edgellm_napi.cpp")
  target_include_directories(${target} PRIVATE "${root}/include")
  target_compile_features(${target} PRIVATE cxx_std_17)
  target_compile_options(${target} PRIVATE -O2 -fexceptions -fvisibility=hidden)
  target_link_options(${target} PRIVATE "-Wl,--version-script=${here}/exports.map")
  find_package(Threads REQUIRED)
  target_link_libraries(${target} PRIVATE Threads::Threads)
endfunction()
