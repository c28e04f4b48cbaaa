# greedy_text(<out-var> <reference.json>): the reference's greedy_text_hex decoded to text, plus the
# newline the CLI ends its output with. Included by tests/cli/check_tool.cmake and
# tests/deploy/run_cli.cmake (ASCII continuations: string(ASCII) is byte-exact there).
function(greedy_text out_var ref_json)
  file(READ "${ref_json}" json)
  string(JSON hex GET "${json}" greedy_text_hex)
  string(LENGTH "${hex}" len)
  set(text "")
  set(i 0)
  while(i LESS len)
    string(SUBSTRING "${hex}" ${i} 2 byte)
    math(EXPR code "0x${byte}")
    string(ASCII ${code} ch)
    string(APPEND text "${ch}")
    math(EXPR i "${i} + 2")
  endwhile()
  string(APPEND text "\n")
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()
