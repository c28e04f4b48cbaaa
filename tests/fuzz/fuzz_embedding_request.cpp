// libFuzzer target for the server's embedding request parser (examples/server/embeddings_api.hpp):
// arbitrary bytes as a /v1/embeddings or /embedding body (the first byte picks which). Every input
// either parses into inputs that are non-empty, within the context and the vocabulary, and whose
// answer is valid JSON, or is refused with an ApiError (400 / 413); nothing else may escape.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "edgellm/tools/synthetic.hpp"
#include "embeddings_api.hpp"  // examples/server/

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "fuzz_embedding_request: %s\n", what);
  std::abort();  // a finding: libFuzzer saves the input
}

const edgellm::Tokenizer& fuzz_tokenizer() {
  static const std::vector<uint8_t> bytes = edgellm::build_synthetic_gguf(edgellm::synthetic_preset("tiny"), edgellm::DType::F32);
  static const edgellm::Tokenizer tok(edgellm::Vocab::from_gguf(edgellm::GgufFile::from_bytes(bytes, "synthetic-tiny.gguf")));
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using namespace edgellm::openai;
  const edgellm::Tokenizer& tok = fuzz_tokenizer();
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  ApiLimits lim;
  lim.model_id = "m";
  EmbedLimits el;
  el.n_ctx = 64;
  el.n_vocab = tok.n_vocab();
  el.max_inputs = 8;
  try {
    const EmbedRequest r = parse_embedding_request(body, (data[0] & 1) != 0, tok, lim, el);
    if (r.inputs.empty() || r.inputs.size() > el.max_inputs) fail("input count out of range");
    std::vector<edgellm::Embedding> e;
    for (const auto& in : r.inputs) {
      if (in.empty() || in.size() > static_cast<size_t>(el.n_ctx)) fail("input length out of range");
      for (int32_t t : in)
        if (t < 0 || t >= el.n_vocab) fail("token id outside the vocabulary");
      edgellm::Embedding x;
      x.data.assign(4, 0.5f);
      x.n_rows = 1;
      x.n_tokens = static_cast<int>(in.size());
      e.push_back(std::move(x));
    }
    (void)edgellm::Json::parse(embeddings_json(r, e, 4, "m").dump());
  } catch (const ApiError& e) {
    if (e.status() != 400 && e.status() != 413) fail("a parse error that is not 400 / 413");
    (void)edgellm::Json::parse(error_body(e));
  }
  return 0;
}
