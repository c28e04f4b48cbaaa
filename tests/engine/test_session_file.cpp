// Saved sessions (engine/session_file.hpp, Session::save / restore) on the synthetic model (no
// shared data): greedy text after restore equals the text without it, for f32 / f16 / q8_0 KV and
// the F32 copies of recent positions; another model, KV type, n_ctx, format version, every
// truncation and flipped bytes are refused with a message; a failed save leaves the old file.
#include <doctest/doctest.h>

#include <cstdio>
#include <sys/stat.h>
#include <unistd.h>
#include <string>
#include <vector>

#include <edgellm/engine/session.hpp>
#include <edgellm/engine/session_file.hpp>

#include "session_fixtures.hpp"

using namespace edgellm;
using edgellm_test::Loaded;

namespace {

std::string session_tmp(const char* name) { return std::string(EDGELLM_BINARY_DIR) + "/session_file_" + name; }

GenerateParams greedy_n(int n) {
  GenerateParams gp;
  gp.max_tokens = n;
  gp.sampler.temperature = 0;
  gp.ignore_eos = true;
  return gp;
}

SessionParams kv_params_of(DType type, int recent) {
  SessionParams p = edgellm_test::one_thread();
  p.n_ctx = 256;
  p.kv_type = type;
  p.kv_recent_f32 = recent;
  return p;
}

const std::string kSessionPrompt = "The quick brown fox jumps over the lazy dog, again and again, until the sun goes down.";

// A session that read kSessionPrompt, saved to bytes.
std::vector<uint8_t> saved_prompt_bytes(const SessionParams& p) {
  const Loaded& m = edgellm_test::synthetic();
  Session s(m.model, m.tok, p);
  s.eval(m.tok->encode(kSessionPrompt, true, false));
  return session_file_bytes(s.snapshot());
}

}  // namespace

TEST_CASE("session file: greedy text after restore equals the text without it") {
  const Loaded& m = edgellm_test::synthetic();
  for (const auto& kv : std::vector<std::pair<DType, int>>{{DType::F32, 0}, {DType::F16, 0}, {DType::Q8_0, 0}, {DType::Q8_0, 8}}) {
    CAPTURE(dtype_name(kv.first));
    CAPTURE(kv.second);
    const SessionParams p = kv_params_of(kv.first, kv.second);
    const std::vector<int32_t> prompt = m.tok->encode(kSessionPrompt, true, false);
    Session cold(m.model, m.tok, p);
    const GenerateResult want = cold.generate(prompt, greedy_n(24));
    const std::string path = session_tmp("roundtrip.bin");
    {
      Session a(m.model, m.tok, p);
      a.eval(std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
      a.save(path);
    }
    Session b(m.model, m.tok, p);
    b.restore(path);
    CHECK(b.n_past() == static_cast<int>(prompt.size()) - 1);
    const std::vector<int32_t> delta = b.keep_common_prefix(prompt);
    CHECK(delta.size() == 1);
    const GenerateResult got = b.generate(delta, greedy_n(24));
    CHECK(got.tokens == want.tokens);
    CHECK(got.text == want.text);
    std::remove(path.c_str());
  }
}

TEST_CASE("session file: an empty session saves and restores") {
  const Loaded& m = edgellm_test::synthetic();
  Session a(m.model, m.tok, kv_params_of(DType::F32, 0));
  const std::vector<uint8_t> bytes = session_file_bytes(a.snapshot());
  Session b(m.model, m.tok, kv_params_of(DType::F32, 0));
  b.eval(m.tok->encode("abc", true, false));
  b.restore(parse_session_file(bytes.data(), bytes.size(), "empty"));
  CHECK(b.n_past() == 0);
  CHECK(b.history().empty());
}

TEST_CASE("session file: another KV type, context, model or version is refused by name") {
  const Loaded& m = edgellm_test::synthetic();
  const std::vector<uint8_t> bytes = saved_prompt_bytes(kv_params_of(DType::F16, 0));
  const SessionSnapshot snap = parse_session_file(bytes.data(), bytes.size(), "s.bin");
  Session q8(m.model, m.tok, kv_params_of(DType::Q8_0, 0));
  CHECK_THROWS_WITH_AS(q8.restore(snap, "s.bin"), doctest::Contains("holds a f16 KV cache, this session's is q8_0"), Error);
  CHECK(q8.n_past() == 0);
  SessionParams big = kv_params_of(DType::F16, 0);
  big.n_ctx = 512;
  Session wide(m.model, m.tok, big);
  CHECK_THROWS_WITH_AS(wide.restore(snap, "s.bin"), doctest::Contains("context of 256, this session's is 512"), Error);
  SessionSnapshot other = snap;
  other.fp.tensors_hash ^= 1;
  Session f16(m.model, m.tok, kv_params_of(DType::F16, 0));
  CHECK_THROWS_WITH_AS(f16.restore(other, "s.bin"), doctest::Contains("saved with another model"), Error);
  f16.restore(snap, "s.bin");
  CHECK(f16.n_past() == static_cast<int>(snap.tokens.size()));
  // A model with other weights (another seed): same layout, other values.
  const Loaded other_model = edgellm_test::load_bytes(build_synthetic_gguf(synthetic_preset("tiny"), DType::Q8_0, 4321));
  Session o(other_model.model, other_model.tok, kv_params_of(DType::F16, 0));
  CHECK_THROWS_WITH_AS(o.restore(snap, "s.bin"), doctest::Contains("saved with another model"), Error);
  std::vector<uint8_t> v2 = bytes;
  v2[8] = 2;
  CHECK_THROWS_WITH_AS(parse_session_file(v2.data(), v2.size(), "s.bin"),
                       doctest::Contains("format version 2, this build of edgellm reads version 1"), Error);
  const std::vector<uint8_t> junk = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
  CHECK_THROWS_WITH_AS(parse_session_file(junk.data(), junk.size(), "m.gguf"), doctest::Contains("not an edgellm session file"), Error);
}

TEST_CASE("session file: every truncation and flipped bytes are errors") {
  const std::vector<uint8_t> bytes = saved_prompt_bytes(kv_params_of(DType::Q8_0, 4));
  REQUIRE(bytes.size() > 1000);
  for (size_t n = 0; n < bytes.size(); n += (n < 200 ? 1 : 97))
    CHECK_THROWS_AS(parse_session_file(bytes.data(), n, "t.bin"), Error);
  for (size_t i = 0; i < bytes.size(); i += (i < 200 ? 1 : 89)) {
    std::vector<uint8_t> b = bytes;
    b[i] ^= 0x10;
    CHECK_THROWS_AS(parse_session_file(b.data(), b.size(), "f.bin"), Error);
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  CHECK_THROWS_AS(parse_session_file(longer.data(), longer.size(), "l.bin"), Error);
  const SessionSnapshot s = parse_session_file(bytes.data(), bytes.size(), "ok.bin");
  CHECK(session_file_bytes(s) == bytes);
}

TEST_CASE("session file: a save that fails leaves the previous file, restore of a missing file names it") {
  const Loaded& m = edgellm_test::synthetic();
  const std::string path = session_tmp("keep.bin");
  Session a(m.model, m.tok, kv_params_of(DType::F32, 0));
  a.eval(m.tok->encode(kSessionPrompt, true, false));
  a.save(path);
  // The temporary file cannot be created (a folder is in its place): the save fails, the old file stays.
  const std::string tmp = path + ".tmp";
  std::remove(tmp.c_str());
  REQUIRE(::mkdir(tmp.c_str(), 0755) == 0);
  a.eval(m.tok->encode(" more", false, false));
  CHECK_THROWS_WITH_AS(a.save(path), doctest::Contains("cannot create"), Error);
  ::rmdir(tmp.c_str());
  Session b(m.model, m.tok, kv_params_of(DType::F32, 0));
  b.restore(path);
  CHECK(b.n_past() == static_cast<int>(m.tok->encode(kSessionPrompt, true, false).size()));
  std::remove(path.c_str());
  CHECK_THROWS_WITH_AS(b.restore(path), doctest::Contains("cannot open"), Error);
}
