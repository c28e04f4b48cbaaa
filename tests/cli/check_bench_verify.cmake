# edgellm-bench --verify-rows (issue 35, the cost of a verify pass): on the tiny preset (no shared
# data), -o jsonl gives one object per pass size, the 1-row step first (n_draft 0) and then each k
# of the list in order, with k + 1 rows, a positive time, a ratio to the step and the first row's
# logits equal to the step's; md gives the same rows with the ratio column. Args: TOOL, EMULATOR.
cmake_minimum_required(VERSION 3.19)
string(REPLACE "|" ";" EMULATOR "${EMULATOR}")

execute_process(COMMAND ${EMULATOR} ${TOOL} --preset tiny --type Q8_0 --verify-rows 1,2,4 -d 8 -r 2 -t 2 -o jsonl
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "jsonl run: exit ${rc}\n${err}")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${out}")
list(LENGTH lines n)
if(NOT n EQUAL 4)
  message(FATAL_ERROR "expected 4 jsonl rows (step, k = 1, 2, 4), got ${n}:\n${out}")
endif()
set(i 0)
foreach(k 0 1 2 4)
  list(GET lines ${i} line)
  math(EXPR i "${i} + 1")
  math(EXPR rows "${k} + 1")
  string(JSON draft GET "${line}" n_draft)
  string(JSON nrows GET "${line}" n_rows)
  string(JSON depth GET "${line}" n_depth)
  string(JSON s GET "${line}" avg_s_per_pass)
  string(JSON ratio GET "${line}" ratio_to_step)
  string(JSON same GET "${line}" first_row_equals_step)
  if(NOT draft EQUAL k OR NOT nrows EQUAL rows OR NOT depth EQUAL 8)
    message(FATAL_ERROR "row ${i}: expected n_draft ${k}, n_rows ${rows}, n_depth 8:\n${line}")
  endif()
  # string(JSON) gives numbers as JSON writes them (1.3e-05 and such).
  if(NOT s MATCHES "^[0-9][0-9.eE+-]*$" OR s MATCHES "^0(\\.0*)?$" OR NOT ratio MATCHES "^[0-9][0-9.eE+-]*$")
    message(FATAL_ERROR "row ${i}: no time or ratio:\n${line}")
  endif()
  if(k EQUAL 0 AND NOT ratio MATCHES "^1(\\.0*)?$")
    message(FATAL_ERROR "the 1-row step's ratio to itself is not 1:\n${line}")
  endif()
  if(NOT same STREQUAL "ON" AND NOT same STREQUAL "true")
    message(FATAL_ERROR "row ${i}: the first row's logits differ from the 1-row step's:\n${line}")
  endif()
endforeach()

execute_process(COMMAND ${EMULATOR} ${TOOL} --preset tiny --type Q8_0 --verify-rows 2 -r 1 -t 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\\| ratio to 1-row step \\|" OR NOT out MATCHES "\\| 1 \\(decode step\\) \\|"
   OR NOT out MATCHES "\\| 3 \\(k=2\\) \\| [0-9.e-]+ ± [0-9.e-]+ \\| [0-9]+\\.[0-9]+ \\|[^\n]*\\| yes #[0-9a-f]+ \\|")
  message(FATAL_ERROR "md run: exit ${rc}, expected the step row and a k=2 row with a ratio:\n${out}\n${err}")
endif()
