// Tests for grammar/tool_calls.hpp (no shared data): the format read off a template, tool_choice
// and tools validation, the calls' grammar (what it accepts and refuses, lazy triggers), the
// parser for each format, the streaming hold-back, and GrammarConstraint's lazy start.
#include <doctest/doctest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <edgellm/core/json.hpp>
#include <edgellm/grammar/completion.hpp>
#include <edgellm/grammar/constrained_sampler.hpp>
#include <edgellm/grammar/gbnf.hpp>
#include <edgellm/grammar/matcher.hpp>
#include <edgellm/grammar/tool_calls.hpp>

using namespace edgellm;

namespace {

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "weather now",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                  "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "set_alarm",
   "parameters": {"type": "object", "properties": {"time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"}},
                  "required": ["time"], "additionalProperties": false}}}
])";

bool tool_grammar_matches(const std::string& gbnf, const std::string& text) {
  GrammarMatcher m(std::make_shared<const Grammar>(Grammar::parse(gbnf)));
  return m.accept_bytes(text) && m.is_complete();
}

ToolChoice choice_of(const char* json) { return ToolChoice::parse(Json::parse(json)); }

}  // namespace

TEST_CASE("tool calls: the format comes from the template's markup") {
  CHECK(tool_call_format_of("{{- '<tool_call>\\n' }}{{ tool_call | tojson }}") == ToolCallFormat::Hermes);
  CHECK(tool_call_format_of("{{ '[TOOL_CALLS]' }}") == ToolCallFormat::Mistral);
  CHECK(tool_call_format_of("<function={{ name }}>") == ToolCallFormat::FunctionaryV31);
  CHECK(tool_call_format_of("<|start_header_id|>assistant ... {\"name\": ..., \"parameters\": ...}") == ToolCallFormat::Llama3);
  CHECK(tool_call_format_of("{% for m in messages %}{{ m.content }}{% endfor %}") == ToolCallFormat::None);
  CHECK(std::string(tool_call_format_name(ToolCallFormat::FunctionaryV31)) == "functionary-v3.1");
}

TEST_CASE("tool calls: tool_choice and tools are checked, errors name what is wrong") {
  CHECK(choice_of("\"auto\"").mode == ToolChoice::Auto);
  CHECK(choice_of("\"none\"").mode == ToolChoice::None);
  CHECK(choice_of("\"required\"").mode == ToolChoice::Required);
  const ToolChoice named = choice_of(R"({"type": "function", "function": {"name": "set_alarm"}})");
  CHECK(named.mode == ToolChoice::Named);
  CHECK(named.name == "set_alarm");
  CHECK_THROWS_WITH_AS(choice_of("\"always\""), doctest::Contains("'always'"), Error);
  CHECK_THROWS_AS(choice_of(R"({"type": "function"})"), Error);

  const auto fns = tool_functions(Json::parse(kTools));
  REQUIRE(fns.size() == 2);
  CHECK(fns[1].name == "set_alarm");
  CHECK_THROWS_WITH_AS(tool_functions(Json::parse(R"([{"type": "function", "function": {}}])")),
                       doctest::Contains("tools[0]"), Error);
  CHECK_THROWS_WITH_AS(tool_functions(Json::parse(R"([{"type": "retrieval"}])")), doctest::Contains("function"), Error);
  CHECK_THROWS_WITH_AS(
      tool_functions(Json::parse(R"([{"function": {"name": "a"}}, {"function": {"name": "a"}}])")),
      doctest::Contains("twice"), Error);
  // No parameters: any object.
  CHECK(tool_functions(Json::parse(R"([{"function": {"name": "now"}}])"))[0].parameters.dump() == R"({"type":"object"})");
  CHECK_THROWS_WITH_AS(tool_call_grammar(ToolCallFormat::Hermes, fns, choice_of(R"({"type": "function", "function": {"name": "x"}})"), true),
                       doctest::Contains("'x'"), Error);
  CHECK_THROWS_AS(tool_call_grammar(ToolCallFormat::Hermes, {}, ToolChoice(), true), Error);
  // A parameters schema the converter refuses is an error naming the keyword.
  const auto bad = tool_functions(Json::parse(R"([{"function": {"name": "f", "parameters": {"type": "object", "patternProperties": {}}}}])"));
  CHECK_THROWS_WITH_AS(tool_call_grammar(ToolCallFormat::Hermes, bad, ToolChoice(), true), doctest::Contains("patternProperties"), Error);
}

TEST_CASE("tool calls: each format's grammar accepts its calls with valid arguments, and only those") {
  const auto fns = tool_functions(Json::parse(kTools));
  const ToolChoice required = choice_of("\"required\"");
  {
    const auto g = tool_call_grammar(ToolCallFormat::Hermes, fns, required, true);
    CHECK(g.triggers.empty());
    CHECK(tool_grammar_matches(g.gbnf, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
    CHECK(tool_grammar_matches(g.gbnf, "<tool_call>{\"name\": \"set_alarm\", \"arguments\": {\"time\": \"07:00\"}}</tool_call>\n"
                                      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}</tool_call>"));
    CHECK_FALSE(tool_grammar_matches(g.gbnf, "<tool_call>{\"name\": \"set_alarm\", \"arguments\": {\"time\": \"7am\"}}</tool_call>"));
    CHECK_FALSE(tool_grammar_matches(g.gbnf, "<tool_call>{\"name\": \"launch\", \"arguments\": {}}</tool_call>"));
    CHECK_FALSE(tool_grammar_matches(g.gbnf, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"town\": \"x\"}}</tool_call>"));
    CHECK_FALSE(tool_grammar_matches(g.gbnf, "Sure! <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}</tool_call>"));
    const auto one = tool_call_grammar(ToolCallFormat::Hermes, fns, required, false);
    CHECK_FALSE(tool_grammar_matches(one.gbnf, "<tool_call>{\"name\": \"set_alarm\", \"arguments\": {\"time\": \"07:00\"}}</tool_call>"
                                              "<tool_call>{\"name\": \"set_alarm\", \"arguments\": {\"time\": \"08:00\"}}</tool_call>"));
    const auto lazy = tool_call_grammar(ToolCallFormat::Hermes, fns, ToolChoice(), true);
    CHECK(lazy.triggers == std::vector<std::string>{"<tool_call>"});
    // A named function: only that one.
    const auto named = tool_call_grammar(ToolCallFormat::Hermes, fns, choice_of(R"({"type": "function", "function": {"name": "set_alarm"}})"), true);
    CHECK(named.triggers.empty());
    CHECK_FALSE(tool_grammar_matches(named.gbnf, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}</tool_call>"));
    CHECK(tool_grammar_matches(named.gbnf, "<tool_call>{\"name\": \"set_alarm\", \"arguments\": {\"time\": \"23:59\"}}</tool_call>"));
  }
  {
    const auto g = tool_call_grammar(ToolCallFormat::Llama3, fns, required, true);
    CHECK(tool_grammar_matches(g.gbnf, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"));
    CHECK_FALSE(tool_grammar_matches(g.gbnf, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"));
  }
  {
    const auto g = tool_call_grammar(ToolCallFormat::Mistral, fns, required, true);
    CHECK(tool_grammar_matches(g.gbnf, "[TOOL_CALLS][{\"name\": \"set_alarm\", \"arguments\": {\"time\": \"06:30\"}}]"));
    CHECK(tool_grammar_matches(g.gbnf, "[{\"name\": \"set_alarm\", \"arguments\": {\"time\": \"06:30\"}}, "
                                       "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]"));
  }
  {
    const auto g = tool_call_grammar(ToolCallFormat::FunctionaryV31, fns, required, false);
    CHECK(tool_grammar_matches(g.gbnf, "<function=set_alarm>{\"time\": \"06:30\"}</function>"));
    CHECK_FALSE(tool_grammar_matches(g.gbnf, "<function=set_alarm>{\"city\": \"Rome\"}</function>"));
  }
  // Two functions whose parameters use the same $defs name keep them apart.
  const auto defs = tool_functions(Json::parse(R"([
    {"function": {"name": "a", "parameters": {"$defs": {"v": {"type": "integer"}}, "type": "object",
                  "properties": {"x": {"$ref": "#/$defs/v"}}, "required": ["x"]}}},
    {"function": {"name": "b", "parameters": {"$defs": {"v": {"type": "boolean"}}, "type": "object",
                  "properties": {"x": {"$ref": "#/$defs/v"}}, "required": ["x"]}}}])"));
  const auto g = tool_call_grammar(ToolCallFormat::Hermes, defs, required, false);
  CHECK(tool_grammar_matches(g.gbnf, "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 5}}</tool_call>"));
  CHECK(tool_grammar_matches(g.gbnf, "<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": true}}</tool_call>"));
  CHECK_FALSE(tool_grammar_matches(g.gbnf, "<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": 5}}</tool_call>"));
}

TEST_CASE("tool calls: the parser reads each format's calls, and anything else is content") {
  auto p = parse_tool_calls(ToolCallFormat::Hermes,
                            "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name == "get_weather");
  CHECK(p.calls[0].arguments == R"({"city":"Paris"})");
  CHECK(p.content == "Let me check.");
  p = parse_tool_calls(ToolCallFormat::Hermes, "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", \"arguments\": \"{\\\"k\\\": 1}\"}</tool_call>");
  REQUIRE(p.calls.size() == 2);
  CHECK(p.calls[1].arguments == R"({"k": 1})");  // arguments given as a string are kept
  // A call cut short (max_tokens) or not JSON: the whole reply is content.
  const std::string cut = "<tool_call>{\"name\": \"a\", \"argu";
  p = parse_tool_calls(ToolCallFormat::Hermes, cut);
  CHECK(p.calls.empty());
  CHECK(p.content == cut);
  CHECK(parse_tool_calls(ToolCallFormat::Hermes, "no calls here").content == "no calls here");

  p = parse_tool_calls(ToolCallFormat::Llama3, " {\"name\": \"set_alarm\", \"parameters\": {\"time\": \"07:00\"}}");
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].arguments == R"({"time":"07:00"})");
  CHECK(p.content.empty());
  CHECK(parse_tool_calls(ToolCallFormat::Llama3, "The answer is {\"name\": 1}").calls.empty());

  p = parse_tool_calls(ToolCallFormat::Mistral, "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"abcDEF123\"}]");
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].id == "abcDEF123");
  p = parse_tool_calls(ToolCallFormat::Mistral, "[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {}}]");
  CHECK(p.calls.size() == 2);  // the control token's text is not in the decoded reply

  p = parse_tool_calls(ToolCallFormat::FunctionaryV31, "<function=set_alarm>{\"time\": \"07:00\"}</function>");
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].name == "set_alarm");
  CHECK(parse_tool_calls(ToolCallFormat::None, "<tool_call>{}</tool_call>").calls.empty());

  std::mt19937_64 rng(1);
  const std::string id = new_tool_call_id(ToolCallFormat::Hermes, rng);
  CHECK(id.rfind("call_", 0) == 0);
  CHECK(id.size() == 29);
  CHECK(new_tool_call_id(ToolCallFormat::Mistral, rng).size() == 9);  // Mistral's templates want 9
}

TEST_CASE("tool calls: streaming releases content until a call may start, and finish() parses the rest") {
  const std::string reply = "Sure.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>";
  for (size_t step : {size_t(1), size_t(3), size_t(7), reply.size()}) {
    CAPTURE(step);
    ToolCallStream s(ToolCallFormat::Hermes, false);
    std::string streamed;
    for (size_t i = 0; i < reply.size(); i += step) streamed += s.push(reply.substr(i, step));
    const ParsedToolCalls p = s.finish();
    CHECK(streamed + p.content == "Sure.\n");  // "<tool_c..." was never released
    REQUIRE(p.calls.size() == 1);
    CHECK(p.calls[0].arguments == R"({"x":1})");
  }
  // Text that only looks like a trigger's start goes out when it turns out not to be one.
  ToolCallStream t(ToolCallFormat::Hermes, false);
  std::string out = t.push("a <tool");
  CHECK(out == "a ");
  out += t.push("box> b");
  const ParsedToolCalls p = t.finish();
  CHECK(out + p.content == "a <toolbox> b");
  CHECK(p.calls.empty());
  // Llama 3: a reply that opens with '{' is held whole; prose is not.
  ToolCallStream l(ToolCallFormat::Llama3, false);
  CHECK(l.push("  {\"name\"").empty());
  CHECK(l.push(": \"a\", \"parameters\": {}}").empty());
  CHECK(l.finish().calls.size() == 1);
  ToolCallStream prose(ToolCallFormat::Llama3, false);
  CHECK(prose.push("Hello {x}") == "Hello {x}");
  // Required: nothing is released before the end.
  ToolCallStream req(ToolCallFormat::Hermes, true);
  CHECK(req.push("text").empty());
  CHECK(req.finish().content == "text");
}

TEST_CASE("grammar constraint: lazy until a trigger, then the grammar holds from the trigger's first byte") {
  // A vocabulary of single bytes plus a few multi-byte tokens; the last id is EOG.
  std::vector<std::string> bytes;
  for (int c = 1; c < 128; ++c) bytes.push_back(std::string(1, char(c)));
  bytes.push_back("<call>");
  bytes.push_back("xx<ca");
  bytes.push_back("");  // EOG
  const int32_t eog = int32_t(bytes.size()) - 1, call_tok = eog - 2, split_tok = eog - 1;
  auto vocab = std::make_shared<const GrammarVocab>(bytes, std::vector<int32_t>{eog}, std::vector<int32_t>{});
  auto masker = std::make_shared<const TokenMasker>(
      std::make_shared<const Grammar>(Grammar::parse(R"(root ::= "<call>" [0-9]+ "</call>")")), vocab);
  const int n = vocab->n_vocab();
  std::vector<float> logits(size_t(n), 0.0f);
  auto id_of = [](char c) { return int32_t(c) - 1; };

  GrammarConstraint g(GrammarParams{masker, {"<call>"}});
  CHECK_FALSE(g.active());
  CHECK(g.apply(logits.data(), n) == logits.data());  // free: the row as it is
  for (char c : std::string("hi ")) g.accept(id_of(c));
  CHECK_FALSE(g.active());
  g.accept(split_tok);  // "xx<ca": a trigger's start across tokens
  for (char c : std::string("ll>")) g.accept(id_of(c));
  CHECK(g.active());
  const float* row = g.apply(logits.data(), n);
  CHECK(row != logits.data());
  CHECK(row[id_of('7')] == 0.0f);
  CHECK(row[id_of('a')] == -std::numeric_limits<float>::infinity());
  CHECK(row[eog] == -std::numeric_limits<float>::infinity());  // not complete yet
  g.accept(id_of('4'));
  for (char c : std::string("</call>")) g.accept(id_of(c));
  CHECK(g.is_complete());
  row = g.apply(logits.data(), n);
  CHECK(row[eog] == 0.0f);
  CHECK(row[id_of('1')] == -std::numeric_limits<float>::infinity());
  CHECK_THROWS_WITH_AS(g.accept(id_of('1')), doctest::Contains("not allowed"), Error);

  // Not lazy: from the first token. A trigger token itself.
  GrammarConstraint strict(GrammarParams{masker, {}});
  CHECK(strict.active());
  CHECK(strict.allows(call_tok));
  CHECK_FALSE(strict.allows(id_of('h')));
  GrammarConstraint lazy(GrammarParams{masker, {"<call>"}});
  lazy.accept(call_tok);
  CHECK(lazy.active());
  CHECK(lazy.allows(id_of('3')));
  // A logits row shorter than the grammar's vocabulary is an error.
  CHECK_THROWS_AS(strict.apply(logits.data(), n - 1), Error);
  CHECK_THROWS_AS(GrammarConstraint(GrammarParams{nullptr, {}}), Error);
}

TEST_CASE("grammar constraint: with a token budget the text closes before max_tokens ends it") {
  std::vector<std::string> bytes;
  for (int c = 1; c < 128; ++c) bytes.push_back(std::string(1, char(c)));
  bytes.push_back("abcdefgh");
  bytes.push_back("");  // EOG
  const int32_t eog = int32_t(bytes.size()) - 1;
  auto vocab = std::make_shared<const GrammarVocab>(bytes, std::vector<int32_t>{eog}, std::vector<int32_t>{});
  auto grammar = std::make_shared<const Grammar>(Grammar::parse(R"(root ::= "{\"k\": [" item ("," item)* "]}"
item ::= "\"" [a-z]* "\"")"));
  auto masker = std::make_shared<const TokenMasker>(grammar, vocab);
  CompletionDistance dist(*grammar);
  GrammarMatcher m = masker->new_matcher();
  CHECK(dist.bytes_to_complete(m) == 11);  // {"k": [""]}
  REQUIRE(m.accept_bytes("{\"k\": [\"ab"));
  CHECK(dist.bytes_to_complete(m) == 3);   // "]}
  const int n = vocab->n_vocab();
  // Logits that want letters forever: without a budget the string never closes.
  std::vector<float> logits(size_t(n), -5.0f);
  for (char c = 'a'; c <= 'z'; ++c) logits[size_t(c - 1)] = 5.0f;
  logits[size_t(n - 2)] = 9.0f;
  for (int budget : {12, 13, 20, 30, 60}) {  // at least the 11 bytes of the shortest sentence
    CAPTURE(budget);
    GrammarConstraint g(GrammarParams{masker, {}});
    std::string text;
    for (int left = budget; left > 0; --left) {
      const float* row = g.apply(logits.data(), n, left);
      int32_t best = 0;
      for (int32_t i = 1; i < n; ++i) best = row[i] > row[best] ? i : best;
      if (best == eog) break;
      g.accept(best);
      text += vocab->token_bytes(best);
    }
    CHECK_MESSAGE(g.is_complete(), text);
  }
  // No budget: the same greedy walk is still inside the string after 30 tokens.
  GrammarConstraint free(GrammarParams{masker, {}});
  for (int i = 0; i < 30; ++i) {
    const float* row = free.apply(logits.data(), n);
    int32_t best = 0;
    for (int32_t k = 1; k < n; ++k) best = row[k] > row[best] ? k : best;
    free.accept(best);
  }
  CHECK_FALSE(free.is_complete());
}
