// Fixtures shared by test_concurrency and test_limits: the tiny synthetic model (no shared data
// needed) and stories260K when ../shared/data has it, each with its tokenizer, and session helpers.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <edgellm/engine/session.hpp>
#include <edgellm/gguf/reader.hpp>
#include <edgellm/model/llama.hpp>
#include <edgellm/text/tokenizer.hpp>
#include <edgellm/tools/synthetic.hpp>

#include "test_util.hpp"

namespace edgellm_test {

using namespace edgellm;


// A model and its tokenizer, shared read-only by every session of a test.
struct Loaded {
  std::shared_ptr<const LlamaModel> model;
  std::shared_ptr<const Tokenizer> tok;
};

inline const std::vector<uint8_t>& synthetic_bytes() {
  static const std::vector<uint8_t> bytes = build_synthetic_gguf(synthetic_preset("tiny"), DType::Q8_0);
  return bytes;
}

inline Loaded load_bytes(const std::vector<uint8_t>& bytes) {
  auto model = std::make_shared<const LlamaModel>(GgufFile::from_bytes(bytes, "synthetic-tiny.gguf"));
  auto tok = std::make_shared<const Tokenizer>(Vocab::from_gguf(model->file()));
  return {model, tok};
}

// The tiny synthetic model (vocab 512, 2 layers): needs no shared data.
inline const Loaded& synthetic() {
  static const Loaded m = load_bytes(synthetic_bytes());
  return m;
}

// stories260K when the shared data is there (a real, trained model), else null.
inline const Loaded* stories() {
  static const Loaded m = [] {
    const std::string path = kData + "/models/stories260K.gguf";
    if (!path_exists(path)) return Loaded{};
    auto model = LlamaModel::load(path);
    return Loaded{model, std::make_shared<const Tokenizer>(Vocab::from_gguf(model->file()))};
  }();
  return m.model ? &m : nullptr;
}

// Sessions run on one thread unless a test says otherwise: on a loaded 2-core machine a pool of two
// waits for its descheduled worker at every matmul, which makes tests slow, not more thorough.
inline SessionParams one_thread() {
  SessionParams p;
  p.n_threads = 1;
  return p;
}

inline std::string long_text(int words) {
  std::string t;
  for (int i = 0; i < words; ++i) t += (i % 7 == 3) ? " Tom" : " the cat";
  return t;
}

// A text of exactly n tokens when encoded without BOS (n >= 4 for the synthetic byte-level vocab).
inline std::string text_of_tokens(const Tokenizer& tok, int n) {
  std::string t(static_cast<size_t>(n), 'x');
  for (int guard = 0; guard < 4 * n; ++guard) {
    const int got = static_cast<int>(tok.encode(t, false, false).size());
    if (got == n) return t;
    if (got > n) t.pop_back();
    else t.push_back('x');
  }
  throw_error("test: no text of ", n, " tokens");
}

}  // namespace edgellm_test
