// edgellm-grammar: for people writing grammars.
//   edgellm-grammar validate GRAMMAR.gbnf TEXT_FILE   exit 0 when the whole text matches; else exit
//                                                       1 naming the byte where it stops matching
//   edgellm-grammar from-schema SCHEMA.json             the GBNF a JSON Schema becomes (stdout)
// The grammar and matcher are the library's (grammar/gbnf.hpp, grammar/matcher.hpp), the ones
// constrained generation runs.
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <edgellm/core/json.hpp>
#include <edgellm/grammar/gbnf.hpp>
#include <edgellm/grammar/json_schema.hpp>
#include <edgellm/grammar/matcher.hpp>

#include "common.hpp"

namespace {

const char* kUsage =
    "usage: edgellm-grammar validate GRAMMAR.gbnf TEXT_FILE [--root RULE]\n"
    "       edgellm-grammar from-schema SCHEMA.json\n"
    "  validate     exit 0 when the whole of TEXT_FILE matches the grammar (from its root rule, or\n"
    "               --root RULE); otherwise exit 1 with the byte offset (and line, column) where the\n"
    "               text stops matching, or saying that the grammar expects more at its end\n"
    "  from-schema  print the GBNF grammar of a JSON Schema (the subset llama.cpp's converter covers;\n"
    "               an unsupported keyword is an error naming it)\n"
    "  --version    print the version\n";

// Line and column (1-based) of byte `off` in text.
std::string line_col(std::string_view text, size_t off) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < off && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

int validate(const std::string& grammar_path, const std::string& text_path, const std::string& root) {
  const std::string src = tool::read_text_file(grammar_path, "GRAMMAR");
  const std::string text = tool::read_text_file(text_path, "TEXT_FILE");
  std::shared_ptr<const edgellm::Grammar> g;
  try {
    g = std::make_shared<const edgellm::Grammar>(edgellm::Grammar::parse(src, root));
  } catch (const edgellm::Error& e) {
    edgellm::throw_error(grammar_path, ": ", e.what());
  }
  edgellm::GrammarMatcher m(g);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!m.accept_bytes(std::string_view(text).substr(i, 1)))
      edgellm::throw_error(text_path, ": the text stops matching at byte ", i, " (", line_col(text, i), ")");
  }
  if (!m.is_complete())
    edgellm::throw_error(text_path, ": the whole text matches, but the grammar expects more after its last byte (", text.size(), ")");
  std::printf("valid: %zu bytes match %s\n", text.size(), grammar_path.c_str());
  return 0;
}

int from_schema(const std::string& path) {
  const std::string src = tool::read_text_file(path, "SCHEMA");
  try {
    std::fputs(edgellm::json_schema_to_gbnf(edgellm::Json::parse(src, 256)).c_str(), stdout);
  } catch (const edgellm::Error& e) {
    edgellm::throw_error(path, ": ", e.what());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tool::run([&] {
    tool::Args args(argc, argv);
    std::string root = "root";
    std::string f;
    while (args.next(f)) {
      if (tool::standard_flag(f, kUsage, "edgellm-grammar")) return 0;
      if (f == "--root") root = args.value(f);
      else tool::unknown(f);
    }
    const std::vector<std::string>& pos = args.positional();
    if (pos.empty()) edgellm::throw_error("a command is required: validate or from-schema (see --help)");
    if (pos[0] == "validate") {
      if (pos.size() != 3) edgellm::throw_error("validate takes GRAMMAR.gbnf TEXT_FILE (see --help)");
      return validate(pos[1], pos[2], root);
    }
    if (pos[0] == "from-schema") {
      if (pos.size() != 2) edgellm::throw_error("from-schema takes SCHEMA.json (see --help)");
      return from_schema(pos[1]);
    }
    edgellm::throw_error("unknown command '", pos[0], "': validate or from-schema (see --help)");
  });
}
