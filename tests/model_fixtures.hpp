// For tests that compare two loads of one model (repacked or not, streamed or not, renamed) bit
// for bit: the logits of a prompt and decode steps, and the load options of a memory budget.
#pragma once
#include <cstdint>
#include <vector>

#include <edgellm/model/llama.hpp>

namespace edgellm_test {

// toks[0, n_prompt) in one batch (every row's logits), then toks[n_prompt ..] one per pass.
inline std::vector<float> prompt_and_steps_logits(const edgellm::LlamaModel& m, const std::vector<int32_t>& toks, int n_prompt,
                                                  int n_ctx) {
  edgellm::PagedKvCache kv(m.kv_params(n_ctx));
  const int s = kv.create_sequence();
  edgellm::LlamaContext ctx;
  edgellm::Batch b;
  std::vector<float> out;
  const size_t nv = size_t(m.config().n_vocab);
  for (int i = 0; i < n_prompt; ++i) b.add(toks[size_t(i)], i, s, true);
  m.forward(ctx, kv, b);
  for (int i = 0; i < n_prompt; ++i) out.insert(out.end(), ctx.logits(i), ctx.logits(i) + nv);
  for (int i = n_prompt; i < int(toks.size()); ++i) {
    b.clear();
    b.add(toks[size_t(i)], i, s, true);
    m.forward(ctx, kv, b);
    out.insert(out.end(), ctx.logits(0), ctx.logits(0) + nv);
  }
  return out;
}

// A load under `budget` bytes planned for a run of n_ctx tokens (one batch of up to n_ctx) on n_threads.
inline edgellm::LoadOptions budget_options(uint64_t budget, int n_ctx, int n_threads) {
  edgellm::LoadOptions o;
  o.mem_budget = budget;
  o.plan.n_ctx = n_ctx;
  o.plan.n_batch = n_ctx;
  o.plan.n_threads = n_threads;
  return o;
}

}  // namespace edgellm_test
