// edgellm-info FILE.gguf: GGUF version, metadata (arrays abbreviated) and the tensor table.
// Exit 0 on success; for a bad file one "error: ..." line on stderr and exit 1.
#include <cstdio>
#include <string>

#include <edgellm/gguf/reader.hpp>
#include <edgellm/model/memory_plan.hpp>  // format_bytes

#include "common.hpp"

namespace {

const char* const kUsage =
    "usage: edgellm-info FILE.gguf\n"
    "  prints the GGUF version, every metadata key (arrays abbreviated) and the tensor table\n"
    "  --version   print the version\n";

}  // namespace

int main(int argc, char** argv) {
  return tool::run([&] {
    tool::Args args(argc, argv);
    for (std::string f; args.next(f);) {
      if (f == "-h" || f == "--help") { std::fputs(kUsage, stdout); return 0; }
      else if (f == "--version") return tool::print_version("edgellm-info");
      else tool::unknown(f);
    }
    if (args.positional().size() != 1)
      edgellm::throw_error("expected one FILE.gguf, got ", args.positional().size(), " arguments (see --help)");
    const edgellm::GgufFile f = edgellm::GgufFile::open(args.positional()[0]);
    std::printf("file: %s\n", f.path().c_str());
    std::printf("gguf version: %u, alignment: %u, data offset: %llu, size: %zu bytes (%s, %s)\n", f.version(),
                f.alignment(), static_cast<unsigned long long>(f.data_offset()), f.file_size(),
                edgellm::format_bytes(f.file_size()).c_str(), f.mapped() ? "mapped" : "read");
    std::printf("metadata: %zu keys\n", f.metadata().size());
    for (const auto& kv : f.metadata())
      std::printf("  %-40s %-16s %s\n", kv.key.c_str(), kv.value.type_string().c_str(), kv.value.to_display().c_str());
    std::printf("tensors: %zu\n", f.tensors().size());
    std::printf("  %-40s %-8s %-24s %12s\n", "name", "type", "shape", "bytes");
    unsigned long long total = 0;
    for (const auto& t : f.tensors()) {
      std::printf("  %-40s %-8s %-24s %12llu\n", t.name.c_str(), edgellm::dtype_name(t.type), t.shape().str().c_str(),
                  static_cast<unsigned long long>(t.nbytes));
      total += t.nbytes;
    }
    std::printf("total tensor bytes: %llu (%s)\n", total, edgellm::format_bytes(total).c_str());
    return 0;
  });
}
