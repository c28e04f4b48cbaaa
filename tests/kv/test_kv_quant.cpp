// F16 and Q8_0 KV storage against F32 KV on the shared models: top-1 agreement and mean
// KL-divergence of the logits over a prompt plus its greedy continuation (the figures in
// docs/PERF.md "KV cache" come from this test's MESSAGE lines).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <edgellm/model/llama.hpp>
#include <edgellm/text/tokenizer.hpp>

#include "test_util.hpp"

using namespace edgellm_test;

using namespace edgellm;

namespace {

constexpr double kMinTop1F16 = 0.95;   // fraction of positions whose argmax equals F32 KV's
constexpr double kMaxKlF16 = 1e-3;     // mean KL(P_f32 || P_f16) in nats
constexpr double kMinTop1Q8 = 0.90;
constexpr double kMaxKlQ8 = 1e-2;


// Logits rows of `toks` fed one at a time (after a prefill of the first n_prefill as one batch).
std::vector<std::vector<float>> run(const LlamaModel& m, const std::vector<int32_t>& toks, DType type, int recent) {
  const int n = static_cast<int>(toks.size()), n_prefill = 16;
  PagedKvCache kv(m.kv_params(n, 16, 0, type, recent));
  const int s = kv.create_sequence();
  LlamaContext ctx;
  std::vector<std::vector<float>> rows;
  Batch b;
  for (int i = 0; i < n_prefill; ++i) b.add(toks[static_cast<size_t>(i)], i, s, true);
  m.forward(ctx, kv, b);
  for (int i = 0; i < n_prefill; ++i) rows.emplace_back(ctx.logits(i), ctx.logits(i) + m.config().n_vocab);
  for (int i = n_prefill; i < n; ++i) {
    b.clear();
    b.add(toks[static_cast<size_t>(i)], i, s, true);
    m.forward(ctx, kv, b);
    rows.emplace_back(ctx.logits(0), ctx.logits(0) + m.config().n_vocab);
  }
  return rows;
}

std::vector<double> softmax_f64(const std::vector<float>& x) {
  const float mx = *std::max_element(x.begin(), x.end());
  std::vector<double> p(x.size());
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) sum += p[i] = std::exp(static_cast<double>(x[i] - mx));
  for (double& v : p) v /= sum;
  return p;
}

struct Agreement {
  double top1 = 0, mean_kl = 0, max_kl = 0;
};

Agreement compare(const std::vector<std::vector<float>>& base, const std::vector<std::vector<float>>& test) {
  Agreement a;
  for (size_t r = 0; r < base.size(); ++r) {
    const auto p = softmax_f64(base[r]), q = softmax_f64(test[r]);
    double kl = 0;
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] > 0) kl += p[i] * (std::log(p[i]) - std::log(std::max(q[i], 1e-300)));
    a.mean_kl += kl;
    a.max_kl = std::max(a.max_kl, kl);
    const auto am = [](const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
    a.top1 += am(base[r]) == am(test[r]);
  }
  a.mean_kl /= static_cast<double>(base.size());
  a.top1 /= static_cast<double>(base.size());
  return a;
}

}  // namespace

TEST_CASE("F16 and Q8_0 KV vs F32 KV: top-1 agreement and mean KL-divergence") {
  const char* names[] = {"stories260K", "tiny-llama-256-f32", "tiny-llama-256-Q8_0", "tiny-llama-256-Q4_K_M"};
  for (const std::string name : names) {
    CAPTURE(name);
    const std::string path = kData + "/models/" + name + ".gguf";
    if (!path_exists(path)) {
      EDGELLM_SKIP_PART("no shared data for ", name);
      continue;
    }
    const auto model = LlamaModel::load(path);
    const Tokenizer tok(Vocab::from_gguf(model->file()));
    // A prompt and its greedy continuation under F32 KV: 16 + 240 tokens, 16 KV blocks.
    std::vector<int32_t> toks = tok.encode("Once upon a time, there was a little girl named Lily. She", tok.add_bos(), true);
    toks.resize(16, toks.back());
    {
      PagedKvCache kv(model->kv_params(256));
      const int s = kv.create_sequence();
      LlamaContext ctx;
      Batch b;
      for (size_t i = 0; i < toks.size(); ++i) b.add(toks[i], static_cast<int32_t>(i), s, i + 1 == toks.size());
      model->forward(ctx, kv, b);
      while (toks.size() < 256) {
        const float* l = ctx.logits(0);
        toks.push_back(static_cast<int32_t>(std::max_element(l, l + model->config().n_vocab) - l));
        if (toks.size() == 256) break;
        b.clear();
        b.add(toks.back(), static_cast<int32_t>(toks.size() - 1), s, true);
        model->forward(ctx, kv, b);
      }
    }
    const auto base = run(*model, toks, DType::F32, 0);
    struct Variant {
      DType type;
      int recent;
      double min_top1, max_kl;
    };
    for (const Variant v : {Variant{DType::F16, 0, kMinTop1F16, kMaxKlF16}, Variant{DType::Q8_0, 0, kMinTop1Q8, kMaxKlQ8},
                            Variant{DType::Q8_0, 32, kMinTop1Q8, kMaxKlQ8}}) {
      const std::string label = std::string(dtype_name(v.type)) + (v.recent ? " + last 32 in f32" : "");
      CAPTURE(label);
      if (v.type == DType::Q8_0 && model->config().head_dim % 32 != 0) {
        CHECK_THROWS_AS(run(*model, toks, v.type, v.recent), Error);  // head_dim 8: no q8_0 rows
        MESSAGE(name, " ", label, ": not available (head_dim ", model->config().head_dim, ")");
        continue;
      }
      const Agreement a = compare(base, run(*model, toks, v.type, v.recent));
      char line[200];
      std::snprintf(line, sizeof line, "%s KV %s: top-1 agreement %.4f, mean KL %.3g, max KL %.3g over %zu positions",
                    name.c_str(), label.c_str(), a.top1, a.mean_kl, a.max_kl, toks.size());
      MESSAGE(line);
      CHECK(a.top1 >= v.min_top1);
      CHECK(a.mean_kl <= v.max_kl);
    }
  }
}
