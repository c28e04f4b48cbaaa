// edgellm-info FILE.gguf: GGUF version, metadata (arrays abbreviated) and the tensor table.
// Exit 0 on success; for a bad file one "error: ..." line on stderr and exit 1.
#include <cstdio>
#include <exception>
#include <string>

#include <edgellm/gguf/reader.hpp>

int main(int argc, char** argv) {
  if (argc != 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    std::fprintf(argc == 2 ? stdout : stderr, "usage: edgellm-info FILE.gguf\n");
    return argc == 2 ? 0 : 1;
  }
  try {
    const edgellm::GgufFile f = edgellm::GgufFile::open(argv[1]);
    std::printf("file: %s\n", f.path().c_str());
    std::printf("gguf version: %u, alignment: %u, data offset: %llu, size: %zu bytes (%s)\n", f.version(),
                f.alignment(), static_cast<unsigned long long>(f.data_offset()), f.file_size(),
                f.mapped() ? "mapped" : "read");
    std::printf("metadata: %zu keys\n", f.metadata().size());
    for (const auto& kv : f.metadata())
      std::printf("  %-40s %-16s %s\n", kv.key.c_str(), kv.value.type_string().c_str(),
                  kv.value.to_display().c_str());
    std::printf("tensors: %zu\n", f.tensors().size());
    std::printf("  %-40s %-8s %-24s %12s\n", "name", "type", "shape", "bytes");
    unsigned long long total = 0;
    for (const auto& t : f.tensors()) {
      std::printf("  %-40s %-8s %-24s %12llu\n", t.name.c_str(), edgellm::dtype_name(t.type),
                  t.shape().str().c_str(), static_cast<unsigned long long>(t.nbytes));
      total += t.nbytes;
    }
    std::printf("total tensor bytes: %llu\n", total);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
