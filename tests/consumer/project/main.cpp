// Consumer smoke test: includes the umbrella, writes and reads a GGUF in memory.
#include <edgellm.hpp>

#include <cstdio>

int main() {
  edgellm::GgufWriter w;
  w.set_string("general.architecture", "llama");
  const edgellm::GgufFile f = edgellm::GgufFile::from_bytes(w.to_bytes(), "mem.gguf");
  std::printf("edgellm %s: %s, kernels %s\n", EDGELLM_VERSION_STRING, f.get_string("general.architecture").c_str(),
              edgellm::isa_name(edgellm::kernels().isa));
  return f.get_string("general.architecture") == "llama" ? 0 : 1;
}
