// Paged attention on the shared models: logits equal a contiguous-KV reference forward (written
// here, one token at a time) for block sizes 1, 16, 32 over sequences spanning many blocks;
// fork-then-continue equals an independent run and shares blocks; N sequences in one batch equal
// separate runs; Session eviction (short version of the 40k-token run), parallel generation and
// the context / budget errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <edgellm/engine/session.hpp>
#include <edgellm/kernels/matmul.hpp>
#include <edgellm/model/llama.hpp>

#include "test_util.hpp"

using namespace edgellm_test;

using namespace edgellm;

namespace {

// F32 KV. The reference is one dot / axpy per (head, position); forward multiplies a tile of query
// rows by each block with the small GEMM (scale folded into q, other summation order): measured
// <= 1.7e-5 on stories260K under qemu (logits of magnitude ~10), 9e-6 on x86.
constexpr float kMaxPagedVsContiguous = 1e-4f;
constexpr float kMaxForkVsIndependent = 1e-5f;
constexpr float kMaxBatchedSeqVsAlone = 1e-4f;  // GEMM over N rows vs GEMV (as test_llama's batch check)


std::shared_ptr<const LlamaModel> load_or_skip(const std::string& name) {
  const std::string path = kData + "/models/" + name + ".gguf";
  if (!path_exists(path)) return nullptr;
  return LlamaModel::load(path);
}

std::vector<int32_t> some_tokens(int n, int n_vocab) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(i == 0 ? 1 : static_cast<int32_t>((i * 7919 + 13) % n_vocab));
  return t;
}

// Contiguous reference: K/V of each layer in one [n_tokens][kv_dim] array, one token at a time,
// naive attention loops with the same float kernels. Returns one logits row per token.
std::vector<std::vector<float>> contiguous_forward(const LlamaModel& m, const std::vector<int32_t>& toks) {
  const LlamaConfig& c = m.config();
  const LlamaWeights& w = m.weights();
  const FloatKernels& f = m.kernel_table().f;
  const int D = c.n_embd, QD = c.q_dim(), KVD = c.kv_dim(), hd = c.head_dim;
  std::vector<std::vector<float>> K(static_cast<size_t>(c.n_layer)), V(static_cast<size_t>(c.n_layer));
  std::vector<float> x(D), xn(std::max(D, QD)), tmp(D), q(QD), k(KVD), v(KVD), att(QD), gate(c.n_ff), up(c.n_ff),
      cs(c.n_rot), scores(toks.size()), logits(c.n_vocab);
  std::vector<std::vector<float>> out;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  auto mm = [&](const MatmulWeight& wt, const float* in, float* o) { matmul(m.kernel_table(), nullptr, wt, in, 1, o); };
  for (size_t p = 0; p < toks.size(); ++p) {
    w.embed(toks[p], x.data());
    const float theta_scale = std::pow(c.rope_freq_base, -2.0f / static_cast<float>(c.n_rot));
    float theta = static_cast<float>(p);
    for (int i = 0; i < c.n_rot / 2; ++i) {
      const float ff = w.rope_freqs.empty() ? 1.0f : w.rope_freqs[static_cast<size_t>(i)];
      const float t = c.rope_freq_scale * (theta / ff);
      cs[2 * i] = std::cos(t);
      cs[2 * i + 1] = std::sin(t);
      theta *= theta_scale;
    }
    for (int l = 0; l < c.n_layer; ++l) {
      const LlamaLayerWeights& L = w.layers[static_cast<size_t>(l)];
      f.rmsnorm(xn.data(), x.data(), L.attn_norm.data(), D, c.rms_eps);
      mm(L.wq, xn.data(), q.data());
      mm(L.wk, xn.data(), k.data());
      mm(L.wv, xn.data(), v.data());
      f.rope(q.data(), c.n_head, hd, c.n_rot, cs.data());
      f.rope(k.data(), c.n_head_kv, hd, c.n_rot, cs.data());
      auto& Kl = K[static_cast<size_t>(l)];
      auto& Vl = V[static_cast<size_t>(l)];
      Kl.insert(Kl.end(), k.begin(), k.end());
      Vl.insert(Vl.end(), v.begin(), v.end());
      const int n_pos = static_cast<int>(p) + 1;
      for (int h = 0; h < c.n_head; ++h) {
        const int kvh = h / c.n_gqa();
        const float* qh = q.data() + h * hd;
        for (int j = 0; j < n_pos; ++j) {  // scores = K q (plain loops: this is the reference)
          const float* kj = Kl.data() + static_cast<size_t>(j) * KVD + kvh * hd;
          float s = 0.0f;
          for (int i = 0; i < hd; ++i) s += kj[i] * qh[i];
          scores[static_cast<size_t>(j)] = s * scale;
        }
        f.softmax(scores.data(), n_pos);
        float* o = att.data() + h * hd;
        std::fill_n(o, hd, 0.0f);
        for (int j = 0; j < n_pos; ++j) {  // o = V^T p
          const float* vj = Vl.data() + static_cast<size_t>(j) * KVD + kvh * hd;
          for (int i = 0; i < hd; ++i) o[i] += scores[static_cast<size_t>(j)] * vj[i];
        }
      }
      mm(L.wo, att.data(), tmp.data());
      for (int i = 0; i < D; ++i) x[i] += tmp[i];
      f.rmsnorm(xn.data(), x.data(), L.ffn_norm.data(), D, c.rms_eps);
      mm(L.w_gate, xn.data(), gate.data());
      mm(L.w_up, xn.data(), up.data());
      f.silu_mul(gate.data(), up.data(), c.n_ff);
      mm(L.w_down, gate.data(), tmp.data());
      for (int i = 0; i < D; ++i) x[i] += tmp[i];
    }
    f.rmsnorm(xn.data(), x.data(), w.output_norm.data(), D, c.rms_eps);
    mm(w.output, xn.data(), logits.data());
    out.push_back(logits);
  }
  return out;
}

float max_abs_diff(const float* a, const float* b, int n) {
  float m = 0;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Feeds toks[from, to) to sequence s one token at a time; returns the logits rows.
std::vector<std::vector<float>> feed(const LlamaModel& m, LlamaContext& ctx, PagedKvCache& kv, int s,
                                     const std::vector<int32_t>& toks, size_t from, size_t to) {
  std::vector<std::vector<float>> rows;
  Batch b;
  for (size_t i = from; i < to; ++i) {
    b.clear();
    b.add(toks[i], kv.n_tokens(s), s, true);
    m.forward(ctx, kv, b);
    rows.emplace_back(ctx.logits(0), ctx.logits(0) + m.config().n_vocab);
  }
  return rows;
}

}  // namespace

TEST_CASE("paged attention equals the contiguous reference (F32 KV, block sizes 1, 16, 32)") {
  for (const std::string name : {"stories260K", "tiny-llama-256-f32"}) {
    CAPTURE(name);
    const auto model = load_or_skip(name);
    if (!model) EDGELLM_SKIP("no shared data at ", kData);
    const int n_vocab = model->config().n_vocab, n = 150;
    const auto toks = some_tokens(n, n_vocab);
    const auto ref = contiguous_forward(*model, toks);
    for (int bs : {1, 16, 32}) {
      CAPTURE(bs);
      ThreadPool pool(2);  // attention split over heads (once: 2 busy threads are slow on a shared machine)
      LlamaContext ctx(bs == 16 ? &pool : nullptr);
      PagedKvCache kv(model->kv_params(n, bs));
      const int s = kv.create_sequence();
      const auto rows = feed(*model, ctx, kv, s, toks, 0, toks.size());
      CHECK(kv.block_table(s).size() == static_cast<size_t>((n + bs - 1) / bs));
      float worst = 0;
      for (int i = 0; i < n; ++i) worst = std::max(worst, max_abs_diff(rows[static_cast<size_t>(i)].data(), ref[static_cast<size_t>(i)].data(), n_vocab));
      MESSAGE(name, " block size ", bs, ": max |paged - contiguous| = ", worst);
      CHECK(worst <= kMaxPagedVsContiguous);
    }
  }
}

TEST_CASE("fork then continue equals an independent run, and the prefix blocks are shared") {
  const auto model = load_or_skip("tiny-llama-256-f32");
  if (!model) EDGELLM_SKIP("no shared data at ", kData);
  const int n_vocab = model->config().n_vocab;
  const auto toks = some_tokens(70, n_vocab);
  const size_t prefix = 40;  // 2 full blocks of 16 + 8
  LlamaContext ctx;
  PagedKvCache kv(model->kv_params(128, 16));
  const int parent = kv.create_sequence();
  Batch b;
  for (size_t i = 0; i < prefix; ++i) b.add(toks[i], static_cast<int32_t>(i), parent, i + 1 == prefix);
  model->forward(ctx, kv, b);
  const int child = kv.fork(parent);
  CHECK(kv.blocks_used() == 3);
  const auto rows = feed(*model, ctx, kv, child, toks, prefix, toks.size());
  // The child copied the partly-filled block and added one; the two full prefix blocks are shared.
  int shared = 0;
  for (size_t i = 0; i < kv.block_table(child).size(); ++i) shared += kv.block_refs(kv.block_table(child)[i]) == 2;
  CHECK(shared == 2);
  CHECK(kv.blocks_used() == 3 + 3);  // parent: 3; child: copy of block 2, blocks 3 and 4
  CHECK(kv.n_tokens(parent) == static_cast<int>(prefix));

  PagedKvCache alone(model->kv_params(128, 16));
  const int s = alone.create_sequence();
  b.clear();
  for (size_t i = 0; i < prefix; ++i) b.add(toks[i], static_cast<int32_t>(i), s, false);
  model->forward(ctx, alone, b);
  const auto want = feed(*model, ctx, alone, s, toks, prefix, toks.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(max_abs_diff(rows[i].data(), want[i].data(), n_vocab) <= kMaxForkVsIndependent);
}

TEST_CASE("several sequences in one batch give the logits each gives alone") {
  const auto model = load_or_skip("stories260K");
  if (!model) EDGELLM_SKIP("no shared data at ", kData);
  const int n_vocab = model->config().n_vocab, n_seq = 4, steps = 20;
  const auto toks = some_tokens(24, n_vocab);
  LlamaContext ctx;
  PagedKvCache kv(model->kv_params(64, 16));
  const int root = kv.create_sequence();
  Batch b;
  for (size_t i = 0; i < toks.size(); ++i) b.add(toks[i], static_cast<int32_t>(i), root, false);
  model->forward(ctx, kv, b);
  std::vector<int> seqs;
  for (int i = 0; i < n_seq; ++i) seqs.push_back(kv.fork(root));
  std::vector<std::vector<float>> together;  // [step * n_seq + i]
  for (int st = 0; st < steps; ++st) {
    b.clear();
    for (int i = 0; i < n_seq; ++i) b.add((st * 31 + i * 101) % n_vocab, kv.n_tokens(seqs[static_cast<size_t>(i)]), seqs[static_cast<size_t>(i)], true);
    model->forward(ctx, kv, b);
    for (int i = 0; i < n_seq; ++i) together.emplace_back(ctx.logits(i), ctx.logits(i) + n_vocab);
  }
  for (int i = 0; i < n_seq; ++i) {
    PagedKvCache one(model->kv_params(64, 16));
    const int s = one.create_sequence();
    std::vector<int32_t> mine = toks;
    for (int st = 0; st < steps; ++st) mine.push_back((st * 31 + i * 101) % n_vocab);
    b.clear();
    for (size_t j = 0; j < toks.size(); ++j) b.add(toks[j], static_cast<int32_t>(j), s, false);
    model->forward(ctx, one, b);
    const auto rows = feed(*model, ctx, one, s, mine, toks.size(), mine.size());
    for (int st = 0; st < steps; ++st)
      CHECK(max_abs_diff(rows[static_cast<size_t>(st)].data(), together[static_cast<size_t>(st * n_seq + i)].data(), n_vocab) <= kMaxBatchedSeqVsAlone);
  }
}

TEST_CASE("session: eviction generates past the context in fixed memory (short version of the 40k run)") {
  const auto model = load_or_skip("stories260K");
  if (!model) EDGELLM_SKIP("no shared data at ", kData);
  auto tok = std::make_shared<const Tokenizer>(Vocab::from_gguf(model->file()));
  struct Case {
    int block, keep, window;
    DType type;
  };
  for (const Case c : {Case{16, 4, 24, DType::F32}, Case{1, 0, 1, DType::F32}, Case{7, 5, 30, DType::F16}, Case{32, 40, 8, DType::F32}}) {
    CAPTURE(c.block);
    CAPTURE(c.keep);
    CAPTURE(c.window);
    SessionParams sp;
    sp.n_ctx = 128;
    sp.n_threads = 1;
    sp.kv_block_size = c.block;
    sp.kv_type = c.type;
    sp.n_keep = c.keep;
    sp.n_window = c.window;
    Session session(model, tok, sp);
    GenerateParams gp;
    gp.max_tokens = 600;
    gp.ignore_eos = true;
    gp.sampler.temperature = 0.8f;
    gp.sampler.seed = 3;
    const auto r = session.generate("Once upon a time", gp);
    CHECK(r.tokens.size() == 600);
    CHECK(r.reason == StopReason::MaxTokens);
    CHECK(session.n_evicted() > 0);
    CHECK(session.n_past() <= sp.n_ctx);
    CHECK(session.n_past() >= c.window);
    // Fixed memory: never more blocks than the context needs (+1 for a block boundary).
    CHECK(session.kv_cache().blocks_allocated() <= (sp.n_ctx + c.block - 1) / c.block + 1);
    CHECK(r.text.size() > 600);
  }
  // A prompt that fits the context but not next to the history: evaluated in chunks with eviction.
  SessionParams sp;
  sp.n_ctx = 96;
  sp.n_threads = 1;
  sp.n_keep = 4;
  sp.n_window = 16;
  Session chunked(model, tok, sp);
  GenerateParams gp;
  gp.max_tokens = 70;
  gp.ignore_eos = true;
  chunked.generate("Once upon a time", gp);
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += " the cat sat";  // ~60 tokens: more than n_ctx - 47 kept
  const auto r = chunked.generate(prompt, gp);
  CHECK(r.n_prompt > 50);
  CHECK(r.tokens.size() == 70);
  CHECK(chunked.n_past() <= sp.n_ctx);
  SessionParams bad;
  bad.n_ctx = 64;
  bad.n_keep = 40;
  bad.n_window = 30;
  CHECK_THROWS_AS(Session(model, tok, bad), Error);  // keep + window leave no room in the context
}

TEST_CASE("session: prompt longer than the context, context full and budget exhausted without eviction") {
  const auto model = load_or_skip("stories260K");
  if (!model) EDGELLM_SKIP("no shared data at ", kData);
  auto tok = std::make_shared<const Tokenizer>(Vocab::from_gguf(model->file()));
  SessionParams sp;
  sp.n_ctx = 16;
  sp.n_threads = 1;
  Session s(model, tok, sp);
  std::string long_prompt;
  for (int i = 0; i < 20; ++i) long_prompt += " the cat";
  try {
    s.generate(long_prompt, GenerateParams{});
    FAIL("no Error for a prompt longer than the context");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("longer than the context") != std::string::npos);
  }
  CHECK(s.n_past() == 0);
  GenerateParams gp;
  gp.max_tokens = 100;
  gp.ignore_eos = true;
  CHECK(s.generate("Once", gp).reason == StopReason::ContextFull);

  SessionParams bp;
  bp.n_ctx = 1024;
  bp.n_threads = 1;
  bp.kv_block_size = 16;
  bp.kv_max_bytes = 2 * PagedKvCache(model->kv_params(1024, 16)).block_bytes();
  Session budget(model, tok, bp);
  try {
    budget.generate("Once", gp);
    FAIL("no Error when the KV budget is exhausted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("budget") != std::string::npos);
    CHECK(std::string(e.what()).find("no eviction") != std::string::npos);
  }
  CHECK(budget.n_past() == 32);  // everything that fitted is kept
  bp.n_keep = 4;
  bp.n_window = 8;
  bp.kv_max_bytes *= 2;  // 4 blocks: the sink block, the window's blocks and room to grow
  Session evicting(model, tok, bp);
  CHECK(evicting.generate("Once", gp).tokens.size() == 100);  // eviction makes room within the budget
  CHECK(evicting.n_evicted() > 0);
  CHECK(evicting.kv_cache().blocks_allocated() <= 4);
}

TEST_CASE("session: --parallel continuations share the prompt blocks and match single runs when greedy") {
  const auto model = load_or_skip("stories260K");
  if (!model) EDGELLM_SKIP("no shared data at ", kData);
  auto tok = std::make_shared<const Tokenizer>(Vocab::from_gguf(model->file()));
  SessionParams sp;
  sp.n_ctx = 256;
  sp.n_threads = 1;
  GenerateParams gp;
  gp.max_tokens = 40;
  gp.sampler.temperature = 0.0f;
  const std::string prompt = "Once upon a time, there was a little dog named Max. Max liked to";
  Session single(model, tok, sp);
  const auto want = single.generate(prompt, gp);
  Session par(model, tok, sp);
  const auto got = par.generate_parallel(prompt, 3, gp);
  REQUIRE(got.size() == 3);
  for (const auto& r : got) CHECK(r.text == want.text);
  CHECK(par.kv_cache().n_sequences() == 1);  // the continuations' sequences are gone
  CHECK(par.kv_cache().blocks_used() == (par.n_past() + 15) / 16);

  gp.sampler.temperature = 1.0f;
  gp.sampler.seed = 11;
  Session par2(model, tok, sp);
  int max_blocks_seen = 0;
  std::vector<std::string> streamed(4);
  const auto diff = par2.generate_parallel(prompt, 4, gp, [&](int i, const std::string& piece) {
    max_blocks_seen = std::max(max_blocks_seen, par2.kv_cache().blocks_used());
    streamed.at(static_cast<size_t>(i)) += piece;
    return true;
  });
  CHECK((diff[0].text != diff[1].text || diff[1].text != diff[2].text || diff[2].text != diff[3].text));
  for (size_t i = 0; i < diff.size(); ++i) {
    CHECK(streamed[i] == diff[i].text);  // each continuation's pieces reach on_text under its own index
    GenerateParams one = gp;
    one.sampler.seed = gp.sampler.seed + i;  // continuation i samples as a single run with seed + i
    CHECK(Session(model, tok, sp).generate(prompt, one).text == diff[i].text);
  }
  // Shared prompt blocks: 4 sequences of prompt + 40 tokens need fewer blocks than 4 separate copies.
  const int n_prompt = diff[0].n_prompt;
  CHECK(max_blocks_seen < 4 * ((n_prompt + 40 + 15) / 16));
}
