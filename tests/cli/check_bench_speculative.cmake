# edgellm-bench with a draft source (issue 35): stories260K as its own draft (-md the same file,
# --draft-max 4) accepts every draft, so a tg21 run (the start token's pass gives token 1, then 4
# passes of 1 + 4 tokens) reports 4 passes, 16 drafted, 16 accepted, acceptance 1 and 5 tokens per
# target pass, in jsonl and md; prompt lookup with --draft-max 0 (the same token loop, no drafts)
# generates the same tokens (equal token hash). Args: TOOL, EMULATOR, SHARED.
cmake_minimum_required(VERSION 3.19)
set(model "${SHARED}/models/stories260K.gguf")
if(NOT EXISTS "${model}")
  message("skipped: ${model} not found")
  return()
endif()
string(REPLACE "|" ";" EMULATOR "${EMULATOR}")
set(common -m "${model}" -p 0 -n 21 -r 1 -t 1)

execute_process(COMMAND ${EMULATOR} ${TOOL} ${common} -md "${model}" --draft-max 4 -o jsonl
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "-md jsonl run: exit ${rc}\n${err}")
endif()
foreach(field draft n_passes n_drafted n_accepted acceptance_rate tokens_per_pass s_per_token avg_ts logits_hash)
  string(JSON ${field} GET "${out}" ${field})
endforeach()
if(NOT draft STREQUAL "stories260K.gguf" OR NOT n_passes EQUAL 4 OR NOT n_drafted EQUAL 16 OR NOT n_accepted EQUAL 16
   OR NOT acceptance_rate MATCHES "^1(\\.0*)?$" OR NOT tokens_per_pass MATCHES "^5(\\.0*)?$")
  message(FATAL_ERROR "self draft: expected draft stories260K.gguf, 4 passes, 16 drafted and accepted, "
                      "acceptance 1, 5 tokens per pass:\n${out}")
endif()
# string(JSON) gives numbers as JSON writes them (1.3e-05 and such).
if(NOT s_per_token MATCHES "^[0-9][0-9.eE+-]*$" OR s_per_token MATCHES "^0(\\.0*)?$" OR NOT avg_ts MATCHES "^[0-9][0-9.eE+-]*$")
  message(FATAL_ERROR "self draft: no s/token or t/s:\n${out}")
endif()

execute_process(COMMAND ${EMULATOR} ${TOOL} ${common} --lookup --draft-max 0 -o jsonl
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(JSON plain_hash ERROR_VARIABLE jerr GET "${out}" logits_hash)
string(JSON plain_drafted ERROR_VARIABLE jerr GET "${out}" n_drafted)
if(NOT rc EQUAL 0 OR NOT plain_drafted EQUAL 0 OR NOT plain_hash STREQUAL logits_hash)
  message(FATAL_ERROR "--lookup --draft-max 0: exit ${rc}, expected no drafts and the self draft's token hash "
                      "${logits_hash}:\n${out}\n${err}")
endif()

execute_process(COMMAND ${EMULATOR} ${TOOL} ${common} -md "${model}" --draft-max 4
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\\| draft \\| drafted \\| accepted \\| acceptance \\| tok/pass \\| s/tok \\|"
   OR NOT out MATCHES "\\| tg21 \\|[^\n]*\\| stories260K\\.gguf \\| 16\\.0 \\| 16\\.0 \\| 100\\.0 % \\| 5\\.00 \\| [0-9.e-]+ \\|")
  message(FATAL_ERROR "md run: exit ${rc}, expected the speculative columns and 100 % / 5.00:\n${out}\n${err}")
endif()
