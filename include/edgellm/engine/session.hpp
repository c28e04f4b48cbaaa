// Session: one conversation on a loaded model — tokenize, prefill in chunks of n_batch, decode,
// sampler, streaming callback — with stop rules (EOS/EOT, stop strings, max_tokens, wall-clock
// deadline, cancellation), "sinks + window" eviction for endless generation, N continuations of one
// prompt decoded in one batch, and timing/memory stats. generate() and generate_parallel() drive the
// one token loop, DecodeLoop (engine/decode_loop.hpp), as BatchScheduler does. The model is shared
// read-only; each Session owns its KV cache, scratch and thread pool.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/engine/decode_loop.hpp"
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

// What a Session and a BatchScheduler both hold: the model and its tokenizer, a thread pool of
// p.n_threads, the paged KV cache p describes, and the forward pass's context on that pool.
class EngineCore {
 protected:
  EngineCore(std::shared_ptr<const LlamaModel> model, std::shared_ptr<const Tokenizer> tok, const SessionParams& p)
      : model_(std::move(model)), tok_(std::move(tok)), pool_(p.n_threads > 0 ? p.n_threads : default_thread_count()),
        kv_(model_->kv_params(p.n_ctx, p.kv_block_size, p.kv_max_bytes, p.kv_type, p.kv_recent_f32)), ctx_(&pool_) {}

  std::shared_ptr<const LlamaModel> model_;
  std::shared_ptr<const Tokenizer> tok_;
  ThreadPool pool_;
  PagedKvCache kv_;
  LlamaContext ctx_;
};

class Session : private EngineCore {
 public:
  Session(std::shared_ptr<const LlamaModel> model, std::shared_ptr<const Tokenizer> tok, const SessionParams& p = {})
      : EngineCore(std::move(model), std::move(tok), p), p_(p) {
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
  // The tokens in the session's sequence (between calls: generate() hands them to its stream while it runs).
  const std::vector<int32_t>& history() const { return history_; }
  ThreadPool& pool() { return pool_; }
  bool evicting() const { return p_.n_window > 0; }

  // Speculative decoding's draft source for generate() and generate_parallel() (besides prompt
  // lookup, GenerateParams::speculative.lookup): a draft model with the target's vocabulary
  // (checked: Error otherwise), or with n_layers > 0 the first n_layers layers of `draft` (null:
  // the session's own model, early exit). Its KV cache holds up to n_ctx + 64 tokens per sequence.
  // null and 0: none.
  void set_draft(std::shared_ptr<const LlamaModel> draft, int n_layers = 0) {
    drafter_.reset();
    if (!draft && n_layers == 0) return;
    if (!draft) draft = model_;
    if (draft != model_) {
      const Tokenizer dtok(Vocab::from_gguf(draft->file()));
      check_draft_vocab(*tok_, dtok, draft->file().path());
    }
    drafter_.reset(new ModelDrafter(std::move(draft), n_layers, &pool_, p_.n_ctx + 64, p_.n_batch));
  }
  const ModelDrafter* drafter() const { return drafter_.get(); }

  // Forgets the conversation (blocks return to the pool).
  void reset() {
    kv_.truncate(seq_, 0);
    history_.clear();
  }
  // For a prompt that repeats the conversation so far (a chat rendered again with a new turn):
  // keeps the longest prefix of the history that `tokens` start with, drops the rest of the
  // history, and returns the tokens still to evaluate (at least one, so that generate() has
  // logits to start from). Nothing is kept once eviction has dropped tokens.
  std::vector<int32_t> keep_common_prefix(const std::vector<int32_t>& tokens) {
    size_t n = 0;
    if (kv_.n_evicted(seq_) == 0 && history_.size() == static_cast<size_t>(n_past()))
      while (n < history_.size() && n < tokens.size() && history_[n] == tokens[n]) ++n;
    if (n == tokens.size() && n > 0) --n;
    if (n == 0) {
      reset();
      return tokens;
    }
    if (n < history_.size()) {
      kv_.truncate(seq_, static_cast<int>(n));
      history_.resize(n);
    }
    return std::vector<int32_t>(tokens.begin() + static_cast<long>(n), tokens.end());
  }

  // ---- saved sessions (engine/session_file.hpp) ----
  // What a saved state is valid for: this model's tensors and shape, and this session's n_ctx.
  SessionFingerprint fingerprint() const { return session_fingerprint(*model_, kv_, p_.n_ctx); }
  // The tokens held and their KV blocks (not the empty context), between generate() calls.
  SessionSnapshot snapshot() const { return snapshot_sequence(kv_, seq_, history_, fingerprint()); }
  // Replaces the conversation by a snapshot's (checked against this session: Error naming what
  // differs, the session unchanged). `name` names the source in messages.
  void restore(const SessionSnapshot& s, const std::string& name = "(memory)") {
    check_session_compatible(s, fingerprint(), kv_.type(), static_cast<uint32_t>(kv_.block_size()),
                             static_cast<uint32_t>(kv_.n_recent_f32()), name);
    reset();
    restore_sequence(kv_, seq_, s, fingerprint(), name);
    history_ = s.tokens;
  }
  // Writes the state to `path` atomically (a crash or a full disk leaves an older file intact).
  void save(const std::string& path) const { write_file_atomic(path, session_file_bytes(snapshot())); }
  // Reads a state saved by save(): another model, KV type, n_ctx or format version, and a
  // truncated or altered file, are an Error naming the file and what is wrong.
  void restore(const std::string& path) {
    const std::vector<uint8_t> bytes = read_file_bytes(path);
    restore(parse_session_file(bytes.data(), bytes.size(), path), path);
  }

  // Asks a running generate() (on another thread) to stop before its next token.
  void cancel() { cancel_.store(true); }

  // Evaluates tokens after the current history; returns the logits of the last one. With eviction
  // on, old tokens are dropped as needed; otherwise tokens that do not fit the context (or the KV
  // byte budget) throw Error and the session stays as it was.
  // Rows are computed by count (Batch::n_generated -1): one token decoded, several prefilled.
  // (Given tokens only: generate() reads its prompt through the DecodeLoop.)
  const float* eval(const std::vector<int32_t>& tokens, const std::function<bool()>& keep_going = {}) {
    EDGELLM_CHECK(!tokens.empty(), "session: nothing to evaluate");
    check_fits(tokens.size());
    const int start = n_past();
    const size_t hist = history_.size();
    const int evicted = kv_.n_evicted(seq_);
    Batch b;
    const size_t chunk = static_cast<size_t>(prompt_chunk());
    for (size_t i = 0; i < tokens.size(); i += chunk) {
      const size_t end = std::min(tokens.size(), i + chunk);
      try {
        make_room(seq_, static_cast<int>(end - i));
        const int pos = n_past();
        b.clear();
        for (size_t j = i; j < end; ++j) b.add(tokens[j], static_cast<int32_t>(pos + (j - i)), seq_, j + 1 == tokens.size());
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

  // Makes room for n more tokens of sequence s: evicts (sinks + window) when on, else throws Error
  // naming the limit that is reached.
  void make_room(int s, int n) { make_room(s, n, s == seq_ ? &history_ : nullptr); }

  // Generates a continuation of `prompt`; on_text receives each piece of valid UTF-8 as it is
  // produced and may return false to stop. One stream on the session's own sequence, driven by
  // DecodeLoop: the prompt is read n_batch tokens a step, then one token a step.
  GenerateResult generate(const std::string& prompt, const GenerateParams& gp,
                          const std::function<bool(const std::string&)>& on_text = {}) {
    Sampler::validate(gp.sampler);  // before the prompt is evaluated: a rejected call changes nothing
    validate(gp.speculative);
    cancel_.store(false);
    DecodeStream st;
    start_prompt(st, prompt, gp);
    return run_one(st, on_text);
  }

  // generate() for a prompt already tokenized (a chat rendered with ChatTemplate::tokenize, whose
  // people's text stays text): the tokens are read after the history as they are (no BOS added).
  GenerateResult generate(const std::vector<int32_t>& prompt_tokens, const GenerateParams& gp,
                          const std::function<bool(const std::string&)>& on_text = {}) {
    Sampler::validate(gp.sampler);
    validate(gp.speculative);
    for (int32_t id : prompt_tokens)
      EDGELLM_CHECK(id >= 0 && id < tok_->n_vocab(), "generate: prompt token id ", id, " is not in the vocabulary of ",
                    tok_->n_vocab());
    cancel_.store(false);
    DecodeStream st;
    start_prompt(st, prompt_tokens, gp);
    return run_one(st, on_text);
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
    validate(gp.speculative);
    cancel_.store(false);
    // The prompt: a stream that ends when it is read (max_tokens 0), its last logits row kept.
    DecodeStream head;
    GenerateParams read_only = gp;
    read_only.max_tokens = 0;
    start_prompt(head, prompt, read_only);
    std::vector<DecodeStream> st(static_cast<size_t>(n_seq));
    Host host(*this, [&](const DecodeStream& d, const std::string& piece) {
      return &d == &head || on_text(static_cast<int>(&d - st.data()), piece);  // head: the prompt, no text
    }, !on_text);
    DecodeLoop loop = make_loop(host);
    run(loop, {&head}, head);
    if (!head.generating) return std::vector<GenerateResult>(static_cast<size_t>(n_seq), head.r);  // cancelled, deadline
    std::vector<DecodeStream*> all;
    try {
      for (int i = 0; i < n_seq; ++i) {
        DecodeStream& x = st[static_cast<size_t>(i)];
        x.gp = gp;
        x.gp.sampler.seed = gp.sampler.seed + static_cast<uint64_t>(i);
        x.clock = head.clock;
        x.held = history_;
        x.seq = kv_.fork(seq_);
        all.push_back(&x);
        loop.start_generating(x, head.logits.data());
        x.r.n_prompt = head.r.n_prompt;
        x.r.prefill_ms = head.r.prefill_ms;
      }
      while (std::any_of(all.begin(), all.end(), [](const DecodeStream* x) { return !x->done; })) {
        loop.step(all);
        for (DecodeStream* x : all)
          if (x->error) std::rethrow_exception(x->error);
      }
    } catch (...) {
      for (DecodeStream* x : all)
        if (!x->done) kv_.remove_sequence(x->seq);  // an ended one's went with it (Host::finished)
      throw;
    }
    std::vector<GenerateResult> out;
    for (auto& x : st) out.push_back(std::move(x.r));
    return out;
  }

 private:
  // The session's side of the DecodeLoop: eviction (make_room), its cancel flag, the caller's
  // on_text (pieces that are not empty), continuations' sequences removed when they end.
  class Host final : public DecodeHost {
   public:
    Host(Session& s, std::function<bool(const DecodeStream&, const std::string&)> out, bool silent)
        : s_(s), out_(std::move(out)), silent_(silent) {}
    void make_room(DecodeStream& d, int n) override { s_.make_room(d.seq, n, &d.held); }
    bool cancelled(DecodeStream&) override { return s_.cancel_.load(); }
    bool emit(DecodeStream& d, const std::string& piece, const TokenAlternatives*) override {
      return piece.empty() || silent_ || out_(d, piece);
    }
    void finished(DecodeStream& d) override {
      if (d.seq != s_.seq_) s_.kv_.remove_sequence(d.seq);
    }

   private:
    Session& s_;
    std::function<bool(const DecodeStream&, const std::string&)> out_;
    bool silent_;
  };

  DecodeLoop make_loop(Host& host) {
    DecodeLoopParams lp;
    lp.n_ctx = evicting() ? 0 : p_.n_ctx;
    lp.chunk = prompt_chunk();
    lp.no_room_is_context_full = false;  // the KV byte budget is an Error (or eviction makes room)
    lp.drafter = drafter_.get();
    return DecodeLoop(*model_, *tok_, ctx_, kv_, host, lp);
  }

  // With eviction a chunk is at most what always fits after an eviction.
  int prompt_chunk() const { return evicting() ? std::min(p_.n_batch, max_chunk_) : p_.n_batch; }

  void check_fits(size_t n) {
    if (static_cast<int64_t>(n) > p_.n_ctx)
      throw_error("prompt of ", n, " tokens is longer than the context (n_ctx = ", p_.n_ctx, ")");
    if (!evicting() && n_past() + static_cast<int64_t>(n) > p_.n_ctx)
      throw_error("prompt of ", n, " tokens does not fit the context: ", n_past(), " tokens held, n_ctx = ", p_.n_ctx);
  }

  // A stream on the session's own sequence reading `prompt` after the history (which it holds
  // while it runs: run() gives it back). An empty prompt continues the history: its last token is
  // read again for its logits.
  // Runs the one stream on the session's sequence to its end.
  GenerateResult run_one(DecodeStream& st, const std::function<bool(const std::string&)>& on_text) {
    Host host(*this, [&](const DecodeStream&, const std::string& piece) { return on_text(piece); }, !on_text);
    DecodeLoop loop = make_loop(host);
    run(loop, {&st}, st);
    return std::move(st.r);
  }

  void start_prompt(DecodeStream& st, const std::string& prompt, const GenerateParams& gp) {
    const bool use_bos = gp.add_bos && history_.empty() && tok_->add_bos();
    start_prompt(st, tok_->encode(prompt, use_bos, gp.parse_special), gp);
  }
  void start_prompt(DecodeStream& st, std::vector<int32_t> toks, const GenerateParams& gp) {
    st.r.n_prompt = static_cast<int>(toks.size());
    if (toks.empty()) {
      EDGELLM_CHECK(!history_.empty(), "generate: the prompt is empty and there is no history to continue");
      toks.push_back(history_.back());
      kv_.truncate(seq_, n_past() - 1);
      history_.pop_back();
    }
    check_fits(toks.size());
    st.seq = seq_;
    st.prompt = std::move(toks);
    st.gp = gp;
  }

  // Steps `streams` until `own` (the stream on the session's sequence) is done, holding the
  // history in it meanwhile. A stream that failed throws its Error; a prompt that failed part way
  // is taken back out of the cache, as eval() does, unless eviction dropped tokens meanwhile.
  void run(DecodeLoop& loop, const std::vector<DecodeStream*>& streams, DecodeStream& own) {
    const int start = n_past();
    const size_t hist = history_.size();
    const int evicted = kv_.n_evicted(seq_);
    own.held = std::move(history_);
    try {
      while (!own.done) loop.step(streams);
    } catch (...) {
      history_ = std::move(own.held);
      throw;
    }
    history_ = std::move(own.held);
    if (!own.error) return;
    if (!own.generating && kv_.n_evicted(seq_) == evicted) {
      kv_.truncate(seq_, start);
      history_.resize(hist);
    }
    std::rethrow_exception(own.error);
  }

  // make_room with the token list mirroring sequence s (evicted tokens are dropped from it too,
  // so an endless generation keeps memory flat).
  void make_room(int s, int n, std::vector<int32_t>* held) {
    if (kv_.fits(s, n)) return;
    if (evicting()) {
      const KvEviction e = model_->evict(kv_, s, p_.n_keep, p_.n_window);
      if (held && e.count > 0 && static_cast<size_t>(e.begin + e.count) <= held->size())
        held->erase(held->begin() + e.begin, held->begin() + e.begin + e.count);
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

  SessionParams p_;
  int seq_ = 0;
  int max_chunk_ = 0;  // with eviction: n_ctx minus the most an eviction keeps
  std::vector<int32_t> history_;
  std::atomic<bool> cancel_{false};
  std::unique_ptr<ModelDrafter> drafter_;
};

}  // namespace edgellm
