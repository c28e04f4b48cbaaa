// BatchScheduler: many independent requests on one model, decoded together. Up to n_parallel
// requests hold a slot (each its own sequence in one paged KV cache); every decode step is one
// forward pass (one pass over the weights) holding the next token of every active slot. More
// requests than slots wait in a FIFO queue. A new request starts from the longest prompt prefix
// already in the cache (another slot's sequence, forked so the blocks are shared, or a finished
// request's sequence kept for reuse), so a common system prompt is evaluated once. A cancelled
// request stops before its next token and its blocks return to the pool. No I/O: the HTTP server
// (examples/server.cpp) and the tests drive it through Job.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/engine/session.hpp"
#include "edgellm/kv/paged_kv_cache.hpp"
#include "edgellm/model/llama.hpp"
#include "edgellm/runtime/memory_stats.hpp"
#include "edgellm/runtime/thread_pool.hpp"
#include "edgellm/runtime/timer.hpp"
#include "edgellm/text/sampler.hpp"
#include "edgellm/text/tokenizer.hpp"

namespace edgellm {

struct SchedulerParams {
  SessionParams session;  // n_ctx is per sequence; n_batch, threads, KV block size / type / byte budget
  int n_parallel = 4;     // slots decoded together
  int max_queue = 1024;   // waiting requests beyond the slots; submit() throws past it
  int max_cached = -1;    // finished sequences kept for prompt reuse (-1: n_parallel; 0: none)
};

// One generated token's alternatives (n_probs > 0): the most likely tokens of the distribution the
// sampler drew from, most likely first.
struct TokenAlternatives {
  int32_t id = 0;
  std::vector<TokenProb> top;
};

struct JobResult : GenerateResult {
  int n_cached = 0;       // prompt tokens reused from the cache (not evaluated again)
  double queue_ms = 0;    // submit -> slot
  std::string error;      // non-empty: the request failed (the message says why)
};

// One request and its channel back to the submitter: the scheduler thread appends text as it is
// produced; the submitter takes it with wait() from its own thread.
class Job {
 public:
  std::vector<int32_t> prompt;  // tokens, BOS included when wanted
  GenerateParams gp;            // max_tokens, sampler, stop strings, deadline (from submit), ignore_eos
  bool cache_prompt = true;     // start from a cached prefix and keep the sequence for later requests
  int n_probs = 0;              // alternatives reported per generated token
  bool wake_per_token = true;   // wake wait() at every token (streaming); false: only at the end

  // The text one token added (may be empty: an incomplete UTF-8 sequence, a possible stop
  // string held back) and, with n_probs, its alternatives (probs.id < 0 without).
  struct Piece {
    std::string text;
    TokenAlternatives probs{-1, {}};
  };
  // What was produced since the previous take, a piece per token.
  struct Output {
    std::vector<Piece> pieces;
    bool done = false;
    std::string text() const {
      std::string t;
      for (const auto& p : pieces) t += p.text;
      return t;
    }
  };

  // Waits up to `timeout` for new output or the end, then takes what there is.
  Output wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return done_ || !pieces_.empty(); });
    Output o;
    o.pieces.swap(pieces_);
    o.done = done_;
    return o;
  }
  // Waits for the end and returns the result (the text is in result().text as well).
  const JobResult& wait_done() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return result_;
  }
  // After wait() reported done (or wait_done()).
  const JobResult& result() const { return result_; }
  bool done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  // Stops the request before its next token (also while it waits in the queue).
  void cancel() { cancel_.store(true); }
  bool cancelled() const { return cancel_.load(); }

 private:
  friend class BatchScheduler;
  void emit(const std::string& text, const TokenAlternatives* alt) {
    if (text.empty() && !alt) return;
    std::lock_guard<std::mutex> lock(mu_);
    pieces_.push_back(Piece{text, alt ? *alt : TokenAlternatives{-1, {}}});
    if (wake_per_token) cv_.notify_all();
  }
  void finish(JobResult r) {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = std::move(r);
    done_ = true;
    cv_.notify_all();
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Piece> pieces_;
  bool done_ = false;
  JobResult result_;
  std::atomic<bool> cancel_{false};
  Timer since_submit_;
};

class BatchScheduler {
 public:
  struct Stats {
    int slots_busy = 0;
    int queued = 0;
    int cached_sequences = 0;  // finished sequences kept for prompt reuse
    int kv_blocks_used = 0;
    int kv_blocks_allocated = 0;
    int kv_sequences = 0;
    uint64_t steps = 0;         // decode forward passes
    uint64_t step_tokens = 0;   // tokens in them (steps with several slots carry several)
    int max_step_tokens = 0;    // the widest decode step so far
    uint64_t prompt_tokens_reused = 0;
    uint64_t finished = 0;   // requests ended, by any reason
    uint64_t cancelled = 0;  // of which cancelled (Job::cancel, e.g. the client went away)
    uint64_t failed = 0;     // of which failed (JobResult::error)
  };

  BatchScheduler(std::shared_ptr<const LlamaModel> model, std::shared_ptr<const Tokenizer> tok, const SchedulerParams& p)
      : model_(std::move(model)), tok_(std::move(tok)), p_(p),
        pool_(p.session.n_threads > 0 ? p.session.n_threads : default_thread_count()),
        kv_(model_->kv_params(p.session.n_ctx, p.session.kv_block_size, p.session.kv_max_bytes, p.session.kv_type,
                              p.session.kv_recent_f32)),
        ctx_(&pool_) {
    EDGELLM_CHECK(p.n_parallel >= 1, "scheduler: n_parallel must be >= 1, got ", p.n_parallel);
    EDGELLM_CHECK(p.max_queue >= 0, "scheduler: max_queue must be >= 0, got ", p.max_queue);
    EDGELLM_CHECK(p.session.n_ctx >= 1 && p.session.n_batch >= 1, "scheduler: n_ctx and n_batch must be >= 1, got ",
                  p.session.n_ctx, " and ", p.session.n_batch);
    EDGELLM_CHECK(p.session.n_window == 0, "scheduler: KV eviction (--keep/--window) is not available with several sequences");
    max_cached_ = p.max_cached < 0 ? p.n_parallel : p.max_cached;
  }
  ~BatchScheduler() { stop(); }
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  const SchedulerParams& params() const { return p_; }
  const LlamaModel& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tok_; }

  // Queues a request. Throws Error for an empty prompt, one longer than the context, bad sampler
  // values or a full queue; the job is then not queued.
  std::shared_ptr<Job> submit(std::vector<int32_t> prompt, const GenerateParams& gp, bool cache_prompt = true,
                              int n_probs = 0, bool wake_per_token = true) {
    EDGELLM_CHECK(!prompt.empty(), "scheduler: the prompt is empty");
    EDGELLM_CHECK(static_cast<int64_t>(prompt.size()) < p_.session.n_ctx, "prompt of ", prompt.size(),
                  " tokens does not fit the context of ", p_.session.n_ctx, " tokens");
    EDGELLM_CHECK(n_probs >= 0, "scheduler: n_probs must be >= 0, got ", n_probs);
    Sampler::validate(gp.sampler);
    const int32_t n_vocab = model_->config().n_vocab;
    for (int32_t t : prompt) EDGELLM_CHECK(t >= 0 && t < n_vocab, "scheduler: token id ", t, " is not in the vocabulary of ", n_vocab);
    auto job = std::make_shared<Job>();
    job->prompt = std::move(prompt);
    job->gp = gp;
    job->cache_prompt = cache_prompt;
    job->n_probs = n_probs;
    job->wake_per_token = wake_per_token;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (static_cast<int>(queue_.size()) >= p_.max_queue + p_.n_parallel - busy_)
        throw_error("server busy: ", queue_.size(), " requests are waiting (queue limit ", p_.max_queue, ")");
      queue_.push_back(job);
      stats_.queued = static_cast<int>(queue_.size());
    }
    cv_.notify_all();
    return job;
  }

  // Runs the scheduler on its own thread until stop().
  void start() {
    std::lock_guard<std::mutex> lock(mu_);
    if (worker_.joinable()) return;
    stopping_ = false;
    worker_ = std::thread([this] { loop(); });
  }
  // Ends the worker thread; requests still queued or running finish as cancelled.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    for (auto& s : slots_) finish(s, StopReason::Cancelled);
    slots_.clear();
    std::deque<std::shared_ptr<Job>> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left.swap(queue_);
    }
    for (auto& j : left) {
      JobResult r;
      r.reason = StopReason::Cancelled;
      count(r);
      j->finish(std::move(r));
    }
  }

  // One round without the worker thread (tests, or a caller's own loop): admits queued requests
  // into free slots (evaluating their prompts), then one decode step over every active slot.
  // Returns whether work remains.
  bool step() {
    admit();
    decode_step();
    publish_stats();
    std::lock_guard<std::mutex> lock(mu_);
    return !slots_.empty() || !queue_.empty();
  }
  // step() until nothing is queued or running.
  void run_until_idle() {
    while (step()) {
    }
  }

  Stats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  struct Slot {
    std::shared_ptr<Job> job;
    int seq = -1;
    std::vector<int32_t> held;  // tokens in the sequence's cache, in order
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<StreamDecoder> decoder;
    std::unique_ptr<StopMatcher> stops;
    JobResult r;
    std::vector<float> logits;  // the row to sample the next token from
    int step = 0;               // tokens sampled so far
    double worst_token_ms = 0;  // recent worst step, for the deadline
    Timer clock;                // since the slot was taken
  };
  struct Cached {
    int seq;
    std::vector<int32_t> held;
  };

  void loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !slots_.empty(); });
        if (stopping_) return;
      }
      step();
    }
  }

  static size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return i;
  }

  void admit() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (queue_.empty() || static_cast<int>(slots_.size()) >= p_.n_parallel) return;
        job = queue_.front();
        queue_.pop_front();
        busy_ = static_cast<int>(slots_.size()) + 1;
        stats_.queued = static_cast<int>(queue_.size());
      }
      start_slot(job);
    }
  }

  // Takes a slot for the job: reuses the longest cached prefix, evaluates the rest of the prompt.
  void start_slot(const std::shared_ptr<Job>& job) {
    Slot s;
    s.job = job;
    s.r.queue_ms = job->since_submit_.ms();
    s.r.n_prompt = static_cast<int>(job->prompt.size());
    if (job->cancelled()) {
      s.r.reason = StopReason::Cancelled;
      count(s.r);
      job->finish(std::move(s.r));
      return;
    }
    const auto& prompt = job->prompt;
    // Longest common prefix with a running slot (fork: shared blocks) or a kept sequence (taken
    // over). At least the last prompt token is evaluated again, for its logits.
    size_t best = 0;
    int from_slot = -1, from_cache = -1;
    if (job->cache_prompt) {
      for (size_t i = 0; i < slots_.size(); ++i) {
        const size_t n = common_prefix(slots_[i].held, prompt);
        if (n > best) { best = n; from_slot = static_cast<int>(i); from_cache = -1; }
      }
      int ci = 0;
      for (auto it = cached_.begin(); it != cached_.end(); ++it, ++ci) {
        const size_t n = common_prefix(it->held, prompt);
        if (n > best) { best = n; from_cache = ci; from_slot = -1; }
      }
    }
    const size_t reuse = std::min(best, prompt.size() - 1);
    if (reuse > 0 && from_cache >= 0) {
      auto it = std::next(cached_.begin(), from_cache);
      s.seq = it->seq;
      cached_.erase(it);
      kv_.truncate(s.seq, static_cast<int>(reuse));
    } else if (reuse > 0) {
      s.seq = kv_.fork(slots_[static_cast<size_t>(from_slot)].seq);
      kv_.truncate(s.seq, static_cast<int>(reuse));
    } else {
      s.seq = kv_.create_sequence();
    }
    s.held.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(reuse));
    s.r.n_cached = static_cast<int>(reuse);
    try {
      Batch b;
      const size_t chunk = static_cast<size_t>(p_.session.n_batch);
      for (size_t i = reuse; i < prompt.size(); i += chunk) {
        if (job->cancelled()) {
          finish(s, StopReason::Cancelled);
          return;
        }
        const size_t end = std::min(prompt.size(), i + chunk);
        make_room(s.seq, static_cast<int>(end - i));
        b.clear();
        for (size_t j = i; j < end; ++j)
          b.add(prompt[j], static_cast<int32_t>(j), s.seq, j + 1 == prompt.size());
        model_->forward(ctx_, kv_, b);
        s.held.insert(s.held.end(), prompt.begin() + static_cast<std::ptrdiff_t>(i), prompt.begin() + static_cast<std::ptrdiff_t>(end));
      }
    } catch (const std::exception& e) {
      fail(s, e.what());
      return;
    }
    const int n_vocab = model_->config().n_vocab;
    s.logits.assign(ctx_.logits(0), ctx_.logits(0) + n_vocab);
    s.r.prefill_ms = s.clock.ms();
    s.sampler.reset(new Sampler(job->gp.sampler));
    for (int32_t t : prompt) s.sampler->accept(t);
    s.decoder.reset(new StreamDecoder(*tok_));
    s.stops.reset(new StopMatcher(job->gp.stop));
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.prompt_tokens_reused += reuse;
    }
    slots_.push_back(std::move(s));
  }

  // Room for n more tokens of sequence seq: drops kept sequences (oldest first) while the byte
  // budget is short; throws Error when it stays short.
  void make_room(int seq, int n) {
    while (!kv_.fits(seq, n) && !cached_.empty()) {
      kv_.remove_sequence(cached_.front().seq);
      cached_.pop_front();
    }
    if (!kv_.fits(seq, n))
      throw_error("KV cache: no room for ", n, " more tokens (", kv_.n_tokens(seq), " held, context ", p_.session.n_ctx,
                  ", budget ", p_.session.kv_max_bytes, " bytes, ", kv_.blocks_used(), " blocks in use)");
  }

  void decode_step() {
    if (slots_.empty()) return;
    const int n_vocab = model_->config().n_vocab;
    Batch b;
    std::vector<size_t> in_batch;  // slot index of each batch row
    std::vector<bool> finished(slots_.size(), false);
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      const GenerateParams& gp = s.job->gp;
      const double elapsed = s.job->since_submit_.ms();
      if (gp.max_tokens == 0) { finish(s, StopReason::MaxTokens); finished[i] = true; continue; }
      if (gp.deadline_ms > 0 && elapsed + s.worst_token_ms > gp.deadline_ms) {
        finish(s, StopReason::Deadline);
        finished[i] = true;
        continue;
      }
      const int32_t id = s.sampler->sample(s.logits.data(), n_vocab);
      if (s.step == 0) s.r.ttft_ms = s.clock.ms();
      TokenAlternatives alt;
      if (s.job->n_probs > 0) alt = alternatives(*s.sampler, s.logits.data(), n_vocab, id, s.job->n_probs);
      s.sampler->accept(id);
      const bool go_on = take_token(s.r, *tok_, *s.decoder, *s.stops, gp, id, s.step, static_cast<int>(s.held.size()),
                                    p_.session.n_ctx, s.job->cancelled(), [&](const std::string& piece) {
                                      s.job->emit(piece, s.job->n_probs > 0 ? &alt : nullptr);
                                      return true;
                                    });
      ++s.step;
      if (!go_on) { finish(s, s.r.reason); finished[i] = true; continue; }
      try {
        make_room(s.seq, 1);
      } catch (const std::exception&) {
        finish(s, StopReason::ContextFull);
        finished[i] = true;
        continue;
      }
      in_batch.push_back(i);
      b.add(id, static_cast<int32_t>(s.held.size()), s.seq, true);
      s.held.push_back(id);
    }
    if (b.size() > 0) {
      Timer t;
      try {
        model_->forward(ctx_, kv_, b);
      } catch (const std::exception& e) {
        for (size_t i : in_batch) {
          slots_[i].held.pop_back();
          fail(slots_[i], e.what());
          finished[i] = true;
        }
      }
      const double dt = t.ms();
      for (size_t row = 0; row < in_batch.size(); ++row) {
        Slot& s = slots_[in_batch[row]];
        if (finished[in_batch[row]]) continue;
        s.logits.assign(ctx_.logits(static_cast<int>(row)), ctx_.logits(static_cast<int>(row)) + n_vocab);
        s.r.token_ms.push_back(dt);
        s.r.decode_ms += dt;
        s.worst_token_ms = std::max(s.worst_token_ms * 0.9, dt);
      }
      std::lock_guard<std::mutex> lock(mu_);
      stats_.steps += 1;
      stats_.step_tokens += static_cast<uint64_t>(b.size());
      stats_.max_step_tokens = std::max(stats_.max_step_tokens, b.size());
    }
    std::vector<Slot> kept;
    for (size_t i = 0; i < slots_.size(); ++i)
      if (!finished[i]) kept.push_back(std::move(slots_[i]));
    slots_.swap(kept);
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = static_cast<int>(slots_.size());
  }

  static TokenAlternatives alternatives(Sampler& sampler, const float* logits, int n_vocab, int32_t id, int n) {
    TokenAlternatives a;
    a.id = id;
    a.top = sampler.probabilities(logits, n_vocab);
    if (a.top.size() == 1 && a.top[0].p == 1.0f && sampler.params().temperature <= 0.0f) {
      // Greedy: report the softmax of the logits, as llama-server does for n_probs.
      std::vector<TokenProb> all(static_cast<size_t>(n_vocab));
      float mx = logits[0];
      for (int i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
      double sum = 0;
      for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
      for (int i = 0; i < n_vocab; ++i)
        all[static_cast<size_t>(i)] = TokenProb{i, static_cast<float>(std::exp(static_cast<double>(logits[i] - mx)) / sum)};
      a.top.swap(all);
    }
    const size_t k = std::min(a.top.size(), static_cast<size_t>(n));
    std::partial_sort(a.top.begin(), a.top.begin() + static_cast<std::ptrdiff_t>(k), a.top.end(),
                      [](const TokenProb& x, const TokenProb& y) { return x.p > y.p || (x.p == y.p && x.id < y.id); });
    a.top.resize(k);
    return a;
  }

  // Ends a slot's request: the held-back text goes out, the sequence is kept for reuse (cached,
  // oldest dropped first) or removed.
  void finish(Slot& s, StopReason reason) {
    s.r.reason = reason;
    if (s.decoder && s.stops) {
      const std::string tail = finish_text(*s.decoder, *s.stops);
      s.r.text += tail;
      s.job->emit(tail, nullptr);
    }
    release(s, reason != StopReason::Cancelled && s.job->cache_prompt);
    s.r.peak_rss_bytes = peak_rss_bytes();
    count(s.r);
    s.job->finish(std::move(s.r));
  }
  void fail(Slot& s, const std::string& message) {
    s.r.error = message;
    release(s, false);
    count(s.r);
    s.job->finish(std::move(s.r));
  }
  void count(const JobResult& r) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.finished;
    stats_.cancelled += r.error.empty() && r.reason == StopReason::Cancelled;
    stats_.failed += !r.error.empty();
  }
  void release(Slot& s, bool keep) {
    if (s.seq < 0) return;
    if (keep && max_cached_ > 0) {
      cached_.push_back(Cached{s.seq, std::move(s.held)});
      while (static_cast<int>(cached_.size()) > max_cached_) {
        kv_.remove_sequence(cached_.front().seq);
        cached_.pop_front();
      }
    } else {
      kv_.remove_sequence(s.seq);
    }
    s.seq = -1;
  }

  void publish_stats() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.slots_busy = static_cast<int>(slots_.size());
    stats_.queued = static_cast<int>(queue_.size());
    stats_.cached_sequences = static_cast<int>(cached_.size());
    stats_.kv_blocks_used = kv_.blocks_used();
    stats_.kv_blocks_allocated = kv_.blocks_allocated();
    stats_.kv_sequences = kv_.n_sequences();
  }

  std::shared_ptr<const LlamaModel> model_;
  std::shared_ptr<const Tokenizer> tok_;
  SchedulerParams p_;
  ThreadPool pool_;
  PagedKvCache kv_;
  LlamaContext ctx_;
  int max_cached_ = 0;
  // Worker-thread state.
  std::vector<Slot> slots_;
  std::list<Cached> cached_;  // oldest first
  // Shared with submitters (mu_).
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  int busy_ = 0;
  bool stopping_ = false;
  Stats stats_;
  std::thread worker_;
};

}  // namespace edgellm
