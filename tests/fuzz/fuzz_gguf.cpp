// libFuzzer target for the GGUF reader: any bytes must either parse or throw edgellm::Error —
// never crash, hang, or allocate absurdly. Also touches every parsed value and tensor byte range.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <edgellm/gguf/reader.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const edgellm::GgufFile f = edgellm::GgufFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
    size_t sum = 0;
    for (const auto& kv : f.metadata()) sum += kv.value.to_display(4).size();
    for (const auto& t : f.tensors())
      if (t.nbytes) sum += t.data[0] + t.data[t.nbytes - 1];
    return sum == 1 ? 0 : 0;
  } catch (const edgellm::Error&) {
    return 0;
  }
}
