// Constrained generation through the decode loop (GenerateParams::grammar): what Session
// generates matches the grammar and ends where it is complete, greedy and sampled; speculative
// decoding (prompt lookup) gives the same text as plain decoding under the grammar; parallel
// continuations each keep their own grammar state; a lazy grammar leaves text before its
// trigger free. The synthetic model needs no shared data; stories260K runs when present.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include <edgellm/core/json.hpp>
#include <edgellm/engine/session.hpp>
#include <edgellm/grammar/constrained_sampler.hpp>
#include <edgellm/grammar/json_schema.hpp>
#include <edgellm/grammar/matcher.hpp>

#include "session_fixtures.hpp"

using namespace edgellm;
using namespace edgellm_test;

namespace {

GrammarParams compiled(const std::string& gbnf, const Tokenizer& tok, std::vector<std::string> triggers = {}) {
  GrammarParams p;
  p.masker = std::make_shared<const TokenMasker>(std::make_shared<const Grammar>(Grammar::parse(gbnf)), grammar_vocab_of(tok));
  p.triggers = std::move(triggers);
  return p;
}

bool text_matches(const GrammarParams& g, const std::string& text) {
  GrammarMatcher m = g.masker->new_matcher();
  return m.accept_bytes(text) && m.is_complete();
}

const char* kEventSchema = R"({"type": "object", "properties": {"title": {"type": "string", "maxLength": 12},
  "start": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"}, "minutes": {"type": "integer", "minimum": 5, "maximum": 240}},
  "required": ["title", "start"], "additionalProperties": false})";

}  // namespace

TEST_CASE("constrained: the synthetic model writes what the grammar allows and stops where it is complete") {
  const Loaded& m = synthetic();
  Session s(m.model, m.tok, one_thread());
  GenerateParams gp;
  gp.max_tokens = 64;
  gp.grammar = compiled(R"(root ::= "ok: " [a-z]{2,6} ("." | "!"))", *m.tok);
  for (float temp : {0.0f, 1.0f}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      gp.sampler.temperature = temp;
      gp.sampler.seed = seed;
      s.reset();
      const GenerateResult r = s.generate("Hello", gp);
      CAPTURE(r.text);
      CHECK(text_matches(gp.grammar, r.text));
      CHECK(r.reason == StopReason::EndOfGeneration);
    }
  }
  // Without the grammar the same call writes something else (the constraint did the work).
  GenerateParams free = gp;
  free.grammar = GrammarParams();
  free.sampler.temperature = 0.0f;
  s.reset();
  CHECK_FALSE(text_matches(gp.grammar, s.generate("Hello", free).text));
}

TEST_CASE("constrained: parallel continuations each follow the grammar with their own state") {
  const Loaded& m = synthetic();
  Session s(m.model, m.tok, one_thread());
  GenerateParams gp;
  gp.max_tokens = 48;
  gp.sampler.temperature = 1.0f;
  gp.grammar = compiled(R"(root ::= "[" [0-9]+ ("," [0-9]+){0,3} "]")", *m.tok);
  const auto rs = s.generate_parallel("Numbers", 4, gp);
  REQUIRE(rs.size() == 4);
  for (const GenerateResult& r : rs) {
    CAPTURE(r.text);
    CHECK(text_matches(gp.grammar, r.text));
  }
}

TEST_CASE("constrained: stories260K writes schema-valid JSON for every seed, and lookup drafts give the same text") {
  const Loaded* st = stories();
  if (!st) EDGELLM_SKIP("stories260K not found");
  Session s(st->model, st->tok, one_thread());
  const Json schema = Json::parse(kEventSchema);
  GenerateParams gp;
  gp.max_tokens = 300;
  gp.sampler.temperature = 1.0f;
  gp.grammar = compiled(json_schema_to_gbnf(schema), *st->tok);
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    gp.sampler.seed = seed;
    s.reset();
    const GenerateResult r = s.generate("Once upon a time", gp);
    CAPTURE(r.text);
    REQUIRE(r.reason == StopReason::EndOfGeneration);
    const Json v = Json::parse(r.text);
    CHECK(v["title"].is_string());
    CHECK(v["title"].as_string().size() <= 12);
    CHECK(v["start"].as_string().size() == 5);
    if (v.contains("minutes")) CHECK((v["minutes"].as_int() >= 5 && v["minutes"].as_int() <= 240));
  }
  // Greedy with prompt lookup (drafts are checked against the grammar) equals greedy without.
  GenerateParams greedy = gp;
  greedy.sampler.temperature = 0.0f;
  s.reset();
  const GenerateResult plain = s.generate("Once upon a time", greedy);
  GenerateParams look = greedy;
  look.speculative.lookup = true;
  look.speculative.n_max = 4;
  s.reset();
  const GenerateResult spec = s.generate("Once upon a time", look);
  CHECK(spec.text == plain.text);
  CHECK(spec.tokens == plain.tokens);
  CHECK(spec.n_drafted > 0);
}

TEST_CASE("constrained: a lazy grammar leaves the text free until its trigger") {
  const Loaded* st = stories();
  if (!st) EDGELLM_SKIP("stories260K not found");
  Session s(st->model, st->tok, one_thread());
  // Greedy stories260K writes " the" early (maybe inside " there"); from there the grammar holds.
  GenerateParams gp;
  gp.max_tokens = 80;
  gp.sampler.temperature = 0.0f;
  s.reset();
  const std::string free_text = s.generate("Once upon a time", gp).text;
  REQUIRE(free_text.find(" the") != std::string::npos);
  gp.grammar = compiled(R"(root ::= " the" [a-z]* " end" ("." | "!"))", *st->tok, {" the"});
  s.reset();
  const GenerateResult r = s.generate("Once upon a time", gp);
  const size_t at = r.text.find(" the");
  REQUIRE(at != std::string::npos);
  CHECK(r.text.substr(0, at) == free_text.substr(0, at));  // the same text before the trigger
  CHECK_MESSAGE(text_matches(gp.grammar, r.text.substr(at)), r.text);
  CHECK(r.reason == StopReason::EndOfGeneration);
}
