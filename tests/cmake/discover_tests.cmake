# Run by edgellm_test_discover (tests/CMakeLists.txt) after a test executable is linked: for each
# test file compiled into it, lists that file's doctest cases (--source-file=*/<stem>.cpp) and
# writes one ctest test per case, named <stem><SUFFIX>/<case>, which runs only that case.
# Inputs (-D): TEST_EXECUTABLE, TEST_EXECUTOR (the cross-compiling emulator, may be empty),
# TEST_WORKING_DIR, STEMS (the files' names without .cpp), SUFFIX, LABELS (per stem, its ctest
# labels joined by ',', added to `doctest`), CTEST_FILE.
set(script "")
set(executor "")
foreach(part IN LISTS TEST_EXECUTOR)
  string(APPEND executor " [==[${part}]==]")
endforeach()
list(LENGTH STEMS n_stems)
list(LENGTH LABELS n_labels)
if(NOT n_stems EQUAL n_labels)
  message(FATAL_ERROR "discover_tests.cmake: ${n_stems} stems (${STEMS}) but ${n_labels} label entries (${LABELS})")
endif()
foreach(stem IN LISTS STEMS)
  list(FIND STEMS "${stem}" i)
  list(GET LABELS ${i} labels)
  string(REPLACE "," ";" labels "doctest,${labels}")
  set(file_filter "--source-file=*/${stem}.cpp")
  execute_process(
    COMMAND ${TEST_EXECUTOR} "${TEST_EXECUTABLE}" "${file_filter}" --list-test-cases
    OUTPUT_VARIABLE output
    ERROR_VARIABLE errors
    RESULT_VARIABLE result
    WORKING_DIRECTORY "${TEST_WORKING_DIR}")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "listing the cases of ${stem}.cpp in ${TEST_EXECUTABLE} failed (${result}):\n${output}${errors}")
  endif()
  string(REPLACE "\n" ";" lines "${output}")
  set(count 0)
  foreach(name IN LISTS lines)
    if(name STREQUAL "" OR name MATCHES "^=+$" OR name MATCHES "^\\[doctest\\] ")
      continue()
    endif()
    math(EXPR count "${count} + 1")
    # doctest splits --test-case on ',' unless escaped.
    string(REPLACE "," "\\," filter "${name}")
    string(APPEND script
      "add_test([==[${stem}${SUFFIX}/${name}]==]${executor} [==[${TEST_EXECUTABLE}]==] [==[--test-case=${filter}]==] [==[${file_filter}]==])\n"
      "set_tests_properties([==[${stem}${SUFFIX}/${name}]==] PROPERTIES WORKING_DIRECTORY [==[${TEST_WORKING_DIR}]==] SKIP_RETURN_CODE 77 LABELS [==[${labels}]==])\n")
  endforeach()
  if(count EQUAL 0)
    message(FATAL_ERROR "${TEST_EXECUTABLE}: no test case of ${stem}.cpp found")
  endif()
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
