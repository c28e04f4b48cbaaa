// Tests for engine/eval.hpp and tools/eval_tasks.hpp: answer extraction and matching, choice picking (acc / acc_norm),
// percentiles and run statistics on hand-computed cases; task parsing; the forked-prefix scorer
// against scoring every choice from scratch on stories260K; the sample task files parse.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <edgellm/tools/eval_tasks.hpp>

#include "test_util.hpp"

using namespace edgellm_test;

using namespace edgellm;

namespace {
// The scorer runs the shared prefix and each choice as separate batches; from scratch it is one
// batch. Same math, different summation grouping in the GEMM: tiny differences only.
constexpr double kMaxLogprobDiff = 1e-3;

}  // namespace

TEST_CASE("normalize_number") {
  CHECK(normalize_number("$1,234.50") == "1234.5");
  CHECK(normalize_number(" +7 ") == "7");
  CHECK(normalize_number("3.") == "3");
  CHECK(normalize_number("007") == "7");
  CHECK(normalize_number("0.50") == "0.5");
  CHECK(normalize_number(".5") == "0.5");
  CHECK(normalize_number("-0") == "0");
  CHECK(normalize_number("-12.000") == "-12");
  CHECK(normalize_number("12%") == "12");
  CHECK(normalize_number(" Paris ") == "Paris");
}

TEST_CASE("extract_boxed / extract_last_number") {
  CHECK(extract_boxed("so the answer is \\boxed{42}.") == "42");
  CHECK(extract_boxed("\\boxed{1} then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}");
  CHECK(extract_boxed("\\boxed{12") == "");
  CHECK(extract_boxed("no box") == "");
  CHECK(extract_last_number("I have 3 apples and -4.5 pears, total 1,234.") == "1,234");
  CHECK(extract_last_number("x-5") == "-5");
  CHECK(extract_last_number("10-5") == "5");
  CHECK(extract_last_number("pi is 3.14159") == "3.14159");
  CHECK(extract_last_number("no numbers here") == "");
}

TEST_CASE("extract_answer: \\boxed{} first, then ####, then the last number") {
  auto a = extract_answer("Tom has 3 + 5 = <<3+5=8>>8 apples.\n#### 8");
  CHECK(a.value == "8");
  CHECK(a.source == AnswerSource::Hash);
  a = extract_answer("The answer is \\boxed{7}. #### 8");
  CHECK(a.value == "7");
  CHECK(a.source == AnswerSource::Boxed);
  a = extract_answer("#### $1,200 dollars\nmore text 5");
  CHECK(a.value == "1200");
  CHECK(a.source == AnswerSource::Hash);
  a = extract_answer("3 + 4 = 7, so 7 apples.");
  CHECK(a.value == "7");
  CHECK(a.source == AnswerSource::LastNumber);
  a = extract_answer("I do not know");
  CHECK(a.value.empty());
  CHECK(a.source == AnswerSource::None);
  CHECK(extract_answer("#### \n 12").source == AnswerSource::LastNumber);  // empty #### line
}

TEST_CASE("answers_equal") {
  CHECK(answers_equal("1,234", "1234"));
  CHECK(answers_equal("7.0", "7"));
  CHECK(answers_equal("-3", "-3.00"));
  CHECK_FALSE(answers_equal("7", "8"));
  CHECK_FALSE(answers_equal("", ""));
  CHECK_FALSE(answers_equal("", "5"));
  CHECK(answers_equal("Paris", " paris"));
  CHECK_FALSE(answers_equal("Paris", "Rome"));
}

TEST_CASE("pick_choice: acc by log-likelihood, acc_norm per byte, first wins ties") {
  // logprob / bytes: -10/5 = -2, -12/20 = -0.6, -11/2 = -5.5
  std::vector<ChoiceScore> s = {{-10, 3, 5}, {-12, 6, 20}, {-11, 1, 2}};
  McPick p = pick_choice(s);
  CHECK(p.acc == 0);
  CHECK(p.acc_norm == 1);
  s = {{-4, 1, 4}, {-4, 1, 4}};
  p = pick_choice(s);
  CHECK(p.acc == 0);
  CHECK(p.acc_norm == 0);
  CHECK_THROWS_AS(pick_choice({}), Error);
}

TEST_CASE("EvalStats (p90 is stats_percentile's, as every tool's)") {
  EvalStats st;
  st.add(true, 10, 4, false);
  st.add(false, 30, 6, true);
  st.add(true, 20, 8, true);
  st.wall_s = 0.5;
  CHECK(st.accuracy() == doctest::Approx(2.0 / 3));
  CHECK(st.accuracy_norm() == doctest::Approx(2.0 / 3));
  CHECK(st.mean_latency_ms() == doctest::Approx(20));
  CHECK(st.p90_latency_ms() == doctest::Approx(28));  // 20 + 0.8 x (30 - 20)
  CHECK(st.mean_tokens() == doctest::Approx(6));
  CHECK(st.requests_per_s() == doctest::Approx(6));
}

TEST_CASE("render_prompt") {
  CHECK(render_prompt("Q: {question}\n{hint}A:", "2+2?", "(short)\n") == "Q: 2+2?\n(short)\nA:");
  CHECK(render_prompt("{question} {question}", "x", "") == "x x");
  CHECK(render_prompt("{hint}{other}", "x", "") == "{other}");
}

TEST_CASE("task items: piqa, hellaswag, ARC and GSM8K shapes - errors name the line") {
  McItem it = parse_mc_item(Json::parse(R"({"goal": "g", "sol1": "a", "sol2": "b", "label": 1})"), 1);
  CHECK(it.context == "g");
  REQUIRE(it.choices.size() == 2);
  CHECK(it.choices[0] == " a");
  CHECK(it.label == 1);
  it = parse_mc_item(Json::parse(R"({"ctx": "c", "endings": [" x", " y", " z"], "label": 2})"), 2);
  CHECK(it.choices.size() == 3);
  CHECK(it.label == 2);
  CHECK_THROWS_WITH_AS(parse_mc_item(Json::parse(R"({"context": "c", "choices": [" x", " y"], "label": 2})"), 7),
                       doctest::Contains("task line 7: label 2 outside [0, 2)"), Error);
  CHECK_THROWS_WITH_AS(parse_mc_item(Json::parse(R"({"choices": [" x", " y"], "label": 0})"), 3),
                       doctest::Contains("no string \"context\""), Error);
  CHECK_THROWS_AS(parse_mc_item(Json::parse(R"({"context": "c", "choices": [" x"], "label": 0})"), 3), Error);
  GenItem g = parse_gen_item(Json::parse(R"({"question": "q", "answer": 42})"), 1);
  CHECK(g.answer == "42");
  CHECK_THROWS_AS(parse_gen_item(Json::parse(R"({"question": "q"})"), 1), Error);
}

TEST_CASE("the sample task files parse") {
  const std::string dir = std::string(EDGELLM_SOURCE_DIR) + "/examples/data/";
  int files = 0;
  for (const char* f : {"piqa_sample", "hellaswag_sample", "arc_sample", "stories_mc"}) {
    const auto lines = Json::parse_lines(read_file(dir + f + ".jsonl"));
    CHECK(lines.size() >= 3);
    for (size_t i = 0; i < lines.size(); ++i) CHECK_NOTHROW(parse_mc_item(lines[i], i + 1));
    ++files;
  }
  const auto gsm = Json::parse_lines(read_file(dir + "gsm8k_sample.jsonl"));
  CHECK(gsm.size() >= 3);
  for (size_t i = 0; i < gsm.size(); ++i) {
    const GenItem g = parse_gen_item(gsm[i], i + 1);
    CHECK(extract_answer(g.answer).source == AnswerSource::Hash);
  }
  CHECK(files == 4);
}

TEST_CASE("McScorer on stories260K: forked prefix gives the from-scratch log-likelihoods") {
  const std::string path = std::string(EDGELLM_SHARED_DATA) + "/models/stories260K.gguf";
  EDGELLM_SKIP_WITHOUT(path);
  auto model = LlamaModel::load(path);
  const Tokenizer tok(Vocab::from_gguf(model->file()));
  ThreadPool pool(2);
  McScorer scorer(*model, tok, &pool);
  McItem item;
  item.context = "Once upon a time, there was a little girl named Lily. She loved to play with her";
  item.choices = {" toys.", " spreadsheets.", " big red ball in the park", "e"};  // "e" merges with "her"
  item.label = 0;
  const auto s = scorer.score(item);
  REQUIRE(s.size() == item.choices.size());
  const int n_vocab = model->config().n_vocab;
  const auto ctx_toks = tok.encode(item.context, tok.add_bos(), false);
  for (size_t c = 0; c < item.choices.size(); ++c) {
    const auto full = tok.encode(item.context + item.choices[c], tok.add_bos(), false);
    const size_t start = common_prefix(ctx_toks, full);
    PagedKvCache kv(model->kv_params(static_cast<int>(full.size())));
    const int seq = kv.create_sequence();
    LlamaContext ctx(&pool);
    Batch b;
    for (size_t i = 0; i + 1 < full.size(); ++i) b.add(full[i], int32_t(i), seq, i + 1 >= start);
    model->forward(ctx, kv, b);
    double lp = 0;
    for (size_t t = start; t < full.size(); ++t) lp += log_softmax_at(ctx.logits(int(t - start)), n_vocab, full[t]);
    INFO("choice ", c, " ours ", s[c].logprob, " from scratch ", lp);
    CHECK(std::fabs(s[c].logprob - lp) < kMaxLogprobDiff);
    CHECK(s[c].n_tokens == int(full.size() - start));
    CHECK(s[c].n_bytes == item.choices[c].size());
  }
  CHECK(scorer.last_shared_tokens() > 10);
  CHECK(pick_choice(s).acc == 0);  // a real (tiny) story model prefers toys
}
