// edgellm-tokenize -m MODEL.gguf [--no-bos]: tokenizes raw stdin (no escape processing; control
// tokens such as "<s>" stay text, user-defined tokens are matched as llama.cpp does) and prints the
// ids as one JSON array. Errors: one "error: ..." line on stderr, exit 1.
#include <cstdio>
#include <exception>
#include <iostream>
#include <iterator>
#include <string>

#include <edgellm/gguf/reader.hpp>
#include <edgellm/text/tokenizer.hpp>

namespace {

const char* const kUsage = "usage: edgellm-tokenize -m MODEL.gguf [--no-bos] < text\n";

int fail(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  bool add_bos = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if ((a == "-m" || a == "--model") && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--no-bos") {
      add_bos = false;
    } else {
      return fail("unknown or incomplete argument '" + a + "' (usage: edgellm-tokenize -m MODEL.gguf [--no-bos])");
    }
  }
  if (model.empty()) return fail("missing -m MODEL.gguf");
  try {
    const edgellm::Tokenizer tok(edgellm::Vocab::from_gguf(edgellm::GgufFile::open(model)));
    std::ios::sync_with_stdio(false);
    const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    if (std::cin.bad()) return fail("reading stdin failed");
    const auto ids = tok.encode(text, add_bos, /*parse_special=*/false);
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(ids[i]);
    }
    out += "]\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : fail("writing stdout failed");
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
