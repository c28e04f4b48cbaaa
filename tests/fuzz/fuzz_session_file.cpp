// libFuzzer target for the session state file reader (include/edgellm/engine/session_file.hpp):
// every input either parses or throws edgellm::Error, never crashes or allocates beyond what its
// size says. The input is read as it is (the checksum then rejects nearly everything) and, so that
// the parts after the checksum are reached, again with its checksum appended. A parsed file writes
// back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "edgellm/engine/session_file.hpp"

namespace {

void parse_and_check(const std::vector<uint8_t>& bytes) {
  try {
    const edgellm::SessionSnapshot s = edgellm::parse_session_file(bytes.data(), bytes.size(), "fuzz");
    if (edgellm::session_file_bytes(s) != bytes) {
      std::fprintf(stderr, "fuzz_session_file: a parsed file does not write back to its bytes\n");
      std::abort();
    }
  } catch (const edgellm::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  parse_and_check(bytes);
  const uint64_t sum = edgellm::session_file_detail::hash_bytes(data, size);
  bytes.resize(size + 8);
  std::memcpy(bytes.data() + size, &sum, 8);
  parse_and_check(bytes);
  return 0;
}
