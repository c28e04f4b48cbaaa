// Session: one conversation on a loaded model — tokenize, prefill in chunks of n_batch, decode
// loop, sampler, streaming callback — with stop rules (EOS/EOT, stop strings, max_tokens,
// wall-clock deadline, cancellation), "sinks + window" eviction for endless generation, N
// continuations of one prompt decoded in one batch, and timing/memory stats. The model is shared
// read-only; each Session owns its KV cache, scratch and thread pool.
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
  DType kv_type = DType::F32;  // KV storage: F32, F16 or Q8_0
  int kv_recent_f32 = 0;     // with F16/Q8_0: the last N positions also kept in F32
  int n_keep = 0;            // eviction: first tokens always kept (attention sinks)
  int n_window = 0;          // eviction: recent tokens kept; 0 = no eviction (full context is an error)
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

// Applies the stop rules to a sampled token of one continuation (step = tokens sampled before,
// n_held = its sequence's tokens in the cache, n_ctx = 0 when eviction makes room); records it and
// emits its text through emit(piece) -> bool (false: the consumer cancels). Returns whether the
// continuation goes on. Shared by Session and BatchScheduler.
template <class Emit>
bool take_token(GenerateResult& r, const Tokenizer& tok, StreamDecoder& decoder, StopMatcher& stops,
                const GenerateParams& gp, int32_t id, int step, int n_held, int n_ctx, bool cancelled, Emit&& emit) {
  if (cancelled) { r.reason = StopReason::Cancelled; return false; }
  if (!gp.ignore_eos && tok.is_eog(id)) { r.reason = StopReason::EndOfGeneration; return false; }
  r.tokens.push_back(id);
  const std::string piece = stops.push(decoder.push(id));
  r.text += piece;
  if (!emit(piece)) { r.reason = StopReason::Cancelled; return false; }
  if (stops.matched()) { r.reason = StopReason::StopString; return false; }
  if (gp.max_tokens >= 0 && step + 1 >= gp.max_tokens) { r.reason = StopReason::MaxTokens; return false; }
  if (n_ctx > 0 && n_held >= n_ctx) { r.reason = StopReason::ContextFull; return false; }
  return true;
}

// The text a finished continuation still holds back (an incomplete UTF-8 tail, a partial stop
// string), unless a stop string ended it.
inline std::string finish_text(StreamDecoder& decoder, StopMatcher& stops) {
  return stops.matched() ? std::string() : stops.push(decoder.flush()) + stops.flush();
}

class Session {
 public:
  Session(std::shared_ptr<const LlamaModel> model, std::shared_ptr<const Tokenizer> tok, const SessionParams& p = {})
      : model_(std::move(model)), tok_(std::move(tok)), p_(p),
        pool_(p.n_threads > 0 ? p.n_threads : default_thread_count()),
        kv_(model_->kv_params(p.n_ctx, p.kv_block_size, p.kv_max_bytes, p.kv_type, p.kv_recent_f32)), ctx_(&pool_) {
    EDGELLM_CHECK(p.n_ctx >= 1, "session: n_ctx must be >= 1, got ", p.n_ctx);
    EDGELLM_CHECK(p.n_batch >= 1, "session: n_batch must be >= 1, got ", p.n_batch);
    EDGELLM_CHECK(p.n_keep >= 0 && p.n_window >= 0, "session: --keep must be >= 0 and --window >= 1, got ", p.n_keep, " and ", p.n_window);
    if (evicting()) {
      // Worst case kept after an eviction: whole sink blocks + the window rounded out to blocks.
      const int bs = p.kv_block_size;
      const int64_t kept = (p.n_keep + bs - 1) / bs * static_cast<int64_t>(bs) + p.n_window + bs - 1;
      max_chunk_ = static_cast<int>(std::max<int64_t>(1, p.n_ctx - kept));
      if (kept >= p.n_ctx)
        throw_error("session: --keep ", p.n_keep, " and --window ", p.n_window, " with KV blocks of ", bs,
                    " tokens keep up to ", kept, " tokens, which leaves no room in a context of ", p.n_ctx);
    }
    seq_ = kv_.create_sequence();
  }

  const LlamaModel& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tok_; }
  const SessionParams& params() const { return p_; }
  PagedKvCache& kv_cache() { return kv_; }
  int n_past() const { return kv_.n_tokens(seq_); }
  int n_evicted() const { return kv_.n_evicted(seq_); }  // tokens dropped by eviction so far
  const std::vector<int32_t>& history() const { return history_; }
  ThreadPool& pool() { return pool_; }
  bool evicting() const { return p_.n_window > 0; }

  // Forgets the conversation (blocks return to the pool).
  void reset() {
    kv_.truncate(seq_, 0);
    history_.clear();
  }
  // Asks a running generate() (on another thread) to stop before its next token.
  void cancel() { cancel_.store(true); }

  // Evaluates tokens after the current history; returns the logits of the last one. With eviction
  // on, old tokens are dropped as needed; otherwise tokens that do not fit the context (or the KV
  // byte budget) throw Error and the session stays as it was.
  // Rows are computed by count (Batch::n_generated -1): one token decoded, several prefilled.
  const float* eval(const std::vector<int32_t>& tokens, const std::function<bool()>& keep_going = {}) {
    return eval_as(tokens, keep_going, Rows::ByCount);
  }

 private:
  // Which arithmetic evaluates tokens (Batch::n_generated): generate() says prompt or generated,
  // as BatchScheduler does, so a request gets the same numbers alone and batched.
  enum class Rows { ByCount, Prompt, Generated };

  const float* eval_as(const std::vector<int32_t>& tokens, const std::function<bool()>& keep_going, Rows rows) {
    EDGELLM_CHECK(!tokens.empty(), "session: nothing to evaluate");
    if (static_cast<int64_t>(tokens.size()) > p_.n_ctx)
      throw_error("prompt of ", tokens.size(), " tokens is longer than the context (n_ctx = ", p_.n_ctx, ")");
    const int start = n_past();
    if (!evicting() && start + static_cast<int64_t>(tokens.size()) > p_.n_ctx)
      throw_error("prompt of ", tokens.size(), " tokens does not fit the context: ", start, " tokens held, n_ctx = ", p_.n_ctx);
    const size_t hist = history_.size();
    const int evicted = kv_.n_evicted(seq_);
    Batch b;
    // With eviction a chunk is at most what always fits after an eviction.
    const size_t chunk = static_cast<size_t>(evicting() ? std::min(p_.n_batch, max_chunk_) : p_.n_batch);
    for (size_t i = 0; i < tokens.size(); i += chunk) {
      const size_t end = std::min(tokens.size(), i + chunk);
      try {
        make_room(seq_, static_cast<int>(end - i));
        const int pos = n_past();
        b.clear();
        for (size_t j = i; j < end; ++j) b.add(tokens[j], static_cast<int32_t>(pos + (j - i)), seq_, j + 1 == tokens.size());
        b.n_generated = rows == Rows::ByCount ? -1 : rows == Rows::Generated ? b.size() : 0;
        model_->forward(ctx_, kv_, b);
      } catch (...) {
        if (kv_.n_evicted(seq_) == evicted) {  // else the evaluated chunks stay (forward undid its own)
          kv_.truncate(seq_, start);
          history_.resize(hist);
        }
        throw;
      }
      history_.insert(history_.end(), tokens.begin() + static_cast<std::ptrdiff_t>(i), tokens.begin() + static_cast<std::ptrdiff_t>(end));
      if (end < tokens.size() && keep_going && !keep_going()) return nullptr;
    }
    return ctx_.logits(0);
  }

 public:
  // Makes room for n more tokens of sequence s: evicts (sinks + window) when on, else throws Error
  // naming the limit that is reached.
  void make_room(int s, int n) {
    if (kv_.fits(s, n)) return;
    if (evicting()) {
      const KvEviction e = model_->evict(kv_, s, p_.n_keep, p_.n_window);
      // The history mirrors the session's own sequence: drop the evicted tokens from it too, so
      // an endless generation keeps memory flat.
      if (s == seq_ && e.count > 0 && static_cast<size_t>(e.begin + e.count) <= history_.size())
        history_.erase(history_.begin() + e.begin, history_.begin() + e.begin + e.count);
      if (kv_.fits(s, n)) return;
      throw_error("KV cache: no room for ", n, " tokens even after eviction (", kv_.n_tokens(s), " tokens held, n_ctx ",
                  p_.n_ctx, ", budget ", p_.kv_max_bytes, " bytes, ", kv_.blocks_used(), " blocks in use)");
    }
    if (kv_.n_tokens(s) + static_cast<int64_t>(n) > p_.n_ctx)
      throw_error("context full: ", kv_.n_tokens(s), " tokens held + ", n, " new > n_ctx = ", p_.n_ctx,
                  " and no eviction policy is set (--keep N --window W)");
    throw_error("KV cache: byte budget of ", p_.kv_max_bytes, " bytes exhausted (", kv_.blocks_used(), " blocks of ",
                kv_.block_bytes(), " bytes in use) and no eviction policy is set (--keep N --window W)");
  }

  // Generates a continuation of `prompt`; on_text receives each piece of valid UTF-8 as it is
  // produced and may return false to stop.
  GenerateResult generate(const std::string& prompt, const GenerateParams& gp,
                          const std::function<bool(const std::string&)>& on_text = {}) {
    Sampler::validate(gp.sampler);  // before the prompt is evaluated: a rejected call changes nothing
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
      logits = eval_as(toks, [&] { return !cancel_.load() && !over_deadline(0); }, Rows::Prompt);
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
      if (!evicting() && n_past() >= p_.n_ctx) { r.reason = StopReason::ContextFull; break; }
      // Budget-aware: stop when the next token would likely end past the deadline.
      if (over_deadline(worst_token_ms)) { r.reason = StopReason::Deadline; break; }
      tok_clock = Timer();
      logits = eval_as({id}, {}, Rows::Generated);
      const double dt = tok_clock.ms();
      r.token_ms.push_back(dt);
      r.decode_ms += dt;
      worst_token_ms = std::max(worst_token_ms * 0.9, dt);  // recent worst case, slowly forgetting
    }
    std::string tail = finish_text(decoder, stops);
    r.text += tail;
    if (!tail.empty() && on_text) on_text(tail);
    r.peak_rss_bytes = peak_rss_bytes();
    return r;
  }

  // n_seq continuations of one prompt, decoded together: the prompt is evaluated once, each
  // continuation forks its KV sequence (sharing the prompt's blocks) and every step is one batch
  // (one pass over the weights) holding the next token of each unfinished continuation.
  // Continuation i samples with seed gp.sampler.seed + i; on_text(i, piece) streams its text.
  // The session's own sequence keeps the prompt; the continuations' sequences are removed.
  std::vector<GenerateResult> generate_parallel(const std::string& prompt, int n_seq, const GenerateParams& gp,
                                                const std::function<bool(int, const std::string&)>& on_text = {}) {
    EDGELLM_CHECK(n_seq >= 1, "generate_parallel: n_seq must be >= 1, got ", n_seq);
    Sampler::validate(gp.sampler);
    cancel_.store(false);
    Timer clock;
    const bool use_bos = gp.add_bos && history_.empty() && tok_->add_bos();
    const std::vector<int32_t> toks = tok_->encode(prompt, use_bos, gp.parse_special);
    const float* first = toks.empty() ? last_logits() : eval_as(toks, {}, Rows::Prompt);
    const int n_vocab = model_->config().n_vocab;
    std::vector<float> logits(first, first + n_vocab);  // [n_seq][n_vocab] rows of the last step
    const double prefill_ms = clock.ms();

    struct Stream {
      int seq;
      Sampler sampler;
      StreamDecoder decoder;
      StopMatcher stops;
      GenerateResult r;
      bool done = false;
    };
    std::vector<std::unique_ptr<Stream>> st;
    for (int i = 0; i < n_seq; ++i) {
      SamplerParams sp = gp.sampler;
      sp.seed = gp.sampler.seed + static_cast<uint64_t>(i);
      st.push_back(std::unique_ptr<Stream>(new Stream{kv_.fork(seq_), Sampler(sp), StreamDecoder(*tok_), StopMatcher(gp.stop), {}}));
      for (int32_t t : history_) st.back()->sampler.accept(t);
      st.back()->r.n_prompt = static_cast<int>(toks.size());
      st.back()->r.prefill_ms = prefill_ms;
    }
    std::vector<int> row(static_cast<size_t>(n_seq), 0);  // logits row of each stream in the last step
    Batch b;
    try {
      for (int step = 0;; ++step) {
        b.clear();
        for (int i = 0; i < n_seq; ++i) {
          Stream& x = *st[static_cast<size_t>(i)];
          if (x.done) continue;
          if (gp.max_tokens == 0 || (gp.deadline_ms > 0 && clock.ms() > gp.deadline_ms)) {
            x.r.reason = gp.max_tokens == 0 ? StopReason::MaxTokens : StopReason::Deadline;
            x.done = true;
            continue;
          }
          const int32_t id = x.sampler.sample(logits.data() + static_cast<size_t>(row[static_cast<size_t>(i)]) * n_vocab, n_vocab);
          if (step == 0) x.r.ttft_ms = clock.ms();
          x.sampler.accept(id);
          x.done = !take_token(x.r, *tok_, x.decoder, x.stops, gp, id, step, kv_.n_tokens(x.seq), evicting() ? 0 : p_.n_ctx,
                               cancel_.load(), [&](const std::string& piece) { return piece.empty() || !on_text || on_text(i, piece); });
          if (x.done) continue;
          make_room(x.seq, 1);
          row[static_cast<size_t>(i)] = b.size();
          b.add(id, kv_.n_tokens(x.seq), x.seq, true);
        }
        if (b.size() == 0) break;
        b.n_generated = b.size();
        Timer t;
        model_->forward(ctx_, kv_, b);
        logits.assign(ctx_.logits(0), ctx_.logits(0) + static_cast<size_t>(b.size()) * n_vocab);
        const double dt = t.ms();
        for (auto& x : st)
          if (!x->done) {
            x->r.token_ms.push_back(dt);
            x->r.decode_ms += dt;
          }
      }
    } catch (...) {
      for (auto& x : st) kv_.remove_sequence(x->seq);
      throw;
    }
    std::vector<GenerateResult> out;
    for (int i = 0; i < n_seq; ++i) {
      Stream& x = *st[static_cast<size_t>(i)];
      const std::string tail = finish_text(x.decoder, x.stops);
      x.r.text += tail;
      if (!tail.empty() && on_text) on_text(i, tail);
      kv_.remove_sequence(x.seq);
      x.r.peak_rss_bytes = peak_rss_bytes();
      out.push_back(std::move(x.r));
    }
    return out;
  }

 private:
  const float* last_logits() {
    EDGELLM_CHECK(!history_.empty(), "session: no logits yet");
    // Re-evaluate the last token to get its logits (after a previous generate() ended).
    const int32_t last = history_.back();
    kv_.truncate(seq_, n_past() - 1);
    history_.pop_back();
    return eval_as({last}, {}, Rows::Prompt);
  }

  std::shared_ptr<const LlamaModel> model_;
  std::shared_ptr<const Tokenizer> tok_;
  SessionParams p_;
  ThreadPool pool_;
  PagedKvCache kv_;
  LlamaContext ctx_;
  int seq_ = 0;
  int max_chunk_ = 0;  // with eviction: n_ctx minus the most an eviction keeps
  std::vector<int32_t> history_;
  std::atomic<bool> cancel_{false};
};

}  // namespace edgellm
