// BatchScheduler: many independent requests on one model, decoded together. Up to n_parallel
// requests hold a slot (each its own sequence in one paged KV cache); every decode step is one
// forward pass (one pass over the weights) holding the next token of every active slot. More
// requests than slots wait in a FIFO queue. A new request starts from the longest prompt prefix
// already in the cache (another slot's sequence, forked so the blocks are shared, or a finished
// request's sequence kept for reuse), so a common system prompt is evaluated once. A cancelled
// request stops before its next token and its blocks return to the pool. A new request's prompt is
// read a chunk per step (SchedulerParams::prefill_chunk) in the same forward pass as the next token
// of every running request, so a long prompt does not stall the others. Each round is one step of
// the token loop Session uses too (DecodeLoop, engine/decode_loop.hpp); the scheduler is its
// DecodeHost (sequences with prefix reuse, room from the cached sequences, the Job). No I/O: the HTTP server
// (examples/server/server.cpp) and the tests drive it through Job; a job may carry a `client_gone` probe
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
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/engine/session.hpp"
#include "edgellm/engine/session_file.hpp"
#include "edgellm/engine/speculative.hpp"
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
  // Speculative decoding's model draft source for every request that speculates without prompt
  // lookup (GenerateParams::speculative): a draft model of the same vocabulary, or with
  // draft_layers > 0 the first draft_layers layers of `draft` (null: the served model, early exit).
  std::shared_ptr<const LlamaModel> draft;
  int draft_layers = 0;
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

class BatchScheduler : private EngineCore, private DecodeHost {
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
      : EngineCore(std::move(model), std::move(tok), p.session),
        p_(p),
        loop_(*model_, *tok_, ctx_, kv_, *this, loop_params(p)) {
    EDGELLM_CHECK(p.n_parallel >= 1, "scheduler: n_parallel must be >= 1, got ", p.n_parallel);
    EDGELLM_CHECK(p.max_queue >= 0, "scheduler: max_queue must be >= 0, got ", p.max_queue);
    EDGELLM_CHECK(p.prefill_chunk >= 0, "scheduler: prefill_chunk must be >= 0, got ", p.prefill_chunk);
    EDGELLM_CHECK(p.session.n_ctx >= 1 && p.session.n_batch >= 1, "scheduler: n_ctx and n_batch must be >= 1, got ",
                  p.session.n_ctx, " and ", p.session.n_batch);
    EDGELLM_CHECK(p.session.n_window == 0, "scheduler: KV eviction (--keep/--window) is not available with several sequences");
    max_cached_ = p.max_cached < 0 ? p.n_parallel : p.max_cached;
    if (p.draft || p.draft_layers > 0) {
      std::shared_ptr<const LlamaModel> d = p.draft ? p.draft : model_;
      if (d != model_) check_draft_vocab(*tok_, Tokenizer(Vocab::from_gguf(d->file())), d->file().path());
      drafter_.reset(new ModelDrafter(d, p.draft_layers, &pool_, p.session.n_ctx + 64, p.session.n_batch));
      loop_.set_drafter(drafter_.get());
    }
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
    validate(gp.speculative);
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
    running_ = true;
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
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
    }
    run_tasks();  // what on_worker() queued meanwhile: its callers are waiting
    for (auto& s : slots_) loop_.end(*s, StopReason::Cancelled);
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
  // into free slots, then one DecodeLoop step: one forward pass holding the next token of every
  // generating slot and up to prefill_chunk prompt tokens of the oldest slot still reading its prompt.
  // Returns whether work remains.
  bool step() {
    run_tasks();
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

  // ---- kept sequences on storage (the server's POST /slots/{id}?action=save|restore|erase) ----
  // Kept sequence `id` (0: the most recently finished request's, 1 the one before, ...) as a saved
  // session state (engine/session_file.hpp). Throws Error when there is no such sequence.
  SessionSnapshot snapshot_kept(int id) {
    return on_worker<SessionSnapshot>([&] {
      const Cached& c = kept(id);
      return snapshot_sequence(kv_, c.seq, c.held, session_fingerprint(*model_, kv_, p_.session.n_ctx));
    });
  }
  // A saved state (checked against this model, KV type and context: Error naming what differs)
  // becomes the newest kept sequence: a request whose prompt starts with its tokens reuses them.
  void restore_kept(const SessionSnapshot& snap, const std::string& name) {
    on_worker<int>([&] {
      const int seq = kv_.create_sequence();
      try {
        restore_sequence(kv_, seq, snap, session_fingerprint(*model_, kv_, p_.session.n_ctx), name);
      } catch (...) {
        kv_.remove_sequence(seq);
        throw;
      }
      cached_.push_back(Cached{seq, snap.tokens});
      while (static_cast<int>(cached_.size()) > std::max(1, max_cached_)) {
        kv_.remove_sequence(cached_.front().seq);
        cached_.pop_front();
      }
      return 0;
    });
  }
  // Drops kept sequence `id`; returns its token count.
  size_t erase_kept(int id) {
    return on_worker<size_t>([&] {
      const Cached& c = kept(id);
      const size_t n = c.held.size();
      kv_.remove_sequence(c.seq);
      cached_.erase(std::next(cached_.begin(), static_cast<std::ptrdiff_t>(cached_.size()) - 1 - id));
      return n;
    });
  }

 private:
  // A request in a slot: its stream in the DecodeLoop plus what its JobResult adds.
  struct Slot : DecodeStream {
    std::shared_ptr<Job> job;
    int n_cached = 0;     // prompt tokens reused from the cache
    double queue_ms = 0;  // submit -> slot
  };
  struct Cached {
    int seq;
    std::vector<int32_t> held;
  };

  void loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !slots_.empty() || !tasks_.empty(); });
        if (stopping_) return;
      }
      step();
    }
  }

  const Cached& kept(int id) const {
    if (id < 0 || id >= static_cast<int>(cached_.size()))
      throw_error("no kept sequence ", id, " (", cached_.size(), " kept: 0 is the most recently finished request's)");
    return *std::next(cached_.begin(), static_cast<std::ptrdiff_t>(cached_.size()) - 1 - id);
  }

  // Runs fn on the worker thread between steps and waits for its result (its Error rethrown);
  // without a worker thread (step() driven by the caller) runs it here.
  template <class T, class F>
  T on_worker(F&& fn) {
    auto task = std::make_shared<std::packaged_task<T()>>(std::forward<F>(fn));
    std::future<T> done = task->get_future();
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!running_) {
        lock.unlock();
        (*task)();  // no worker thread: the caller drives step() itself
        return done.get();
      }
      if (stopping_) throw_error("scheduler: stopping");
      tasks_.push_back([task] { (*task)(); });
    }
    cv_.notify_all();
    return done.get();
  }
  void run_tasks() {
    std::deque<std::function<void()>> now;
    {
      std::lock_guard<std::mutex> lock(mu_);
      now.swap(tasks_);
    }
    for (auto& t : now) t();
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

  static DecodeLoopParams loop_params(const SchedulerParams& p) {
    DecodeLoopParams lp;
    lp.n_ctx = p.session.n_ctx;
    lp.chunk = std::max(1, p.prefill_chunk == 0 ? p.session.n_batch : std::min(p.prefill_chunk, p.session.n_batch));
    lp.no_room_is_context_full = true;  // a request that runs out of KV budget ends ("length"), others go on
    return lp;
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
      std::unique_ptr<Slot> s(new Slot);
      s->job = job;
      s->queue_ms = job->since_submit_.ms();
      s->waited_ms = s->queue_ms;  // the deadline counts from submission
      s->clock.reset();
      s->prompt = job->prompt;
      s->gp = job->gp;
      s->n_probs = job->n_probs;
      s->r.n_prompt = static_cast<int>(job->prompt.size());
      if (gone(*job)) {
        s->r.reason = StopReason::Cancelled;
        s->done = true;
        finished(*s);
        std::lock_guard<std::mutex> lock(mu_);
        busy_ = static_cast<int>(slots_.size());
        continue;
      }
      slots_.push_back(std::move(s));
    }
  }

  // DecodeHost: the slot's first prompt chunk is due; its sequence is the longest common prefix
  // with a running slot (fork: shared blocks) or a kept sequence (taken over), else a new one. At
  // least the last prompt token is evaluated again, for its logits. Deciding this only now (not at
  // admission) lets a request queued behind one with the same prefix reuse all of it.
  void assign_sequence(DecodeStream& d) override {
    Slot& s = static_cast<Slot&>(d);
    const auto& prompt = s.prompt;
    size_t best = 0;
    int from_slot = -1, from_cache = -1;
    if (s.job->cache_prompt) {
      for (size_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i]->seq < 0 || slots_[i]->done) continue;
        const size_t n = common_prefix(slots_[i]->held, prompt);
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
      s.seq = kv_.fork(slots_[static_cast<size_t>(from_slot)]->seq);
      kv_.truncate(s.seq, static_cast<int>(reuse));
    } else {
      s.seq = kv_.create_sequence();
    }
    s.held.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(reuse));
    s.n_read = reuse;
    s.n_cached = static_cast<int>(reuse);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.prompt_tokens_reused += reuse;
  }
  void make_room(DecodeStream& d, int n) override { make_room(d.seq, n); }
  bool cancelled(DecodeStream& d) override { return gone(*static_cast<Slot&>(d).job); }
  bool emit(DecodeStream& d, const std::string& piece, const TokenAlternatives* alt) override {
    static_cast<Slot&>(d).job->emit(piece, alt);
    return true;
  }
  // The request ended: its sequence is kept for reuse (cached, oldest dropped first) or removed,
  // and the Job gets its result.
  void finished(DecodeStream& d) override {
    Slot& s = static_cast<Slot&>(d);
    JobResult r;
    static_cast<GenerateResult&>(r) = std::move(s.r);
    r.n_cached = s.n_cached;
    r.queue_ms = s.queue_ms;
    if (s.error) r.error = message_of(s.error);
    release(s, !s.error && r.reason != StopReason::Cancelled && s.job->cache_prompt);
    count(r);
    s.job->finish(std::move(r));
  }
  static std::string message_of(const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      return x.what();
    } catch (...) {
      return "unknown error";
    }
  }

  // One DecodeLoop step over the slots (oldest first), then the ended ones leave.
  void forward_step() {
    if (slots_.empty()) return;
    std::vector<DecodeStream*> streams;
    for (auto& s : slots_) streams.push_back(s.get());
    const DecodeStepStats st = loop_.step(streams);
    slots_.erase(std::remove_if(slots_.begin(), slots_.end(), [](const std::unique_ptr<Slot>& s) { return s->done; }),
                 slots_.end());
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = static_cast<int>(slots_.size());
    if (st.generated > 0) {
      stats_.steps += 1;
      stats_.step_tokens += static_cast<uint64_t>(st.generated);
      stats_.max_step_tokens = std::max(stats_.max_step_tokens, st.generated);
    }
    if (st.prompt_tokens > 0) {
      stats_.prefill_chunks += 1;
      stats_.prefill_tokens += static_cast<uint64_t>(st.prompt_tokens);
    }
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
        std::count_if(slots_.begin(), slots_.end(), [](const std::unique_ptr<Slot>& s) { return !s->generating; }));
    stats_.queued = static_cast<int>(queue_.size());
    stats_.cached_sequences = static_cast<int>(cached_.size());
    stats_.kv_blocks_used = kv_.blocks_used();
    stats_.kv_blocks_allocated = kv_.blocks_allocated();
    stats_.kv_sequences = kv_.n_sequences();
  }

  SchedulerParams p_;
  std::unique_ptr<ModelDrafter> drafter_;  // SchedulerParams::draft / draft_layers (null: none)
  DecodeLoop loop_;  // the token loop (engine/decode_loop.hpp); this scheduler is its DecodeHost
  int max_cached_ = 0;
  // Worker-thread state.
  std::vector<std::unique_ptr<Slot>> slots_;  // oldest first
  std::list<Cached> cached_;  // oldest first
  // Shared with submitters (mu_).
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::deque<std::function<void()>> tasks_;  // on_worker's, run at the start of step()
  int busy_ = 0;
  bool stopping_ = false;
  bool running_ = false;  // the worker thread runs (start() to stop())
  Stats stats_;
  std::thread worker_;
};

}  // namespace edgellm
