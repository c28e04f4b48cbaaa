// Tests for grammar/: the GBNF parser (syntax, errors with line and column), the matcher (accept /
// reject as llama.cpp's grammar code, cases derived from its tests), token masks (equal to a
// token-by-token check), JSON Schema -> GBNF and the constrained sampler. Only the cases that
// name ../shared/data need it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "edgellm/core/json.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/grammar/constrained_sampler.hpp"
#include "edgellm/grammar/gbnf.hpp"
#include "edgellm/grammar/json_schema.hpp"
#include "edgellm/grammar/matcher.hpp"
#include "edgellm/grammar/token_mask.hpp"
#include "edgellm/text/tokenizer.hpp"

#include "test_util.hpp"

namespace grammar_test {

using namespace edgellm;
using edgellm_test::kData;

std::shared_ptr<const Grammar> compile(const std::string& gbnf) {
  return std::make_shared<const Grammar>(Grammar::parse(gbnf));
}

// The whole text is a sentence of the grammar (llama.cpp's test match_string).
bool matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.is_complete();
}

std::string parse_error(const std::string& gbnf) {
  try {
    Grammar::parse(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct Case {
  const char* name;
  std::string grammar;
  std::vector<std::string> pass, fail;
};

void check_cases(const std::shared_ptr<const Grammar>& g, const Case& c) {
  for (const auto& s : c.pass) CHECK_MESSAGE(matches(g, s), c.name, ": should accept: ", s);
  for (const auto& s : c.fail) CHECK_MESSAGE(!matches(g, s), c.name, ": should reject: ", s);
}

std::string schema_gbnf(const std::string& schema) { return json_schema_to_gbnf(Json::parse(schema)); }

// A vocabulary of all single bytes (so every text has a path), some multi-byte and partial UTF-8
// tokens, random strings over JSON-ish characters, an excluded control token and EOG last.
std::vector<std::string> synthetic_tokens(uint32_t seed, int n_random) {
  std::mt19937 rng(seed);
  std::vector<std::string> t;
  for (int b = 1; b < 256; ++b) t.push_back(std::string(1, char(b)));
  for (const char* s : {"\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xE2\x82", "\x82\xAC", "\xC3", "a\xC3",
                        "\xE3\x81\x82", "\xE3\x81", "\xE6\x97\xA5\xE6\x9C\xAC", "true", "false", "null", "\": ", "\", \""})
    t.push_back(s);
  const std::string alpha = "{}[]\":, \n0123456789.-+eEabcdefxyzrutnl\\/()*=_#";
  for (int i = 0; i < n_random; ++i) {
    std::string s;
    for (int k = 0, n = 1 + int(rng() % 7); k < n; ++k) s += alpha[rng() % alpha.size()];
    t.push_back(s);
  }
  t.push_back("<|control|>");
  t.push_back("</s>");
  return t;
}

std::shared_ptr<const GrammarVocab> synthetic_vocab(uint32_t seed = 7, int n_random = 2500) {
  std::vector<std::string> t = synthetic_tokens(seed, n_random);
  const auto n = int32_t(t.size());
  return std::make_shared<const GrammarVocab>(std::move(t), std::vector<int32_t>{n - 1}, std::vector<int32_t>{n - 2});
}

// Walks the grammar token by token (random allowed tokens, EOG avoided for a while), checking
// at each step that the mask equals the token-by-token check. Returns the steps taken.
int walk_and_compare(const TokenMasker& masker, uint32_t seed, int max_steps, int* n_mismatch) {
  std::mt19937 rng(seed);
  GrammarMatcher m = masker.new_matcher();
  const int32_t eog = masker.vocab().eog_ids().at(0);
  int step = 0;
  for (; step < max_steps; ++step) {
    const TokenMask fast = masker.allowed_tokens(m);
    const TokenMask slow = masker.allowed_tokens_brute_force(m);
    if (fast != slow) ++*n_mismatch;
    std::vector<int32_t> ids = slow.ids();
    if (ids.empty()) break;
    if (ids.size() > 1 && step < max_steps / 2) ids.erase(std::remove(ids.begin(), ids.end(), eog), ids.end());
    const int32_t id = ids[rng() % ids.size()];
    if (id == eog) break;
    REQUIRE(masker.accept_token(m, id));
  }
  return step;
}

// Draws a random sentence of the grammar over a one-character-a-token vocabulary, preferring
// closing characters half the time so strings and arrays end. Empty when it did not finish.
std::string random_sentence(const std::shared_ptr<const Grammar>& g, std::mt19937& rng) {
  static const std::shared_ptr<const GrammarVocab> chars = [] {
    std::vector<std::string> t;
    for (int c = 32; c < 127; ++c) t.push_back(std::string(1, char(c)));
    t.push_back("\n");
    t.push_back("\xC3\xA9");
    t.push_back("");  // EOG
    return std::make_shared<const GrammarVocab>(t, std::vector<int32_t>{int32_t(t.size() - 1)});
  }();
  const TokenMasker masker(g, chars);
  GrammarMatcher m(g);
  std::string out;
  const int32_t eog = chars->n_vocab() - 1;
  for (int step = 0; step < 600; ++step) {
    std::vector<int32_t> ids = masker.allowed_tokens(m).ids();
    if (ids.empty()) return "";
    if (m.is_complete() && (rng() % 3 == 0 || step > 300)) return out;
    ids.erase(std::remove(ids.begin(), ids.end(), eog), ids.end());
    if (ids.empty()) return out;
    std::vector<int32_t> closing;
    for (int32_t id : ids) {
      const char c = chars->token_bytes(id)[0];
      if (c == '"' || c == '}' || c == ']' || (step > 150 && c != ' ' && c != '\n')) closing.push_back(id);
    }
    const std::vector<int32_t>& pick = !closing.empty() && rng() % 2 ? closing : ids;
    const int32_t id = pick[rng() % pick.size()];
    REQUIRE(masker.accept_token(m, id));
    out += chars->token_bytes(id);
  }
  return "";
}

// Checks a JSON value against the schema subset the converter supports (enough for the tests'
// schemas: types, properties/required/additionalProperties, items, enum, lengths, bounds).
bool validates(const Json& v, const Json& s, const Json& root) {
  if (s.is_bool()) return s.as_bool();
  if (const Json* ref = s.find("$ref")) {
    const std::string& r = ref->as_string();
    const bool defs = r.rfind("#/$defs/", 0) == 0;
    return validates(v, root[defs ? "$defs" : "definitions"][r.substr(defs ? 8 : 14)], root);
  }
  for (const char* k : {"anyOf", "oneOf"})
    if (const Json* alts = s.find(k)) {
      int n = 0;
      for (const Json& a : alts->as_array()) n += validates(v, a, root);
      if (n == 0 || (std::string(k) == "oneOf" && n > 1)) return false;
    }
  if (const Json* e = s.find("enum")) {
    bool any = false;
    for (const Json& x : e->as_array()) any = any || x == v;
    if (!any) return false;
  }
  if (const Json* c = s.find("const"))
    if (!(*c == v)) return false;
  if (const Json* t = s.find("type")) {
    const std::string& type = t->as_string();
    if (type == "object" && !v.is_object()) return false;
    if (type == "array" && !v.is_array()) return false;
    if (type == "string" && !v.is_string()) return false;
    if (type == "boolean" && !v.is_bool()) return false;
    if (type == "integer" && !v.is_int()) return false;
  }
  if (v.is_object()) {
    const Json* props = s.find("properties");
    for (const auto& kv : v.as_object()) {
      const Json* p = props ? props->find(kv.first) : nullptr;
      if (p && !validates(kv.second, *p, root)) return false;
      const Json* addl = s.find("additionalProperties");
      if (!p && addl && addl->is_bool() && !addl->as_bool()) return false;
    }
    if (const Json* req = s.find("required"))
      for (const Json& r : req->as_array())
        if (!v.contains(r.as_string())) return false;
  }
  if (v.is_array()) {
    if (const Json* items = s.find("items"))
      for (const Json& x : v.as_array())
        if (!validates(x, *items, root)) return false;
    if (const Json* n = s.find("minItems"))
      if (double(v.size()) < n->as_number()) return false;
    if (const Json* n = s.find("maxItems"))
      if (double(v.size()) > n->as_number()) return false;
  }
  if (v.is_string()) {
    size_t n_cp = 0;
    for (char c : v.as_string()) n_cp += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (const Json* n = s.find("minLength"))
      if (double(n_cp) < n->as_number()) return false;
    if (const Json* n = s.find("maxLength"))
      if (double(n_cp) > n->as_number()) return false;
  }
  if (v.is_number()) {
    if (const Json* n = s.find("minimum"))
      if (v.as_number() < n->as_number()) return false;
    if (const Json* n = s.find("maximum"))
      if (v.as_number() > n->as_number()) return false;
  }
  return true;
}

}  // namespace grammar_test

using namespace grammar_test;

TEST_CASE("grammar: the parser reads llama.cpp's GBNF syntax") {
  // Comments, alternatives over lines inside groups, escapes, classes, any char, repetitions.
  const auto g = compile(R"(# a comment line
root ::= greeting ( " " name )? "\x21" tail  # trailing comment
greeting ::= "hi" | "h\u00e9llo" | "\U0001F600"
name ::= [A-Z] [a-z\-]{1,5}
tail ::= (
    "\t" [^0-9\]] |
    "\n" . |
    "\"" "\\" "\[" "\]"
  )*
)");
  CHECK(matches(g, "hi!"));
  CHECK(matches(g, "héllo Bob!"));
  CHECK(matches(g, "\xF0\x9F\x98\x80 Ann-a!\tx\n\xE2\x82\xAC\"\\[]"));
  CHECK_FALSE(matches(g, "hi Bob"));         // missing "!"
  CHECK_FALSE(matches(g, "hi bob!"));        // [A-Z]
  CHECK_FALSE(matches(g, "hi Abcdefg!"));    // {1,5}
  CHECK_FALSE(matches(g, "hi!\t5"));         // [^0-9\]]
  CHECK_FALSE(matches(g, "hi!\t]"));
  // The printed form parses back to a grammar that accepts the same strings.
  const auto again = compile(g->to_string());
  for (const char* s : {"hi!", "héllo Bob!", "hi!\tx\n.", "hi Bob"}) CHECK(matches(again, s) == matches(g, s));
  // Windows line ends and a custom root.
  CHECK(matches(compile("root ::= a\r\na ::= \"x\"\r\n"), "x"));
  CHECK(matches(std::make_shared<const Grammar>(Grammar::parse("foobar ::= \"foobar\"", "foobar")), "foobar"));
  CHECK(g->n_rules() > 4);
}

TEST_CASE("grammar: parse errors say what and where (line, column)") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rot ::= \"a\"", "no 'root' rule"},
      {"root ::= expr\nexpr ::= term (\"+\" term)*\nterm ::= numero\nnumber ::= [0-9]+",
       "undefined rule 'numero' at line 3, column 10"},
      {"root ::= \"a\" | root \"a\"", "left recursion in rule 'root'"},
      {"root ::= asdf\nasdf ::= \"a\" | asdf \"a\"", "left recursion in rule 'asdf' (defined at line 2, column 1)"},
      {"root ::= asdf\nasdf ::= \"a\" | foo \"b\"\nfoo ::= \"c\" | asdf \"d\" | \"e\"", "left recursion"},
      {"root ::= asdf\nasdf ::= \"a\" | foo \"b\"\nfoo ::= \"c\" | empty asdf \"d\" | \"e\"\nempty ::= \"blah\" | ",
       "left recursion"},
      {"root ::= \"a\\qb\"", "bad escape '\\q' at line 1, column 12"},
      {"root ::= \"\\x4g\"", "bad escape: expected 2 hex digits at line 1, column 11"},
      {"root ::= [\\uD80]", "bad escape"},
      {"root ::= \"abc", "unterminated literal at line 1, column 10"},
      {"root ::= \"abc\nx ::= \"y\"", "unterminated literal at line 1, column 10"},
      {"root ::= [abc", "unterminated character class at line 1, column 10"},
      {"root ::= []", "empty character class"},
      {"root ::= [z-a]", "character range is backwards"},
      {"root ::= \"a\"\n  b ::= \"x\"\nroot2 \"y\"", "expected '::=' after rule name 'root2' at line 3, column 7"},
      {"root ::= (\"a\" | \"b\"", "unclosed '(' at line 1, column 10"},
      {"root ::= * \"a\"", "expected an item before the repetition operator at line 1, column 10"},
      {"root ::= \"a\"{3,1}", "max < min"},
      {"root ::= \"a\"{2001}", "repetition count above 2000"},
      {"root ::= \"a\"{2 3}", "expected ',' or '}'"},
      {"root ::= \"a\" ) \"b\"", "expected newline or end of input"},
      {"root ::= <[12]>", "token references (<...>) are not supported"},
      {"root ::= \"a\"\nroot ::= \"b\"", "rule 'root' is defined twice at line 2, column 1"},
      {"root ::= \"\xC3\"", "invalid UTF-8 at line 1, column 11"},
      {"root ::= \"" + std::string(2100, 'a') + "\"{2000}", "repetition makes the grammar too large"},
      {"root ::= (\"a\"{0,100}){0,100}", "expand to more than 2000"},
  };
  for (const auto& c : cases) {
    const std::string err = parse_error(c.first);
    CHECK_MESSAGE(err.find(c.second) != std::string::npos, "grammar: ", c.first, "\nerror: ", err,
                  "\nexpected: ", c.second);
    CHECK(err.rfind("grammar: ", 0) == 0);
  }
  CHECK_THROWS_WITH_AS(Grammar::parse("root ::= \"foobar\"", "nonexistent"), doctest::Contains("no 'nonexistent' rule"),
                       Error);
}

TEST_CASE("grammar: accepts and rejects as llama.cpp's grammar code") {
  // Cases derived from llama.cpp tests/test-grammar-integration.cpp.
  const std::vector<Case> cases = {
      {"simple", "root ::= expr\nexpr ::= term (\"+\" term)*\nterm ::= number\nnumber ::= [0-9]+",
       {"42", "1+2+3+4+5", "123+456"}, {"+", "/ 3", "1+2+3+4+5+", "12a45", ""}},
      {"medium",
       R"G(root ::= expression
expression ::= term ws (("+"|"-") ws term)*
term ::= factor ws (("*"|"/") ws factor)*
factor ::= number | variable | "(" expression ")" | function-call
number ::= [0-9]+
variable ::= [a-zA-Z_][a-zA-Z0-9_]*
function-call ::= variable ws "(" (expression ("," ws expression)*)? ")"
ws ::= [ \t\n\r]?)G",
       {"42", "1*2*3*4*5", "x", "x+10", "(a+b)*(c-d)", "func()", "func(x,y+2)", "f(g(x),h(y,z))", "x + 10",
        "(a + b) * (c - d)", "func(x, y + 2)", "a * (b + c) - d / e", "123*456*789-123/456+789*123"},
       {"+", "/ 3x", "x + + y", "a * / b", "func(,)", "func(x y)", "(a + b", "x + y)", "42 +", "func(",
        "f(g(x), h(y, z)"}},
      {"special chars", "root ::= ... \"abc\" ...",
       {"abcabcabc", "aaaabcccc", "\xF0\x9F\x94\xB5\xF0\x9F\x9F\xA0\xE2\x9C\x85" "abc\xE2\x9D\x8C\xF0\x9F\x9F\xA0\xF0\x9F\x94\xB5"},
       {"aaabcccc", "aaaaabcccc", "aaaabccc", "aaaabccccc", "\xF0\x9F\x94\xB5\xF0\x9F\x9F\xA0" "abc\xF0\x9F\x9F\xA0\xF0\x9F\x94\xB5"}},
      {"*", "root ::= \"a\"*", {"", "a", "aaaaa", std::string(60, 'a')}, {"b", "ab", "aab", "ba", std::string(60, 'a') + "b"}},
      {"+", "root ::= \"a\"+", {"a", "aaaaa", std::string(60, 'a')}, {"", "b", "ab", "aab", "ba"}},
      {"?", "root ::= \"a\"?", {"", "a"}, {"b", "ab", "aa", "ba"}},
      {"mixed", "root ::= cons+ vowel* cons? (vowel cons)*\nvowel ::= [aeiouy]\ncons ::= [bcdfghjklmnpqrstvwxyz]",
       {"yes", "no", "noyes", "crwth", "four", "bryyyy"}, {"yess", "yesno", "forty", "catyyy"}},
      {"{4}", "root ::= [ab]{4}", {"aaaa", "bbbb", "abab"}, {"a", "b", "aaaaa"}},
      {"{4,}", "root ::= [ab]{4,}", {"aaaa", "aaaaab", "bbbb", "ababab"}, {"", "aba"}},
      {"{0,4}", "root ::= [ab]{0,4}", {"", "a", "aa", "aaa", "aaab"}, {"aaaaa"}},
      {"{3,5}", "root ::= (\"0x\" [A-F0-9]{2} \" \"?){3,5}", {"0xFF 0x12 0xAB", "0xFF 0x12 0xAB 0x00 0x00"},
       {"", "0xFF", "0xFF 0x12", "0xFF 0x12 0xAB 0x00 0x00 0x00"}},
      {"nested star", "root ::= ( [x]* )*", {"", "x", "xx"}, {"y", "yy"}},
      {"negated class with ranges", "root ::= [^a-c\\x00-\\x1F]+", {"xyz", "d\xC3\xA9"}, {"abc", "xa", "\n", ""}},
      {"any char incl. multi-byte", "root ::= . . \"!\"", {"ab!", "\xE2\x82\xAC\xF0\x9F\x98\x80!"}, {"a!", "abc!"}},
      {"escapes", "root ::= \"\\x41\\u00E9\\U0001F600\\t\\\\\"", {"A\xC3\xA9\xF0\x9F\x98\x80\t\\"}, {"A"}},
  };
  for (const Case& c : cases) check_cases(compile(c.grammar), c);
}

TEST_CASE("grammar: llama.cpp's example grammars accept and reject (shared data)") {
  const std::string dir = kData + "/grammar/";
  EDGELLM_SKIP_WITHOUT(dir + "json.gbnf");
  const std::vector<Case> cases = {
      {"arithmetic", "", {"1+2=3\n", "x = y\n", "a*(b+c)= 4\n", "(x)=(y)\nz=1\n", "ab_1 = 2\n"},
       {"", "1+2=3", "=3\n", "1+=3\n", "A=1\n", "(1=2\n"}},
      {"c", "", {"", "int main(){}", "int f(int x){return x;}", "float g(){while(a<b){a = a+1;}}",
                 "int h(){for(i = 0; i<10; i = i+1){}}", "char c(){// hi\n}", "int m(){/* a * b */}"},
       {"int", "int main()", "main(){}", "int f(){return x}", "int f(){x = ;}"}},
      {"chess", "", {"1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n2. c4 dxc4\n3. O-O O-O-O\n", "1. e4 e5\n10. Qxf7# Kxf7\n"},
       {"1. e4 e5\n", "1. e9 e5\n2. a1 a2\n", "2. e4 e5\n2. e4 e5\n", "1. e4 e5\n2. Pxe5 a6\n"}},
      {"english", "", {"Hello, world!", "a b\tc\nd", "x"}, {"", " lead", "trail ", "h\xC3\xA9llo", "a  b"}},
      {"japanese", "", {"\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF", "\xE6\x97\xA5\xE6\x9C\xAC \xE3\x82\xAB"},
       {"", "hello", "\xE3\x81\x82 a", "\xE3\x81\x82  \xE3\x81\x82"}},
      {"json", "", {"{}", "{\"a\": [1, 2.5, \"x\\u00e9\"], \"b\": null}", "{\"k\":true}", "{\"n\": -0.5e3}",
                    "{\"s\": \"\xC3\xA9\\n\"} "},
       {"", "[]", "{\"a\":}", "{\"a\" 1}", "{'a': 1}", "{\"a\": 01}", "{\"a\": \"\n\"}"}},
      {"json_arr", "", {"[\n]", "[\n1,\n\"a\"]", "[\n{\"a\": [true]}]"}, {"[]", "[\n1,\n]", "[\n1] ", "{}"}},
      {"list", "", {"- one\n", "- one\n- two \xE2\x82\xAC\n"}, {"", "- \n", "- one", "* one\n", "- a\rb\n"}},
  };
  for (const Case& c : cases) {
    const std::string text = edgellm_test::read_file(dir + c.name + ".gbnf");
    REQUIRE_MESSAGE(!text.empty(), c.name);
    check_cases(compile(text), c);
  }
}

TEST_CASE("grammar: matcher state: partial UTF-8 across chunks, copies, rejection, completion") {
  const auto g = compile("root ::= \"\xE2\x82\xAC\" [0-9]+ | \"\xE2\x82\xAB\"");
  GrammarMatcher m(g);
  CHECK(m.accept_bytes("\xE2"));  // a sequence some stack can still complete
  CHECK_FALSE(m.is_complete());
  GrammarMatcher fork = m;       // copies are independent
  CHECK(m.accept_bytes("\x82"));
  CHECK(m.accept_bytes("\xAC" "1"));
  CHECK(m.is_complete());
  CHECK_FALSE(m.accept_bytes("x"));  // rejected: state unchanged
  CHECK(m.accept_bytes("23"));
  CHECK(m.is_complete());
  CHECK(fork.accept_bytes("\x82\xAB"));
  CHECK(fork.is_complete());
  CHECK(fork.is_terminated());
  CHECK_FALSE(fork.accept_bytes("1"));
  GrammarMatcher bad(g);
  CHECK_FALSE(bad.accept_bytes("\xE3"));  // no alternative starts with this lead byte's range
  CHECK_FALSE(bad.accept_bytes("\x82"));  // a continuation byte cannot start a character
  CHECK(bad.accept_bytes("\xE2\x82\xAB"));
  // accept(code point) and reset.
  GrammarMatcher c(g);
  CHECK(c.accept(0x20AC));
  CHECK_FALSE(c.accept('a'));
  CHECK(c.accept('7'));
  CHECK(c.is_complete());
  c.reset();
  CHECK_FALSE(c.is_complete());
  CHECK(c.accept(0x20AB));
  // A long input keeps the pool compact (nodes do not grow with the text).
  GrammarMatcher longm(compile("root ::= (\"ab\" | \"a\" \"b\")*"));
  for (int i = 0; i < 20000; ++i) REQUIRE(longm.accept_bytes("ab"));
  CHECK(longm.is_complete());
  CHECK(longm.pool().size() < 64);
}

TEST_CASE("grammar: adversarial grammars fail with an Error, not a hang or a crash") {
  // Hidden left recursion that grows the stack (llama.cpp loops on it): bounded.
  CHECK_THROWS_WITH_AS(GrammarMatcher(compile("root ::= a root \"x\" | \"y\"\na ::= b\nb ::= \"\" | \"z\"")),
                       doctest::Contains("grammar: "), Error);
  // Unbounded nesting: the depth bound stops it.
  GrammarMatcher nest(compile("root ::= \"(\" root \")\" | \"\""));
  bool threw = false;
  try {
    for (int i = 0; i < 20000; ++i) nest.accept('(');
  } catch (const Error& e) {
    threw = std::string(e.what()).find("deeper than") != std::string::npos;
  }
  CHECK(threw);
  // Highly ambiguous but finite: stacks are deduplicated, so it stays fast.
  GrammarMatcher amb(compile("root ::= x*\nx ::= \"a\" | \"a\" \"a\" | \"a\" \"a\" \"a\" | y\ny ::= \"a\"+"));
  for (int i = 0; i < 2000; ++i) REQUIRE(amb.accept('a'));
  CHECK(amb.is_complete());
  CHECK(amb.n_stacks() < 64);
}

TEST_CASE("grammar: token masks equal the token-by-token check (synthetic vocabulary)") {
  const auto vocab = synthetic_vocab();
  const std::vector<std::string> grammars = {
      "root ::= object\nobject ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\npair ::= str \":\" ws value\n"
      "value ::= object | str | num | \"true\" | \"false\" | \"null\" | \"[\" ws (value (\",\" ws value)*)? \"]\"\n"
      "str ::= \"\\\"\" ([^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\nt])* \"\\\"\" ws\nnum ::= \"-\"? [0-9]+ (\".\" [0-9]+)? ws\n"
      "ws ::= [ \\n]?",
      "root ::= (expr \"=\" ws term \"\\n\")+\nexpr ::= term ([-+*/] term)*\nterm ::= [a-z] [a-z0-9_]* ws | [0-9]+ ws | \"(\" ws expr \")\" ws\nws ::= [ \\t\\n]*",
      "root ::= ([\xE2\x82\xAC\xC3\xA9] | [\xE3\x81\x80-\xE3\x82\x9F] | \"\xE6\x97\xA5\xE6\x9C\xAC\")+ (\" \" [a-c]{1,3})?",
      "root ::= [^\xC3\xA9\"]* \"\\\"\"",
      schema_gbnf(R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 5},
                      "n": {"type": "integer", "minimum": -20, "maximum": 300}, "tags": {"type": "array",
                      "items": {"enum": ["a", "bc", 3]}, "maxItems": 2}}, "required": ["name"]})"),
  };
  for (size_t gi = 0; gi < grammars.size(); ++gi) {
    const auto g = compile(grammars[gi]);
    // (Each masker compiles its grammar over the vocabulary; under qemu that is most of the case.)
    for (int depth : {1, 4, 16}) {
      TokenMaskerOptions opt;
      opt.suffix_depth = depth;
      const TokenMasker masker(g, vocab, opt);
      int mismatches = 0;
      for (uint32_t seed = 1; seed <= 2; ++seed) {
        const int steps = walk_and_compare(masker, seed * 100 + uint32_t(gi), 50, &mismatches);
        CHECK(steps > 0);
      }
      CHECK_MESSAGE(mismatches == 0, "grammar ", gi, " suffix depth ", depth);
      CHECK(masker.cache_entries() > 0);
    }
  }
  // The cache can be turned off (every mask a full trie walk): same masks.
  TokenMaskerOptions none;
  none.max_cache_bytes = 0;
  const TokenMasker uncached(compile(grammars[0]), vocab, none);
  int mismatches = 0;
  walk_and_compare(uncached, 5, 40, &mismatches);
  CHECK(mismatches == 0);
  CHECK(uncached.cache_entries() == 0);
}

TEST_CASE("grammar: the compiled cache (precompute) gives the same masks and builds nothing later") {
  const auto vocab = synthetic_vocab(9, 600);
  const std::vector<std::string> grammars = {
      schema_gbnf(R"({"type": "object", "properties": {"title": {"type": "string", "maxLength": 6},
                      "people": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
                      "n": {"type": "integer", "minimum": 5, "maximum": 240}}, "required": ["title"]})"),
      json_object_gbnf(),
      "root ::= (\"a\" x | \"b\" x x)+\nx ::= [a-c]{0,4} \";\" | \"\\\"\" [^\"]* \"\\\"\"",
  };
  for (size_t gi = 0; gi < grammars.size(); ++gi) {
    const auto g = compile(grammars[gi]);
    for (size_t refine : {size_t(0), size_t(16), size_t(1) << 30}) {
      TokenMaskerOptions opt;
      opt.refine_above = refine;
      const TokenMasker masker(g, vocab, opt);
      const TokenMasker::CacheStats st = masker.cache_stats();
      CHECK(st.entries > 0);
      CHECK(st.bytes > 0);
      CHECK(masker.precompute().entries == st.entries);  // a second compile adds nothing
      int mismatches = 0;
      for (uint32_t seed = 1; seed <= 2; ++seed) CHECK(walk_and_compare(masker, seed * 7 + uint32_t(gi), 30, &mismatches) > 0);
      CHECK_MESSAGE(mismatches == 0, "grammar ", gi, " refine_above ", refine);
      // Every stack suffix a mask needs was compiled: none is built on first use.
      CHECK_MESSAGE(masker.cache_entries() == st.entries, "grammar ", gi, " refine_above ", refine);
    }
    // Lazy (built on first use) and compiled under a byte budget too small for all: same masks.
    for (size_t budget : {size_t(0), size_t(20000), size_t(200000)}) {
      TokenMaskerOptions opt;
      opt.max_cache_bytes = budget;
      opt.precompute = budget != 0;
      const TokenMasker masker(g, vocab, opt);
      int mismatches = 0;
      walk_and_compare(masker, 11 + uint32_t(gi), 50, &mismatches);
      CHECK_MESSAGE(mismatches == 0, "grammar ", gi, " budget ", budget);
      CHECK(masker.cache_stats().bytes <= budget);
    }
  }
}

TEST_CASE("grammar: one masker serves several threads, each with its own matcher") {
  const auto vocab = synthetic_vocab(5, 800);
  const auto g = compile(schema_gbnf(R"({"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string", "maxLength": 6}, "v": {"type": "integer"}}, "required": ["k"]}})"));
  const TokenMasker shared(g, vocab);
  // Each thread walks its own token sequence; the masks must equal those of a private masker.
  std::vector<std::vector<int32_t>> walks(4);
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < walks.size(); ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(uint32_t(t) + 1);
      const TokenMasker own(g, vocab);
      GrammarMatcher m = shared.new_matcher();
      for (int step = 0; step < 40; ++step) {
        const TokenMask a = shared.allowed_tokens(m), b = own.allowed_tokens(m);
        if (a != b) ++bad[t];
        std::vector<int32_t> ids = a.ids();
        ids.erase(std::remove(ids.begin(), ids.end(), vocab->n_vocab() - 1), ids.end());
        if (ids.empty()) {  // complete: start another sentence
          m.reset();
          continue;
        }
        const int32_t id = ids[rng() % ids.size()];
        if (!shared.accept_token(m, id)) ++bad[t];
        walks[t].push_back(id);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < walks.size(); ++t) {
    CHECK(bad[t] == 0);
    CHECK(walks[t].size() > 5);
  }
}

TEST_CASE("grammar: EOG only where complete, excluded and foreign tokens never") {
  const auto vocab = synthetic_vocab(3, 100);
  const int32_t eog = vocab->n_vocab() - 1, control = vocab->n_vocab() - 2;
  const TokenMasker masker(compile("root ::= \"ab\" | \"ab\" \"c\"+"), vocab);
  GrammarMatcher m = masker.new_matcher();
  TokenMask mask = masker.allowed_tokens(m);
  CHECK_FALSE(mask.test(eog));
  CHECK_FALSE(mask.test(control));
  CHECK(mask.test('a' - 1));  // single-byte tokens are ids byte - 1
  CHECK_FALSE(mask.test('b' - 1));
  CHECK_FALSE(masker.accept_token(m, eog));
  CHECK(masker.accept_token(m, 'a' - 1));
  CHECK(masker.accept_token(m, 'b' - 1));
  mask = masker.allowed_tokens(m);
  CHECK(mask.test(eog));
  CHECK(mask.test('c' - 1));
  CHECK(masker.accept_token(m, eog));  // allowed, leaves the state
  CHECK_FALSE(masker.accept_token(m, control));
  CHECK_FALSE(masker.accept_token(m, -1));
  CHECK_FALSE(masker.accept_token(m, vocab->n_vocab()));
  // Another grammar's matcher is refused.
  GrammarMatcher other(compile("root ::= \"x\""));
  CHECK_THROWS_AS(masker.allowed_tokens(other), Error);
  // Bad vocabulary input.
  CHECK_THROWS_AS(GrammarVocab({"a"}, {3}), Error);
}

TEST_CASE("grammar: token masks on the Qwen2 vocabulary (shared data)") {
  const std::string path = kData + "/grammar/tiny-qwenvocab-Q4_0.gguf";
  EDGELLM_SKIP_WITHOUT(path);
  const Tokenizer tok(Vocab::from_gguf(GgufFile::open(path)));
  const auto vocab = grammar_vocab_of(tok);
  REQUIRE(vocab->n_vocab() == 151936);
  const auto g = compile(schema_gbnf(R"({"type": "object", "properties": {"title": {"type": "string", "maxLength": 20},
      "start": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"}, "minutes": {"type": "integer", "minimum": 5,
      "maximum": 240}, "people": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
      "required": ["title", "start"], "additionalProperties": false})"));
  const TokenMasker masker(g, vocab);
  const std::string doc = R"({"title": "Café trip 日本", "start": "09:30", "minutes": 45, "people": ["Ann", "Bob"]})";
  const std::vector<int32_t> ids = tok.encode(doc, false, false);
  GrammarMatcher m = masker.new_matcher();
  TokenMask mask;
  for (size_t k = 0; k < ids.size(); ++k) {
    masker.fill_mask(m, mask);
    REQUIRE_MESSAGE(mask.test(ids[k]), "token ", k, " of the document is masked out");
    CHECK_FALSE(mask.test(tok.eos() >= 0 ? tok.eos() : vocab->eog_ids().at(0)));
    if (k % 6 == 0) CHECK(mask == masker.allowed_tokens_brute_force(m));  // ~0.1 s each
    REQUIRE(masker.accept_token(m, ids[k]));
  }
  CHECK(m.is_complete());
  masker.fill_mask(m, mask);
  CHECK(mask == masker.allowed_tokens_brute_force(m));
  for (int32_t e : vocab->eog_ids()) CHECK(mask.test(e));
  // Mid-character state (a token ending inside a UTF-8 sequence): the exact walk path.
  GrammarMatcher s = masker.new_matcher();
  REQUIRE(s.accept_bytes("{\"title\": \"\xE6\x97"));
  masker.fill_mask(s, mask);
  CHECK(mask == masker.allowed_tokens_brute_force(s));
  CHECK(mask.count() > 0);
}

TEST_CASE("grammar: JSON Schema conversions accept and reject as llama.cpp does") {
  // Cases derived from llama.cpp tests/test-grammar-integration.cpp test_json_schema.
  const std::vector<Case> cases = {
      {"{}", "{}", {"{}", R"({"foo": "bar"})", "[]", "null", R"("")", "true"}, {"", R"({"foo"})", "foo"}},
      {"formats", R"({"items": [{"format": "date"}, {"format": "uuid"}, {"format": "time"}, {"format": "date-time"}]})",
       {R"(["2012-04-23", "12345678-1234-1234-1234-1234567890ab", "18:25:43.511Z", "2012-04-23T18:25:43.511Z"])"},
       {R"(["foo", "bar"])", R"(["12345678-1234-1234-1234-1234567890ab"])", R"(["2012-13-01", "x", "y", "z"])"}},
      {"string", R"({"type": "string"})", {R"("foo")", R"("")", R"("a\"b\u00e9")"}, {"{}", R"("foo": "bar")", "\"a\nb\""}},
      {"minLength 3", R"({"type": "string", "minLength": 3})", {R"("foo")", R"("foobar")"}, {R"("")", R"("fo")"}},
      {"maxLength 3", R"({"type": "string", "maxLength": 3})", {R"("foo")", R"("")", R"("\u00e9ab")"}, {R"("foob")"}},
      {"length 1-4", R"({"type": "string", "minLength": 1, "maxLength": 4})", {R"("f")", R"("barf")"}, {R"("")", R"("barfo")"}},
      {"boolean", R"({"type": "boolean"})", {"true", "false"}, {R"("")", R"("true")", "True", "FALSE"}},
      {"integer", R"({"type": "integer"})", {"0", "12345", "1234567890123456", "-7"}, {"", "01", "007", "12345678901234567", "1.5"}},
      {"number", R"({"type": "number"})", {"0", "-1.5", "2e10", "3.25E-2"}, {"", ".5", "1.", "+1", "01"}},
      {"const", R"({"const": "foo"})", {R"("foo")"}, {"foo", R"("bar")"}},
      {"const true", R"({"const": true})", {"true"}, {"", "foo", R"("true")"}},
      {"enum", R"({"enum": ["red", "amber", "green", null, 42, ["foo"]]})", {R"("red")", "null", "42", R"(["foo"])"},
       {"", "420", "true", "foo"}},
      {"pattern", R"({"pattern": "^[a-zA-Z0-9_-]*$"})", {R"("")", R"("He_llo-12")"}, {R"("!")", R"("Hello World")"}},
      {"pattern escapes", R"({"pattern": "^a\\^\\$\\.\\[\\]\\(\\)\\|\\{\\}\\*\\+\\?b$"})", {R"("a^$.[]()|{}*+?b")"}, {R"("ab")"}},
      {"pattern groups", R"({"type": "string", "pattern": "^(ab|c)+\\d{2,3}(?:x)?$"})", {R"("abc12")", R"("c123x")"},
       {R"("ab1")", R"("abc1234")", R"("12")"}},
      {"pattern unanchored", R"({"type": "string", "pattern": "[0-9]{3}"})", {R"("ab123cd")", R"("999")"}, {R"("ab12")"}},
      {"type list", R"({"type": ["array", "null"], "items": {"type": "string"}})", {"null", "[]", R"(["123"])", R"(["foo", "bar"])"},
       {"", "[123]", R"("foo")", R"(["foo", 42])"}},
      {"min+max items", R"({"items": {"type": ["number", "integer"]}, "minItems": 3, "maxItems": 5})",
       {"[1, 2, 3]", "[1, 2, 3, 4]", "[1, 2, 3, 4, 5]"}, {"[1, 2]", "[1, 2, 3, 4, 5, 6]", "1"}},
      {"object properties",
       R"({"type": "object", "properties": {"number": {"type": "number"}, "street_name": {"type": "string"}, "street_type": {"enum": ["Street", "Avenue", "Boulevard"]}}})",
       {R"({ "number": 1600, "street_name": "Pennsylvania", "street_type":"Avenue"})", R"({ "street_name": "Pennsylvania" })",
        R"({ "number": 1600, "street_name": "Pennsylvania" })", "{}"},
       {R"({ "number": "1600", "street_name": "Pennsylvania", "street_type":"Avenue"})",
        R"({ "street_name": "Pennsylvania", "number": 1600 })",
        R"({ "number": 1600, "street_name": "Pennsylvania", "street_type":"Avenue", "direction":"NW"})"}},
      {"additional properties can't override",
       R"({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "additionalProperties": true})",
       {R"({"a": 42})", R"({"c": ""})", R"({"a": 42, "c": ""})", R"({"a_": ""})"}, {"", R"({"a": ""})", R"({"a": "", "b": ""})"}},
      {"additionalProperties schema", R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"], "additionalProperties": {"type": "boolean"}})",
       {R"({"id": 1})", R"({"id": 1, "ok": true, "x": false})"}, {R"({"id": 1, "ok": 1})", R"({"ok": true})", R"({"id": 1, "id": true})"}},
      {"required + optional in order",
       R"({"properties": {"b": {"type": "string"}, "a": {"type": "string"}, "d": {"type": "string"}, "c": {"type": "string"}}, "required": ["a", "b"], "additionalProperties": false})",
       {R"({"b": "foo", "a": "bar"})", R"({"b":"foo","a":"bar","d":"qux"})", R"({"b":"foo", "a":"bar", "d":"qux", "c":"baz"})",
        R"({"b":"foo", "a":"bar", "c":"baz"})"},
       {R"({"a": "foo", "b": "bar"})", R"({"b": "bar"})", R"({"a": "foo", "c": "baz"})", R"({"a":"foo", "b":"bar", "c":"baz", "d":"qux"})"}},
      {"required first", R"({"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["y"]})",
       {R"({"y": 1})", R"({"y": 1, "x": 2})"}, {R"({"x": 2, "y": 1})", R"({"x": 2})"}},
      {"additionalProperties false, no properties", R"({"type": "object", "additionalProperties": false})", {"{}", "{ }"}, {R"({"a": 1})"}},
      {"prefixItems", R"({"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": {"type": "boolean"}, "maxItems": 3})",
       {R"([1, "a"])", R"([1, "a", true])"}, {R"([1])", R"([1, "a", true, false])", R"(["a", 1])"}},
      {"anyOf/oneOf/allOf",
       R"({"anyOf": [{"type": "integer", "minimum": 3, "maximum": 3}, {"oneOf": [{"const": "x"}, {"type": "null"}]}, {"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"properties": {"b": {"type": "boolean"}}}]}]})",
       {"3", R"("x")", "null", R"({"a": 1})", R"({"a": 1, "b": true})"}, {"4", R"("y")", R"({"b": true})"}},
      {"$ref and definitions, recursive",
       R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}}, "$ref": "#/$defs/node"})",
       {R"({"v": 1, "next": null})", R"({"v": 1, "next": {"v": 2, "next": null}})"}, {R"({"v": 1})", R"({"v": 1, "next": 2})"}},
      {"definitions", R"({"definitions": {"c": {"enum": ["r", "g"]}}, "type": "array", "items": {"$ref": "#/definitions/c"}})",
       {R"(["r", "g"])", "[]"}, {R"(["b"])"}},
      {"integer bounds", R"({"type": "integer", "exclusiveMinimum": -3, "exclusiveMaximum": 12})", {"-2", "0", "11"}, {"-3", "12", "-0", "011"}},
  };
  for (const Case& c : cases) {
    const std::string gbnf = schema_gbnf(c.grammar);
    INFO(c.name, "\n", gbnf);
    check_cases(compile(gbnf), c);
  }
}

TEST_CASE("grammar: integer ranges accept exactly the integers in range") {
  const std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> cases = {
      {R"({"type": "integer", "minimum": 0})", {0, INT64_MAX}},
      {R"({"type": "integer", "minimum": 2})", {2, INT64_MAX}},
      {R"({"type": "integer", "minimum": 37})", {37, INT64_MAX}},
      {R"({"type": "integer", "minimum": -37})", {-37, INT64_MAX}},
      {R"({"type": "integer", "maximum": 0})", {INT64_MIN, 0}},
      {R"({"type": "integer", "maximum": -12})", {INT64_MIN, -12}},
      {R"({"type": "integer", "maximum": 105})", {INT64_MIN, 105}},
      {R"({"type": "integer", "minimum": -105, "maximum": -7})", {-105, -7}},
      {R"({"type": "integer", "minimum": -9, "maximum": 140})", {-9, 140}},
      {R"({"type": "integer", "minimum": 5, "maximum": 240})", {5, 240}},
      {R"({"type": "integer", "minimum": 10, "maximum": 19})", {10, 19}},
      {R"({"type": "integer", "minimum": 0, "maximum": 0})", {0, 0}},
      {R"({"type": "integer", "minimum": 1.5, "maximum": 7.5})", {2, 7}},
  };
  for (const auto& c : cases) {
    const auto g = compile(schema_gbnf(c.first));
    for (int64_t x = -300; x <= 300; ++x) {
      const bool in = x >= c.second.first && x <= c.second.second;
      CHECK_MESSAGE(matches(g, std::to_string(x)) == in, c.first, " x=", x);
    }
    CHECK(matches(g, "1000000") == (c.second.second > 1000000));
    CHECK(matches(g, "-1000000") == (c.second.first < -1000000));
    CHECK_FALSE(matches(g, "-0"));
    CHECK_FALSE(matches(g, "007"));
  }
  CHECK(matches(compile(schema_gbnf(R"({"type": "integer", "minimum": 456})")), "4560"));
  CHECK_FALSE(matches(compile(schema_gbnf(R"({"type": "integer", "minimum": 2})")), "02"));
}

TEST_CASE("grammar: unsupported JSON Schema features are errors that name them") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "array", "uniqueItems": true})", "unsupported keyword 'uniqueItems'"},
      {R"({"type": "number", "multipleOf": 2})", "unsupported keyword 'multipleOf'"},
      {R"({"not": {"type": "string"}})", "unsupported keyword 'not'"},
      {R"({"type": "object", "patternProperties": {"^a": {}}})", "unsupported keyword 'patternProperties'"},
      {R"({"if": {}, "then": {}})", "unsupported keyword 'if'"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "contentEncoding": "base64"}}})",
       "unsupported keyword 'contentEncoding' (at root-a)"},
      {R"({"type": "string", "format": "email"})", "unsupported format 'email'"},
      {R"({"type": "number", "minimum": 0})", "keyword 'minimum' is not supported with type 'number'"},
      {R"({"type": "string", "minItems": 1})", "keyword 'minItems' is not supported with type 'string'"},
      {R"({"type": "tuple"})", "unsupported type 'tuple'"},
      {R"({"$ref": "https://example.com/s.json"})", "unsupported $ref"},
      {R"({"$ref": "#/$defs/missing"})", "not found"},
      {R"({"type": "string", "pattern": "^(?=a)b$"})", "lookaround"},
      {R"({"type": "string", "pattern": "^(a)\\1$"})", "backreferences"},
      {R"({"type": "string", "pattern": "^a+?$"})", "lazy"},
      {R"({"type": "string", "pattern": "^[\"x]$"})", "classes holding"},
      {R"({"type": "string", "pattern": "^(ab$"})", "unclosed ("},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "empty"},
      {R"({"type": "integer", "minimum": 1e300})", "beyond"},
      {R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "required property 'b' is not in properties"},
      {R"({"type": "array", "maxItems": 1, "minItems": 2})", "maxItems < minItems"},
      {R"({"type": "object", "required": ["id"]})", "required without properties"},
      {"false", "accepts nothing"},
      {"[1]", "must be an object"},
  };
  for (const auto& c : cases) {
    std::string err;
    try {
      schema_gbnf(c.first);
    } catch (const Error& e) {
      err = e.what();
    }
    CHECK_MESSAGE(err.find(c.second) != std::string::npos, c.first, "\nerror: ", err, "\nexpected: ", c.second);
  }
}

TEST_CASE("grammar: random sentences of schema grammars parse and validate") {
  std::vector<Json> schemas;
  const std::string path = kData + "/grammar/schemas.json";
  if (edgellm_test::path_exists(path)) {
    const Json all = Json::parse(edgellm_test::read_file(path));
    for (const Json& s : all.as_array()) schemas.push_back(s["schema"]);
    CHECK(schemas.size() == 6);
  } else {
    EDGELLM_SKIP_PART(path, " not found: built-in schemas only");
  }
  for (const char* s : {R"({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}, "id": {"type": "string", "format": "uuid"}, "n": {"type": "integer", "minimum": -5, "maximum": 5}}, "required": ["when", "id", "n"]})",
                        R"({"type": "array", "items": {"type": "object", "properties": {"k": {"enum": ["a", "b"]}, "v": {"type": ["string", "null"], "maxLength": 3}}, "required": ["k"], "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 9}}, "maxItems": 4})",
                        "{}"})
    schemas.push_back(Json::parse(s));
  std::mt19937 rng(2024);
  int produced = 0;
  for (const Json& schema : schemas) {
    const auto g = compile(json_schema_to_gbnf(schema));
    for (int k = 0; k < 12; ++k) {
      const std::string text = random_sentence(g, rng);
      if (text.empty()) continue;  // a walk that did not close within its step budget
      ++produced;
      Json v;
      REQUIRE_NOTHROW(v = Json::parse(text));
      CHECK_MESSAGE(validates(v, schema, schema), schema.dump(), "\n", text);
      CHECK(matches(g, text));
    }
  }
  CHECK(produced >= int(schemas.size()) * 6);
  // The built-in json_object grammar: any object, nothing else.
  const auto obj = compile(json_object_gbnf());
  CHECK(matches(obj, R"({"a": [1, {"b": null}], "c": "\u00e9"})"));
  CHECK_FALSE(matches(obj, "[1]"));
  CHECK_FALSE(matches(obj, R"({"a": 1,})"));
}

TEST_CASE("grammar: constrained sampler masks the logits and advances on the chosen token") {
  const auto vocab = synthetic_vocab(11, 400);
  const auto g = compile(schema_gbnf(R"({"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 1, "maximum": 99}}, "required": ["ok", "n"], "additionalProperties": false})"));
  auto masker = std::make_shared<const TokenMasker>(g, vocab);
  const int n = vocab->n_vocab();
  for (float temp : {0.0f, 1.0f}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      SamplerParams p;
      p.temperature = temp;
      p.top_k = 0;
      p.top_p = 1.0f;
      p.min_p = 0.0f;
      p.seed = seed;
      ConstrainedSampler cs(masker, p);
      std::mt19937 rng{uint32_t(seed)};
      std::uniform_real_distribution<float> u(-4.0f, 4.0f);
      std::vector<float> logits(static_cast<size_t>(n));
      std::string text;
      bool ended = false;
      for (int step = 0; step < 200 && !ended; ++step) {
        for (float& l : logits) l = u(rng);
        // Push the model toward closing the object so the walk ends.
        if (step > 40) logits[size_t('}' - 1)] += 20.0f;
        logits[size_t(n - 1)] += cs.is_complete() ? 20.0f : 0.0f;
        const int32_t id = cs.sample(logits.data(), n);
        REQUIRE(cs.allows(id));
        cs.accept(id);
        if (id == n - 1) ended = true;
        else text += vocab->token_bytes(id);
      }
      REQUIRE(ended);
      const Json v = Json::parse(text);
      CHECK(v["ok"].is_bool());
      CHECK(v["n"].as_int() >= 1);
      CHECK(v["n"].as_int() <= 99);
    }
  }
  // A disallowed token is refused; all-(-inf) allowed logits still give an allowed token.
  ConstrainedSampler cs(masker);
  CHECK_THROWS_WITH_AS(cs.accept('x' - 1), doctest::Contains("not allowed"), Error);
  std::vector<float> logits(static_cast<size_t>(n), -std::numeric_limits<float>::infinity());
  const int32_t id = cs.sample(logits.data(), n);
  CHECK(cs.allows(id));
  CHECK(vocab->token_bytes(id)[0] == '{');
  CHECK_THROWS_AS(cs.sample(logits.data(), n - 1), Error);
}
