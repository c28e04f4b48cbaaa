// DecodeLoop: the one token loop. Session::generate (one sequence), Session::generate_parallel (N
// continuations of one prompt) and BatchScheduler (the server's requests) all drive it: each of
// their rounds is one DecodeLoop::step() over their streams (DecodeStream: one KV sequence, its
// prompt still to read, sampler, stop rules, result). A step is one forward pass, in named parts:
//   ended_by_client -> prompt_chunk -> next_token (per generating stream: sample, n_probs, stop
//   rules, deadline, emit) -> build_batch (rows by role) -> forward (with the retry without the
//   prompt chunk) -> scatter (logits rows, timings, prompt progress).
// What differs between the drivers is a DecodeHost: where a stream's sequence comes from, how room
// is made (eviction, dropping cached sequences), the cancel probe, where text goes, what happens to
// a finished stream's sequence. Also here: the generation types (GenerateParams, GenerateResult,
// StopReason), StopMatcher, take_token and finish_text.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/engine/speculative.hpp"
#include "edgellm/grammar/constrained_sampler.hpp"
#include "edgellm/kv/paged_kv_cache.hpp"
#include "edgellm/model/llama.hpp"
#include "edgellm/runtime/memory_stats.hpp"
#include "edgellm/runtime/timer.hpp"
#include "edgellm/text/sampler.hpp"
#include "edgellm/text/tokenizer.hpp"

namespace edgellm {

struct GenerateParams {
  int max_tokens = 128;            // tokens to generate at most (< 0: until another rule stops)
  SamplerParams sampler;           // temperature 0 = greedy
  std::vector<std::string> stop;   // stop strings (not included in the output)
  double deadline_ms = 0;          // wall-clock budget for the whole call (0 = none)
  bool ignore_eos = false;         // keep going past end-of-generation tokens
  bool add_bos = true;             // prepend BOS when the vocabulary uses one (first call only)
  bool parse_special = true;       // match control tokens written in the prompt text
  SpeculativeParams speculative;   // drafts verified in one pass (engine/speculative.hpp)
  GrammarParams grammar;           // what the text must match (grammar/constrained_sampler.hpp; none: free)
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
  // Speculative decoding: target passes that evaluated a generated token of this continuation,
  // tokens drafted for them and drafts accepted (each accepted draft is a token without a pass).
  int n_passes = 0;
  int n_drafted = 0;
  double grammar_ms = 0;            // in the grammar's masks and steps (GenerateParams::grammar)
  int n_accepted = 0;
  double acceptance_rate() const { return n_drafted > 0 ? static_cast<double>(n_accepted) / n_drafted : 0; }
  double tokens_per_pass() const { return n_passes > 0 ? static_cast<double>(n_passes + n_accepted) / n_passes : 0; }
  double prefill_tps() const { return prefill_ms > 0 ? n_prompt * 1e3 / prefill_ms : 0; }
  double decode_tps() const { return decode_ms > 0 ? token_ms.size() * 1e3 / decode_ms : 0; }
};

// One generated token's alternatives (n_probs > 0): the most likely tokens of the distribution the
// sampler drew from, most likely first.
struct TokenAlternatives {
  int32_t id = 0;
  std::vector<TokenProb> top;
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
// continuation goes on. DecodeLoop::next_token's stop rules.
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

// One sequence decoded by DecodeLoop. The owner fills the first block and hands the stream to
// step() until `done`; drivers with more state per stream (the scheduler's Job) derive from it.
struct DecodeStream {
  int seq = -1;                  // KV sequence; -1: DecodeHost::assign_sequence picks it at the first chunk
  std::vector<int32_t> prompt;   // tokens to evaluate before generating
  size_t n_read = 0;             // of them, already in the sequence (the rest is read a chunk a step)
  std::vector<int32_t> held;     // the sequence's tokens, in order (what the sampler's penalties see)
  GenerateParams gp;
  int n_probs = 0;               // alternatives reported per generated token (DecodeHost::emit)
  double waited_ms = 0;          // time before `clock` started that counts against gp.deadline_ms
  Timer clock;                   // ttft_ms, prefill_ms and the deadline count from it

  // The loop's state.
  GenerateResult r;
  bool generating = false;       // the prompt is read: the next step samples from `logits`
  bool done = false;             // ended: r.reason says why, or `error` when it failed
  std::exception_ptr error;
  std::vector<float> logits;     // the row the next token is sampled from
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<GrammarConstraint> grammar;  // gp.grammar's state for this stream (null: free)
  std::unique_ptr<StreamDecoder> decoder;
  std::unique_ptr<StopMatcher> stops;
  int step = 0;                  // tokens sampled so far
  double worst_token_ms = 0;     // recent worst step (slowly forgetting), for the deadline
  int32_t next = -1;             // this step's sampled token, evaluated by this step's forward pass
  std::vector<int32_t> drafts;   // speculative: tokens drafted after `next`, evaluated in the same pass
  DraftDistributions draft_dist; // speculative: the drafts' distributions when sampled (else empty)
  std::mt19937_64 spec_rng;      // speculative: rejection sampling of sampled drafts
  int32_t pending = -1;          // speculative: the token sampled from the row that rejected a draft
  int n_draft = -1;              // adaptive draft length (-1: not started)
};

// What a driver decides for its streams.
class DecodeHost {
 public:
  virtual ~DecodeHost() = default;
  // s's first prompt chunk is due and s.seq < 0: set s.seq, with s.n_read / s.held saying how much
  // of the prompt the sequence already holds. Throws Error to fail the stream.
  virtual void assign_sequence(DecodeStream&) { throw_error("decode: stream without a KV sequence"); }
  // Room in s's sequence for n more tokens (evicting, dropping cached sequences: s.held follows);
  // throws Error naming the limit when there is none.
  virtual void make_room(DecodeStream& s, int n) = 0;
  // True: s ends (Cancelled) before its next token or prompt chunk. Asked once per step.
  virtual bool cancelled(DecodeStream& s) = 0;
  // A token's text (may be empty) with its alternatives (n_probs > 0) or, at the end, the held-back
  // tail (alt null). False: the consumer cancels.
  virtual bool emit(DecodeStream& s, const std::string& piece, const TokenAlternatives* alt) = 0;
  // s ended (s.done; s.error when it failed): its sequence is the host's to keep or remove.
  virtual void finished(DecodeStream& s) = 0;
};

struct DecodeLoopParams {
  int n_ctx = 0;        // per sequence: a generated token that fills it ends the stream (0: eviction makes room)
  int chunk = 512;      // prompt tokens read per step (one stream's)
  // A generated token that finds no room (KV byte budget): true, its stream ends with ContextFull
  // (the server's "length"); false, the stream fails with make_room's Error (Session throws it).
  bool no_room_is_context_full = false;
  Drafter* drafter = nullptr;  // draft model / early exit for streams that speculate (null: lookup only)
};

// What one step evaluated (the scheduler's statistics).
struct DecodeStepStats {
  int generated = 0;      // generated-token rows in the forward pass
  int prompt_tokens = 0;  // prompt rows
  double forward_ms = 0;
};

class DecodeLoop {
 public:
  DecodeLoop(const LlamaModel& model, const Tokenizer& tok, LlamaContext& ctx, PagedKvCache& kv, DecodeHost& host,
             const DecodeLoopParams& p)
      : model_(model), tok_(tok), ctx_(ctx), kv_(kv), host_(host), p_(p), n_vocab_(model.config().n_vocab) {
    EDGELLM_CHECK(p.chunk >= 1, "decode: the prompt chunk must be >= 1 token, got ", p.chunk);
  }

  // One forward pass over `streams` (oldest first; done ones are skipped): the next token of every
  // generating stream and the next prompt chunk of the oldest stream still reading its prompt.
  // Streams that end are marked done and handed to DecodeHost::finished.
  DecodeStepStats step(const std::vector<DecodeStream*>& streams) {
    DecodeStepStats st;
    ended_by_client(streams);
    // The chunk's sequence is set up first, so a fork sees no token of this step.
    DecodeStream* pre = prompt_chunk(streams);
    planned_.clear();
    for (DecodeStream* s : streams)
      if (!s->done && s->generating && next_token(*s)) {
        try {
          draft(*s);
        } catch (const std::exception&) {
          fail(*s, std::current_exception());
          continue;
        }
        planned_.push_back(Planned{s, 0, 1 + static_cast<int>(s->drafts.size()), 0});
      }
    // Speculative decoding: a planned stream's drafts are more rows of it (all wanting logits);
    // scatter() samples each row in turn, keeps the drafts up to the first the samples disagree
    // with and truncates the KV sequence past it, the disagreeing sample being the next token.
    const size_t pre_end = pre ? std::min(pre->prompt.size(), pre->n_read + static_cast<size_t>(p_.chunk)) : 0;
    build_batch(pre, pre_end);
    if (b_.size() == 0) return st;
    Timer t;
    std::exception_ptr err = forward();  // on error the cache is left as it was
    if (err && pre && !planned_.empty()) {
      // The prompt chunk fails alone when the generated tokens go through without it.
      fail(*pre, err);
      pre = nullptr;
      b_.tokens.resize(static_cast<size_t>(b_.n_generated));
      b_.pos.resize(b_.tokens.size());
      b_.seq.resize(b_.tokens.size());
      b_.logits.resize(b_.tokens.size());
      err = forward();
    }
    if (err) {
      for (const Planned& x : planned_) fail(*x.s, err);
      if (pre) fail(*pre, err);
      return st;
    }
    st.forward_ms = t.ms();
    st.generated = b_.n_generated;
    st.prompt_tokens = pre ? static_cast<int>(pre_end - pre->n_read) : 0;
    scatter(pre, pre_end, st.forward_ms);
    return st;
  }

  // The draft model / early exit for streams that speculate without prompt lookup (null: none).
  void set_drafter(Drafter* d) { p_.drafter = d; }

  // Starts s generating from a logits row (e.g. a fork of a prompt another stream has read).
  void start_generating(DecodeStream& s, const float* logits) {
    s.logits.assign(logits, logits + n_vocab_);
    s.r.prefill_ms = s.clock.ms();
    s.sampler.reset(new Sampler(s.gp.sampler));
    s.grammar.reset(s.gp.grammar ? new GrammarConstraint(s.gp.grammar) : nullptr);
    for (int32_t t : s.held) s.sampler->accept(t);
    s.decoder.reset(new StreamDecoder(tok_));
    s.stops.reset(new StopMatcher(s.gp.stop));
    s.n_read = s.prompt.size();
    s.pending = -1;
    s.n_draft = -1;
    s.spec_rng.seed(s.gp.sampler.seed ^ 0x9E3779B97F4A7C15ULL);
    s.generating = true;
  }

  // Ends s: the held-back text goes out, then DecodeHost::finished.
  void end(DecodeStream& s, StopReason reason) {
    if (s.done) return;
    s.r.reason = reason;
    if (s.decoder && s.stops) {
      const std::string tail = finish_text(*s.decoder, *s.stops);
      s.r.text += tail;
      host_.emit(s, tail, nullptr);
    }
    if (!s.generating) s.r.prefill_ms = s.clock.ms();
    s.r.peak_rss_bytes = peak_rss_bytes();
    s.done = true;
    host_.finished(s);
  }
  void fail(DecodeStream& s, std::exception_ptr e) {
    if (s.done) return;
    s.error = std::move(e);
    s.done = true;
    host_.finished(s);
  }

  // n_probs: the n most likely tokens of the distribution `sampler` drew `id` from.
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

 private:
  // A generating stream's rows in this step's batch: n_rows tokens (`next`, then its drafts) from
  // row first_row, the first at position n0.
  struct Planned {
    DecodeStream* s;
    int first_row;
    int n_rows;
    int n0;
  };

  static bool past_deadline(const DecodeStream& s, double extra_ms) {
    return s.gp.deadline_ms > 0 && s.waited_ms + s.clock.ms() + extra_ms > s.gp.deadline_ms;
  }

  // Cancellation: a stream whose host says so ends before its next token or chunk.
  void ended_by_client(const std::vector<DecodeStream*>& streams) {
    for (DecodeStream* s : streams)
      if (!s->done && host_.cancelled(*s)) end(*s, StopReason::Cancelled);
  }

  // The oldest stream still reading its prompt, with its sequence and room for its next chunk; a
  // stream past its deadline ends before its chunk.
  DecodeStream* prompt_chunk(const std::vector<DecodeStream*>& streams) {
    for (DecodeStream* s : streams) {
      if (s->done || s->generating) continue;
      if (past_deadline(*s, 0)) {
        end(*s, StopReason::Deadline);
        continue;
      }
      try {
        if (s->seq < 0) host_.assign_sequence(*s);
        EDGELLM_CHECK(s->n_read < s->prompt.size(), "decode: a stream with no prompt token left to read");
        const size_t n = std::min(s->prompt.size() - s->n_read, static_cast<size_t>(p_.chunk));
        host_.make_room(*s, static_cast<int>(n));
      } catch (const std::exception&) {
        fail(*s, std::current_exception());
        continue;
      }
      return s;
    }
    return nullptr;
  }

  // A generating stream's next token: sampled from its logits row (with n_probs' alternatives),
  // through the stop rules (take_token: EOS, stop strings, max tokens, context) and emitted; then
  // the deadline (stop when evaluating it would likely end past it) and room for it in the cache.
  // False: the stream ended.
  bool next_token(DecodeStream& s) {
    if (s.gp.max_tokens == 0) {
      end(s, StopReason::MaxTokens);
      return false;
    }
    // A token sampled by the last pass's verification (the row that rejected a draft) is this one.
    const float* row;
    try {
      row = constrained(s, s.logits.data());
    } catch (const std::exception&) {
      fail(s, std::current_exception());
      return false;
    }
    const int32_t id = s.pending >= 0 ? s.pending : s.sampler->sample(row, n_vocab_);
    s.pending = -1;
    if (s.step == 0) s.r.ttft_ms = s.clock.ms();
    if (!keep_token(s, row, id, kv_.n_tokens(s.seq))) {
      end(s, s.r.reason);
      return false;
    }
    if (past_deadline(s, s.worst_token_ms)) {
      end(s, StopReason::Deadline);
      return false;
    }
    try {
      host_.make_room(s, 1);
    } catch (const std::exception&) {
      if (p_.no_room_is_context_full)
        end(s, StopReason::ContextFull);
      else
        fail(s, std::current_exception());
      return false;
    }
    s.next = id;
    return true;
  }

  // A sampled token through the stop rules (take_token) and out to the host, with its alternatives
  // from the row it was sampled from; n_held: the sequence's tokens before it. False: the stream
  // ends (s.r.reason says why; the caller ends it).
  bool keep_token(DecodeStream& s, const float* row, int32_t id, int n_held) {
    TokenAlternatives alt;
    if (s.n_probs > 0) alt = alternatives(*s.sampler, row, n_vocab_, id, s.n_probs);
    s.sampler->accept(id);
    if (s.grammar) {
      try {
        const Timer t;
        s.grammar->accept(id);
        s.r.grammar_ms += t.ms();
      } catch (const std::exception&) {
        fail(s, std::current_exception());
        return false;
      }
    }
    const bool go_on = take_token(s.r, tok_, *s.decoder, *s.stops, s.gp, id, s.step, n_held, p_.n_ctx, false,
                                  [&](const std::string& piece) { return host_.emit(s, piece, s.n_probs > 0 ? &alt : nullptr); });
    ++s.step;
    return go_on;
  }

  // The row s samples from: its grammar's mask applied (refused tokens at -inf; near max_tokens
  // only the tokens that close what is open), or `row` itself.
  const float* constrained(DecodeStream& s, const float* row) const {
    if (!s.grammar) return row;
    const Timer t;
    const float* out = s.grammar->apply(row, n_vocab_, s.gp.max_tokens >= 0 ? s.gp.max_tokens - s.step : -1);
    s.r.grammar_ms += t.ms();
    return out;
  }

  // The drafts of a stream about to evaluate s.next: none unless it speculates (a draft source and
  // n_max > 0); at most what max_tokens can still use (a token that reaches it is never evaluated)
  // and what fits its sequence without eviction; none when fewer than n_min.
  void draft(DecodeStream& s) {
    s.drafts.clear();
    s.draft_dist.clear();
    const SpeculativeParams& sp = s.gp.speculative;
    Drafter* d = sp.lookup ? &lookup_ : p_.drafter;
    if (!d || sp.n_max <= 0) return;
    if (s.n_draft < 0) s.n_draft = sp.n_max;
    int k = sp.adaptive ? s.n_draft : sp.n_max;
    if (s.gp.max_tokens >= 0) k = std::min(k, s.gp.max_tokens - s.step - 1);
    while (k > 0 && !kv_.fits(s.seq, 1 + k)) --k;
    if (k <= 0 || k < sp.n_min) return;
    s.held.push_back(s.next);  // the drafter sees the sequence with the token this pass evaluates
    try {
      d->draft(s.seq, s.held, k, sp, s.gp.sampler, s.drafts, &s.draft_dist);
    } catch (...) {
      s.held.pop_back();
      throw;
    }
    s.held.pop_back();
    if (static_cast<int>(s.drafts.size()) > k) s.drafts.resize(static_cast<size_t>(k));
    if (static_cast<int>(s.drafts.size()) < sp.n_min) s.drafts.clear();
    if (s.draft_dist.size() != s.drafts.size()) s.draft_dist.clear();  // one-hot drafts
  }

  // The drafts of a pass in order: row i's sample (the stream's sampler, as plain decoding would
  // draw it) accepts draft i when equal — the token then goes through the stop rules as if it had
  // been sampled in a step of its own; the first sample that differs is the stream's next token
  // (pending). The last row that counts is the one the stream samples from next; the KV sequence
  // keeps the tokens that were accepted (a token that ended the stream is not kept, as plain
  // decoding never evaluates it).
  void verify(DecodeStream& s, const Planned& x) {
    const int k = x.n_rows - 1;
    s.r.n_drafted += k;
    int i = 0;
    for (; i < k; ++i) {
      // With a grammar, the row is masked in the state the accepted drafts left: a draft the
      // grammar refuses is never sampled, so it is rejected like any other disagreeing draft.
      const float* row = constrained(s, ctx_.logits(x.first_row + i));
      const int32_t d = s.drafts[static_cast<size_t>(i)];
      int32_t id = d;
      if (s.draft_dist.empty())
        id = s.sampler->sample(row, n_vocab_);  // one-hot draft: accepted when the plain sample equals it
      else  // sampled draft: id stays d when accepted, else the token drawn from the residual
        accept_draft(s.sampler->probabilities(row, n_vocab_), s.draft_dist[static_cast<size_t>(i)], d, s.spec_rng, id);
      if (id != d) {
        s.pending = id;
        break;
      }
      ++s.r.n_accepted;
      const int n_held = x.n0 + 1 + i;
      const bool go_on = keep_token(s, row, id, n_held);
      if (!go_on || past_deadline(s, 0)) {
        kv_.truncate(s.seq, n_held);
        end(s, go_on ? StopReason::Deadline : s.r.reason);
        return;
      }
      s.held.push_back(id);
      s.r.token_ms.push_back(0);
    }
    const float* row = ctx_.logits(x.first_row + i);
    s.logits.assign(row, row + n_vocab_);
    if (i < k) kv_.truncate(s.seq, x.n0 + 1 + i);
    if (s.gp.speculative.adaptive && k > 0) {  // all accepted: one more next time; else what was accepted + 1
      const int lo = std::max(1, s.gp.speculative.n_min);
      s.n_draft = std::max(lo, std::min(s.gp.speculative.n_max, i == k ? k + 1 : i + 1));
    }
  }

  // Rows by role (Batch::n_generated): the generated tokens first (decoded), then the prompt chunk
  // (prefilled), so each token's numbers do not depend on what else is in the batch.
  void build_batch(const DecodeStream* pre, size_t pre_end) {
    b_.clear();
    for (Planned& x : planned_) {
      x.first_row = b_.size();
      x.n0 = kv_.n_tokens(x.s->seq);
      b_.add(x.s->next, x.n0, x.s->seq, true);
      for (size_t j = 0; j < x.s->drafts.size(); ++j)
        b_.add(x.s->drafts[j], x.n0 + 1 + static_cast<int32_t>(j), x.s->seq, true);
    }
    b_.n_generated = b_.size();
    if (!pre) return;
    const int32_t pos0 = kv_.n_tokens(pre->seq);
    for (size_t j = pre->n_read; j < pre_end; ++j)
      b_.add(pre->prompt[j], pos0 + static_cast<int32_t>(j - pre->n_read), pre->seq, j + 1 == pre->prompt.size());
  }

  std::exception_ptr forward() {
    try {
      model_.forward(ctx_, kv_, b_);
      return nullptr;
    } catch (const std::exception&) {
      return std::current_exception();
    }
  }

  // The pass's results back to the streams: each generated token's logits row becomes the row its
  // stream samples from next; the chunk joins its sequence, and a prompt read to its end starts
  // its stream generating.
  void scatter(DecodeStream* pre, size_t pre_end, double dt) {
    for (const Planned& x : planned_) {
      DecodeStream& s = *x.s;
      s.held.push_back(s.next);
      s.r.token_ms.push_back(dt);
      s.r.decode_ms += dt;
      s.worst_token_ms = std::max(s.worst_token_ms * 0.9, dt);
      ++s.r.n_passes;
      verify(s, x);
    }
    if (!pre) return;
    pre->held.insert(pre->held.end(), pre->prompt.begin() + static_cast<std::ptrdiff_t>(pre->n_read),
                     pre->prompt.begin() + static_cast<std::ptrdiff_t>(pre_end));
    pre->n_read = pre_end;
    if (pre_end == pre->prompt.size()) start_generating(*pre, ctx_.logits(b_.n_generated));
  }

  const LlamaModel& model_;
  const Tokenizer& tok_;
  LlamaContext& ctx_;
  PagedKvCache& kv_;
  DecodeHost& host_;
  DecodeLoopParams p_;
  int n_vocab_;
  Batch b_;
  std::vector<Planned> planned_;
  LookupDrafter lookup_;
};

}  // namespace edgellm
