// edgellm-tokenize -m MODEL.gguf [-p TEXT | -f FILE] [--no-bos] [--parse-special] [--ids | --show-pieces]:
// tokenizes raw text (stdin unless -p or -f; no escape processing; without --parse-special control
// tokens such as "<s>" stay text, user-defined tokens are matched as llama.cpp does) and prints the
// ids as one JSON array, or with --show-pieces one "id -> 'piece'" line per token as llama-tokenize
// does. Errors: one "error: ..." line on stderr, exit 1.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include <edgellm/gguf/reader.hpp>
#include <edgellm/text/tokenizer.hpp>

#include "common.hpp"

namespace {

const char* const kUsage =
    "usage: edgellm-tokenize -m MODEL.gguf [-p TEXT | -f FILE] [options] (without -p / -f: the text on stdin)\n"
    "  -m, --model FILE     GGUF file with a vocabulary (a model or a vocab-only file)\n"
    "  -p, --prompt TEXT    tokenize TEXT\n"
    "  -f, --file FILE      tokenize the contents of FILE\n"
    "  --no-bos             do not add BOS even where the vocabulary adds one\n"
    "  --parse-special      match control tokens such as <s> or <|im_start|> in the text\n"
    "  --ids                print the ids as one JSON array (the default)\n"
    "  --show-pieces        print one line per token: id -> 'piece'\n"
    "  --version            print the version\n";

}  // namespace

int main(int argc, char** argv) {
  return tool::run([&] {
    tool::Args args(argc, argv);
    std::string model, text;
    bool add_bos = true, have_text = false, parse_special = false, pieces = false;
    for (std::string f; args.next(f);) {
      if (f == "-h" || f == "--help") { std::fputs(kUsage, stdout); return 0; }
      else if (f == "--version") return tool::print_version("edgellm-tokenize");
      else if (f == "-m" || f == "--model") model = args.value(f);
      else if (f == "-p" || f == "--prompt") { text = args.value(f); have_text = true; }
      else if (f == "-f" || f == "--file") { text = tool::read_text_file(args.value(f), f); have_text = true; }
      else if (f == "--no-bos") add_bos = false;
      else if (f == "--parse-special") parse_special = true;
      else if (f == "--ids") pieces = false;
      else if (f == "--show-pieces") pieces = true;
      else tool::unknown(f);
    }
    args.no_positional();
    if (model.empty()) edgellm::throw_error("-m MODEL.gguf is required (see --help)");
    const edgellm::Tokenizer tok(edgellm::Vocab::from_gguf(edgellm::GgufFile::open(model)));
    if (!have_text) {
      std::ios::sync_with_stdio(false);
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      if (std::cin.bad()) edgellm::throw_error("reading stdin failed");
    }
    const auto ids = tok.encode(text, add_bos, parse_special);  // BOS only where the vocabulary adds one
    std::string out;
    if (pieces) {
      for (int32_t id : ids) out += std::to_string(id) + " -> '" + tok.token_to_piece(id, /*special=*/true) + "'\n";
    } else {
      out = "[";
      for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
      out += "]\n";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (std::fflush(stdout) != 0) edgellm::throw_error("writing stdout failed");
    return 0;
  });
}
