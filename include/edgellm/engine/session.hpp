// Session: one conversation on a loaded model — tokenize, prefill in chunks of n_batch, decode
// loop, sampler, streaming callback — with stop rules (EOS/EOT, stop strings, max_tokens,
// wall-clock deadline, cancellation) and timing/memory stats. The model is shared read-only;
// each Session owns its KV sequence, scratch and thread pool.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/kv/paged_kv_cache.hpp"
#include "edgellm/model/llama.hpp"
#include "edgellm/runtime/memory_stats.hpp"
#include "edgellm/runtime/thread_pool.hpp"
#include "edgellm/runtime/timer.hpp"
#include "edgellm/text/sampler.hpp"
#include "edgellm/text/tokenizer.hpp"

namespace edgellm {

struct SessionParams {
  int n_ctx = 2048;          // maximum tokens held (memory follows the tokens actually held)
  int n_batch = 512;         // prompt tokens per forward pass
  int n_threads = 0;         // 0: default_thread_count()
  int kv_block_size = 16;    // tokens per KV block
  size_t kv_max_bytes = 0;   // KV budget; 0: none beyond n_ctx
};

struct GenerateParams {
  int max_tokens = 128;            // tokens to generate at most (< 0: until another rule stops)
  SamplerParams sampler;           // temperature 0 = greedy
  std::vector<std::string> stop;   // stop strings (not included in the output)
  double deadline_ms = 0;          // wall-clock budget for the whole call (0 = none)
  bool ignore_eos = false;         // keep going past end-of-generation tokens
  bool add_bos = true;             // prepend BOS when the vocabulary uses one (first call only)
  bool parse_special = true;       // match control tokens written in the prompt text
};

enum class StopReason { None, EndOfGeneration, StopString, MaxTokens, Deadline, ContextFull, Cancelled };

inline const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::None: return "none";
    case StopReason::EndOfGeneration: return "eos";
    case StopReason::StopString: return "stop string";
    case StopReason::MaxTokens: return "max tokens";
    case StopReason::Deadline: return "deadline";
    case StopReason::ContextFull: return "context full";
    case StopReason::Cancelled: return "cancelled";
  }
  return "?";
}

struct GenerateResult {
  std::string text;                 // the continuation (stop string removed)
  std::vector<int32_t> tokens;      // generated tokens
  StopReason reason = StopReason::None;
  int n_prompt = 0;                 // prompt tokens evaluated by this call
  double ttft_ms = 0;               // call start -> first generated token sampled
  double prefill_ms = 0;
  double decode_ms = 0;             // after the first token
  std::vector<double> token_ms;     // latency of each decoded token after the first
  uint64_t peak_rss_bytes = 0;
  double prefill_tps() const { return prefill_ms > 0 ? n_prompt * 1e3 / prefill_ms : 0; }
  double decode_tps() const { return decode_ms > 0 ? token_ms.size() * 1e3 / decode_ms : 0; }
};

class Session {
 public:
  Session(std::shared_ptr<const LlamaModel> model, std::shared_ptr<const Tokenizer> tok, const SessionParams& p = {})
      : model_(std::move(model)), tok_(std::move(tok)), p_(p),
        pool_(p.n_threads > 0 ? p.n_threads : default_thread_count()),
        kv_(model_->kv_params(p.n_ctx, p.kv_block_size, p.kv_max_bytes)), ctx_(&pool_) {
    EDGELLM_CHECK(p.n_ctx >= 1, "session: n_ctx must be >= 1, got ", p.n_ctx);
    EDGELLM_CHECK(p.n_batch >= 1, "session: n_batch must be >= 1, got ", p.n_batch);
    seq_ = kv_.create_sequence();
  }

  const LlamaModel& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tok_; }
  PagedKvCache& kv_cache() { return kv_; }
  int n_past() const { return kv_.n_tokens(seq_); }
  const std::vector<int32_t>& history() const { return history_; }
  ThreadPool& pool() { return pool_; }

  // Forgets the conversation (blocks return to the pool).
  void reset() {
    kv_.truncate(seq_, 0);
    history_.clear();
  }
  // Asks a running generate() (on another thread) to stop before its next token.
  void cancel() { cancel_.store(true); }

  // Evaluates tokens after the current history; returns the logits of the last one.
  // Throws Error (and keeps the session as it was) when they do not fit the context.
  const float* eval(const std::vector<int32_t>& tokens, const std::function<bool()>& keep_going = {}) {
    EDGELLM_CHECK(!tokens.empty(), "session: nothing to evaluate");
    const int start = n_past();
    if (start + static_cast<int64_t>(tokens.size()) > p_.n_ctx)
      throw_error("prompt of ", tokens.size(), " tokens does not fit the context: ", start, " tokens held, n_ctx = ", p_.n_ctx);
    Batch b;
    for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(p_.n_batch)) {
      const size_t end = std::min(tokens.size(), i + static_cast<size_t>(p_.n_batch));
      b.clear();
      for (size_t j = i; j < end; ++j)
        b.add(tokens[j], static_cast<int32_t>(start + j), seq_, j + 1 == tokens.size());
      try {
        model_->forward(ctx_, kv_, b);
      } catch (...) {
        kv_.truncate(seq_, start);
        history_.resize(static_cast<size_t>(start));
        throw;
      }
      history_.insert(history_.end(), tokens.begin() + static_cast<std::ptrdiff_t>(i), tokens.begin() + static_cast<std::ptrdiff_t>(end));
      if (end < tokens.size() && keep_going && !keep_going()) return nullptr;
    }
    return ctx_.logits(0);
  }

  // Generates a continuation of `prompt`; on_text receives each piece of valid UTF-8 as it is
  // produced and may return false to stop.
  GenerateResult generate(const std::string& prompt, const GenerateParams& gp,
                          const std::function<bool(const std::string&)>& on_text = {}) {
    cancel_.store(false);
    GenerateResult r;
    Timer clock;
    const bool use_bos = gp.add_bos && history_.empty() && tok_->add_bos();
    std::vector<int32_t> toks = tok_->encode(prompt, use_bos, gp.parse_special);
    if (toks.empty()) {
      EDGELLM_CHECK(!history_.empty(), "generate: the prompt is empty and there is no history to continue");
    }
    auto over_deadline = [&](double extra_ms) { return gp.deadline_ms > 0 && clock.ms() + extra_ms > gp.deadline_ms; };
    r.n_prompt = static_cast<int>(toks.size());
    const float* logits = nullptr;
    if (!toks.empty()) {
      logits = eval(toks, [&] { return !cancel_.load() && !over_deadline(0); });
      if (!logits) {
        r.reason = cancel_.load() ? StopReason::Cancelled : StopReason::Deadline;
        r.prefill_ms = clock.ms();
        r.peak_rss_bytes = peak_rss_bytes();
        return r;
      }
    } else {
      logits = last_logits();
    }
    r.prefill_ms = clock.ms();

    Sampler sampler(gp.sampler);
    for (int32_t t : history_) sampler.accept(t);
    StreamDecoder decoder(*tok_);
    StopMatcher stops(gp.stop);
    const int n_vocab = model_->config().n_vocab;
    double worst_token_ms = 0;
    Timer tok_clock;
    for (int i = 0;; ++i) {
      if (gp.max_tokens >= 0 && i >= gp.max_tokens) { r.reason = StopReason::MaxTokens; break; }
      if (cancel_.load()) { r.reason = StopReason::Cancelled; break; }
      const int32_t id = sampler.sample(logits, n_vocab);
      if (i == 0) r.ttft_ms = clock.ms();
      sampler.accept(id);
      if (!gp.ignore_eos && tok_->is_eog(id)) { r.reason = StopReason::EndOfGeneration; break; }
      r.tokens.push_back(id);
      std::string piece = stops.push(decoder.push(id));
      r.text += piece;
      if (!piece.empty() && on_text && !on_text(piece)) { r.reason = StopReason::Cancelled; break; }
      if (stops.matched()) { r.reason = StopReason::StopString; break; }
      if (gp.max_tokens >= 0 && i + 1 >= gp.max_tokens) { r.reason = StopReason::MaxTokens; break; }
      if (n_past() >= p_.n_ctx) { r.reason = StopReason::ContextFull; break; }
      // Budget-aware: stop when the next token would likely end past the deadline.
      if (over_deadline(worst_token_ms)) { r.reason = StopReason::Deadline; break; }
      tok_clock = Timer();
      logits = eval({id});
      const double dt = tok_clock.ms();
      r.token_ms.push_back(dt);
      r.decode_ms += dt;
      worst_token_ms = std::max(worst_token_ms * 0.9, dt);  // recent worst case, slowly forgetting
    }
    std::string tail = stops.matched() ? std::string() : stops.push(decoder.flush()) + stops.flush();
    r.text += tail;
    if (!tail.empty() && on_text) on_text(tail);
    r.peak_rss_bytes = peak_rss_bytes();
    return r;
  }

 private:
  // Holds back text that may be the start of a stop string; reports a full match.
  class StopMatcher {
   public:
    explicit StopMatcher(const std::vector<std::string>& stops) : stops_(stops) {}
    std::string push(const std::string& text) {
      if (matched_) return {};
      pending_ += text;
      for (const auto& s : stops_) {
        if (s.empty()) continue;
        const size_t at = pending_.find(s);
        if (at != std::string::npos) {
          matched_ = true;
          std::string out = pending_.substr(0, at);
          pending_.clear();
          return out;
        }
      }
      size_t keep = 0;  // longest suffix of pending_ that is a proper prefix of a stop string
      for (const auto& s : stops_)
        for (size_t k = std::min(s.size() - (s.empty() ? 0 : 1), pending_.size()); k > keep; --k)
          if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
            keep = k;
            break;
          }
      std::string out = pending_.substr(0, pending_.size() - keep);
      pending_.erase(0, pending_.size() - keep);
      return out;
    }
    std::string flush() {
      std::string out;
      out.swap(pending_);
      return out;
    }
    bool matched() const { return matched_; }

   private:
    std::vector<std::string> stops_;
    std::string pending_;
    bool matched_ = false;
  };

  const float* last_logits() {
    EDGELLM_CHECK(!history_.empty(), "session: no logits yet");
    // Re-evaluate the last token to get its logits (after a previous generate() ended).
    const int32_t last = history_.back();
    kv_.truncate(seq_, n_past() - 1);
    history_.pop_back();
    return eval({last});
  }

  std::shared_ptr<const LlamaModel> model_;
  std::shared_ptr<const Tokenizer> tok_;
  SessionParams p_;
  ThreadPool pool_;
  PagedKvCache kv_;
  LlamaContext ctx_;
  int seq_ = 0;
  std::vector<int32_t> history_;
  std::atomic<bool> cancel_{false};
};

}  // namespace edgellm
