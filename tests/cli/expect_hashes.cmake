# Included by check_bench.cmake and check_bench_iq_presets.cmake (cmake -P scripts).

# Fails unless `value` equals `same` (same_msg says what that means) and differs from `other`
# (other_msg): a run that must repeat one result and one that must not.
function(expect_same_not_other value same other same_msg other_msg)
  if(NOT value STREQUAL same)
    message(FATAL_ERROR "${same_msg}")
  endif()
  if(value STREQUAL other)
    message(FATAL_ERROR "${other_msg}")
  endif()
endfunction()
