# need_files(FILE...): prints "skipped: FILE not found" (the test's SKIP_REGULAR_EXPRESSION) and
# ends the calling script when one of the files is missing.
macro(need_files)
  foreach(_need ${ARGN})
    if(NOT EXISTS "${_need}")
      message("skipped: ${_need} not found")
      return()
    endif()
  endforeach()
endmacro()
