// BatchScheduler: many independent requests on one model, decoded together. Up to n_parallel
// requests hold a slot (each its own sequence in one paged KV cache); every decode step is one
// forward pass (one pass over the weights) holding the next token of every active slot. More
// requests than slots wait in a FIFO queue. A new request starts from the longest prompt prefix
// already in the cache (another slot's sequence, forked so the blocks are shared, or a finished
// request's sequence kept for reuse), so a common system prompt is evaluated once. A cancelled
// request stops before its next token and its blocks return to the pool. A new request's prompt is
// read a chunk per step (SchedulerParams::prefill_chunk) in the same forward pass as the next token
// of every running request, so a long prompt does not stall the others. No I/O: the HTTP server
// (examples/server.cpp) and the tests drive it through Job; a job may carry a `client_gone` probe
// the scheduler asks before each of its tokens (the server's looks at the client's socket).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
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
  int prefill_chunk = 64; // prompt tokens evaluated per step, beside one token of each running
                          // request (0: n_batch; at most n_batch)
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
  // Asked by the scheduler thread before each prompt chunk and token of this request (and when it
  // leaves the queue): true cancels it, e.g. the client closed its connection. Must be cheap and
  // thread-safe; set before submit.
  std::function<bool()> client_gone;

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
    int slots_prefilling = 0;   // of slots_busy: still reading their prompt
    uint64_t steps = 0;         // forward passes carrying generated tokens (decode steps)
    uint64_t step_tokens = 0;   // generated tokens in them (steps with several slots carry several)
    int max_step_tokens = 0;    // the most generated tokens in one step so far
    uint64_t prefill_chunks = 0;  // forward passes carrying prompt tokens (with a decode step or alone)
    uint64_t prefill_tokens = 0;  // prompt tokens evaluated (not reused from the cache)
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
    EDGELLM_CHECK(p.prefill_chunk >= 0, "scheduler: prefill_chunk must be >= 0, got ", p.prefill_chunk);
    EDGELLM_CHECK(p.session.n_ctx >= 1 && p.session.n_batch >= 1, "scheduler: n_ctx and n_batch must be >= 1, got ",
                  p.session.n_ctx, " and ", p.session.n_batch);
    EDGELLM_CHECK(p.session.n_window == 0, "scheduler: KV eviction (--keep/--window) is not available with several sequences");
    max_cached_ = p.max_cached < 0 ? p.n_parallel : p.max_cached;
    chunk_ = p.prefill_chunk == 0 ? p.session.n_batch : std::min(p.prefill_chunk, p.session.n_batch);
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
                              int n_probs = 0, bool wake_per_token = true, std::function<bool()> client_gone = nullptr) {
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
    job->client_gone = std::move(client_gone);
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
  // into free slots, then one forward pass holding the next token of every generating slot and up
  // to prefill_chunk prompt tokens of the oldest slot still reading its prompt.
  // Returns whether work remains.
  bool step() {
    admit();
    forward_step();
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
    bool generating = false;    // the prompt is evaluated (until then held grows a chunk a step)
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

  // Asks the job's client probe; a job whose client went away is cancelled.
  static bool gone(Job& job) {
    if (!job.cancelled() && job.client_gone && job.client_gone()) job.cancel();
    return job.cancelled();
  }

  // Moves queued requests into free slots. Their prompts are evaluated later, a chunk per step.
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
      Slot s;
      s.job = job;
      s.r.queue_ms = job->since_submit_.ms();
      s.r.n_prompt = static_cast<int>(job->prompt.size());
      if (gone(*job)) {
        s.r.reason = StopReason::Cancelled;
        count(s.r);
        job->finish(std::move(s.r));
        std::lock_guard<std::mutex> lock(mu_);
        busy_ = static_cast<int>(slots_.size());
        continue;
      }
      slots_.push_back(std::move(s));
    }
  }

  // Gives the slot its sequence when its first prompt chunk is due: the longest common prefix
  // with a running slot (fork: shared blocks) or a kept sequence (taken over), else a new one. At
  // least the last prompt token is evaluated again, for its logits. Deciding this only now (not at
  // admission) lets a request queued behind one with the same prefix reuse all of it.
  void begin_prefill(Slot& s) {
    const auto& prompt = s.job->prompt;
    size_t best = 0;
    int from_slot = -1, from_cache = -1;
    if (s.job->cache_prompt) {
      for (size_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i].seq < 0) continue;
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
    std::lock_guard<std::mutex> lock(mu_);
    stats_.prompt_tokens_reused += reuse;
  }

  // The prompt is in the cache: the slot samples from `logits` at the next step.
  void begin_generating(Slot& s, const float* logits) {
    s.logits.assign(logits, logits + model_->config().n_vocab);
    s.r.prefill_ms = s.clock.ms();
    s.sampler.reset(new Sampler(s.job->gp.sampler));
    for (int32_t t : s.job->prompt) s.sampler->accept(t);
    s.decoder.reset(new StreamDecoder(*tok_));
    s.stops.reset(new StopMatcher(s.job->gp.stop));
    s.generating = true;
  }

  // One forward pass: the next token of every generating slot (each samples from its logits row,
  // the stop rules run, the continuing slots' tokens go into one batch) and the next prompt chunk of
  // the oldest slot still reading its prompt, so running requests go on producing tokens while a
  // long prompt is read. Each row is computed by its role (Batch::n_generated: the generated tokens
  // decoded, the chunk prefilled), so each request gets the tokens it gets alone. A request whose
  // client went away ends here, before its next token or chunk.
  void forward_step() {
    if (slots_.empty()) return;
    const int n_vocab = model_->config().n_vocab;
    std::vector<bool> finished(slots_.size(), false);
    for (size_t i = 0; i < slots_.size(); ++i)
      if (gone(*slots_[i].job)) {
        finish(slots_[i], StopReason::Cancelled);
        finished[i] = true;
      }
    // The prompt chunk's sequence is set up first: a fork must not see this step's sampled tokens,
    // which are in their slots' `held` before they are evaluated.
    int pre = -1;
    size_t pre_begin = 0, pre_end = 0;
    for (size_t i = 0; i < slots_.size() && pre < 0; ++i)
      if (!finished[i] && !slots_[i].generating) pre = static_cast<int>(i);
    if (pre >= 0) {
      Slot& s = slots_[static_cast<size_t>(pre)];
      try {
        if (s.seq < 0) begin_prefill(s);
        pre_begin = s.held.size();
        pre_end = std::min(s.job->prompt.size(), pre_begin + static_cast<size_t>(chunk_));
        make_room(s.seq, static_cast<int>(pre_end - pre_begin));
      } catch (const std::exception& e) {
        fail(s, e.what());
        finished[static_cast<size_t>(pre)] = true;
        pre = -1;
      }
    }
    Batch b;
    std::vector<size_t> in_batch;  // slot index of each generated-token row
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (finished[i] || !s.generating) continue;
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
    if (pre >= 0) {
      const Slot& s = slots_[static_cast<size_t>(pre)];
      for (size_t j = pre_begin; j < pre_end; ++j)
        b.add(s.job->prompt[j], static_cast<int32_t>(j), s.seq, j + 1 == s.job->prompt.size());
    }
    b.n_generated = static_cast<int>(in_batch.size());  // generated tokens first, then the prompt chunk
    if (b.size() > 0) {
      Timer t;
      auto run = [&]() -> std::string {
        try {
          model_->forward(ctx_, kv_, b);
          return {};
        } catch (const std::exception& e) {
          return e.what();
        }
      };
      std::string err = run();  // on error the cache is left as it was
      if (!err.empty() && pre >= 0 && !in_batch.empty()) {
        // The new prompt's chunk fails alone when the running requests' tokens go through without it.
        fail(slots_[static_cast<size_t>(pre)], err);
        finished[static_cast<size_t>(pre)] = true;
        pre = -1;
        b.tokens.resize(in_batch.size());
        b.pos.resize(in_batch.size());
        b.seq.resize(in_batch.size());
        b.logits.resize(in_batch.size());
        err = run();
      }
      if (!err.empty()) {
        for (size_t i : in_batch) {
          slots_[i].held.pop_back();
          fail(slots_[i], err);
          finished[i] = true;
        }
        in_batch.clear();
        if (pre >= 0) {
          fail(slots_[static_cast<size_t>(pre)], err);
          finished[static_cast<size_t>(pre)] = true;
          pre = -1;
        }
      }
      const double dt = t.ms();
      for (size_t row = 0; row < in_batch.size(); ++row) {
        Slot& s = slots_[in_batch[row]];
        s.logits.assign(ctx_.logits(static_cast<int>(row)), ctx_.logits(static_cast<int>(row)) + n_vocab);
        s.r.token_ms.push_back(dt);
        s.r.decode_ms += dt;
        s.worst_token_ms = std::max(s.worst_token_ms * 0.9, dt);
      }
      if (pre >= 0) {
        Slot& s = slots_[static_cast<size_t>(pre)];
        const auto& prompt = s.job->prompt;
        s.held.insert(s.held.end(), prompt.begin() + static_cast<std::ptrdiff_t>(pre_begin),
                      prompt.begin() + static_cast<std::ptrdiff_t>(pre_end));
        if (pre_end == prompt.size()) begin_generating(s, ctx_.logits(static_cast<int>(in_batch.size())));
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (!in_batch.empty()) {
        stats_.steps += 1;
        stats_.step_tokens += static_cast<uint64_t>(in_batch.size());
        stats_.max_step_tokens = std::max(stats_.max_step_tokens, static_cast<int>(in_batch.size()));
      }
      if (pre >= 0) {
        stats_.prefill_chunks += 1;
        stats_.prefill_tokens += static_cast<uint64_t>(pre_end - pre_begin);
      }
    }
    std::vector<Slot> kept;
    for (size_t i = 0; i < slots_.size(); ++i)
      if (!finished[i]) kept.push_back(std::move(slots_[i]));
    slots_.swap(kept);
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = static_cast<int>(slots_.size());
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
    stats_.slots_prefilling = static_cast<int>(
        std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.generating; }));
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
  int chunk_ = 0;  // prompt tokens per step
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
