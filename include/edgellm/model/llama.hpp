// LlamaModel: a loaded LLaMA-family model (llama, qwen2, qwen3: the table of model/arch.hpp;
// read-only after load, shareable between threads) and forward() over a batch of tokens of one or
// more sequences, through the KernelTable and thread pool, with K/V kept in a PagedKvCache.
// Scratch buffers live in a LlamaContext (one per thread of use).
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/matmul.hpp"
#include "edgellm/kernels/select.hpp"
#include "edgellm/kv/paged_kv_cache.hpp"
#include "edgellm/model/llama_config.hpp"
#include "edgellm/model/llama_weights.hpp"
#include "edgellm/runtime/thread_pool.hpp"

namespace edgellm {

// Tokens to evaluate: token i goes to position pos[i] of sequence seq[i]; logits are produced for
// the tokens whose `logits` flag is set, in batch order. Each sequence's positions must continue
// where its cache ends (n_tokens, n_tokens + 1, ...).
struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pos;
  std::vector<int32_t> seq;
  std::vector<uint8_t> logits;
  // Which arithmetic computes each row (kernels/matmul.hpp, matmul's n_decode): -1, by count (one
  // token is decoded, several are prefilled); n >= 0, by role: the first n rows are tokens the
  // model generated (decoded), the rest prompt tokens (prefilled), so a token's numbers do not
  // depend on what else is in the batch. Session and BatchScheduler say roles.
  int n_generated = -1;

  void add(int32_t token, int32_t position, int32_t sequence, bool want_logits) {
    tokens.push_back(token);
    pos.push_back(position);
    seq.push_back(sequence);
    logits.push_back(want_logits ? 1 : 0);
  }
  void clear() {
    tokens.clear();
    pos.clear();
    seq.clear();
    logits.clear();
    n_generated = -1;
  }
  int size() const { return static_cast<int>(tokens.size()); }
};

// Per-use scratch (the "RunState"): activations of the current batch and the logits it produced.
class LlamaContext {
 public:
  explicit LlamaContext(ThreadPool* pool = nullptr) : pool_(pool) {}
  ThreadPool* pool() const { return pool_; }
  void set_pool(ThreadPool* pool) { pool_ = pool; }
  // Logits of the last forward(): [n_outputs][n_vocab].
  const float* logits(int i = 0) const { return logits_.data() + static_cast<size_t>(i) * n_vocab_; }
  int n_outputs() const { return n_outputs_; }
  // Hidden-state output (embeddings, engine/embedding.hpp): while on, forward() stops after the
  // final RMSNorm of the flagged tokens, leaves those rows in hidden(i) ([n_outputs][n_embd]) and
  // computes no logits. Off (the default): logits as usual.
  void set_hidden_output(bool on) { hidden_output_ = on; }
  bool hidden_output() const { return hidden_output_; }
  const float* hidden(int i = 0) const { return out_in_.data() + static_cast<size_t>(i) * n_embd_; }

  // Optional: called on the forward() thread before each weight matrix product with the weight's
  // tensor name and its input rows x [n_rows, n_cols] (edgellm-imatrix collects importance
  // matrices this way). Empty (the default): not called.
  using MatmulObserver = std::function<void(const std::string& weight, const float* x, int n_rows, int n_cols)>;
  void set_matmul_observer(MatmulObserver observer) { observer_ = std::move(observer); }

 private:
  friend class LlamaModel;
  ThreadPool* pool_;
  MatmulObserver observer_;
  MatmulScratch mm_scratch_;   // quantized activation rows
  std::vector<float> x_;       // [n_tok, n_embd] residual stream
  std::vector<float> xn_;      // [n_tok, max(n_embd, q_dim)] normed input / attention output
  std::vector<float> tmp_;     // [n_tok, n_embd] projection output before the residual add
  std::vector<float> q_;       // [n_tok, q_dim]
  std::vector<float> k_;       // [n_tok, kv_dim]
  std::vector<float> v_;       // [n_tok, kv_dim]
  std::vector<float> gate_;    // [n_tok, n_ff]
  std::vector<float> up_;      // [n_tok, n_ff]
  std::vector<float> cs_;      // [n_tok, n_rot] rope cos/sin pairs
  std::vector<float> out_in_;  // [n_outputs, n_embd] final-normed rows that need logits
  std::vector<std::vector<float>> attn_scratch_;  // per thread: attention scratch (queries, scores, K/V block, output)
  std::vector<float> logits_;  // [n_outputs, n_vocab]
  std::vector<float> out_tmp_; // [n_outputs, rows] one row chunk of a streamed output matrix
  int n_outputs_ = 0;
  int n_vocab_ = 0;
  int n_embd_ = 0;
  bool hidden_output_ = false;
};

class LlamaModel {
 public:
  // Loads (memory-maps) a GGUF file and checks everything forward() will use. opt (LoadOptions,
  // model/residency.hpp): by default the memory budget is detected, and a model larger than it
  // keeps what fits resident and streams the rest from storage on every forward pass
  // (model/weight_stream.hpp; forward passes of such a model are serialized); a model that fits
  // loads all resident, as with LoadOptions::all_resident(). opt.repack: copy the matrices whose
  // type the kernel table can interleave (kernels/api.hpp PackedFormat) into that form — faster
  // decode and prefill, same memory (the file pages they came from are released); false keeps
  // every matrix in the mapped file. Throws Error naming the minimum budget below it.
  static std::shared_ptr<const LlamaModel> load(const std::string& path, const LoadOptions& opt = {}) {
    return std::make_shared<const LlamaModel>(GgufFile::open(path), opt);
  }
  explicit LlamaModel(GgufFile file, const LoadOptions& opt = {})
      : file_(std::move(file)),
        kt_(opt.kernels ? opt.kernels : &kernels()),
        cfg_(LlamaConfig::from_gguf(file_)),
        w_(LlamaWeights::from_gguf(file_, cfg_, *kt_, opt)) {
    w_.start_stream(file_, *kt_, cfg_, opt);  // the stream's units point at w_'s matrices: not movable from here on
    LoadProgress(opt.progress, 0).finish();
  }
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  // Memory plan of the load (streaming or not) and the stream's counters (null when all resident).
  const ResidencyPlan& residency() const { return w_.residency; }
  const WeightStream* weight_stream() const { return w_.stream.get(); }

  const LlamaConfig& config() const { return cfg_; }
  const GgufFile& file() const { return file_; }
  const LlamaWeights& weights() const { return w_; }
  const KernelTable& kernel_table() const { return *kt_; }

  // KV cache shape for this model; type F32, F16 or Q8_0 (Q8_0 needs head_dim % 32 == 0), the last
  // n_recent_f32 positions optionally also kept in F32.
  KvCacheParams kv_params(int n_ctx, int block_size = 16, size_t max_bytes = 0, DType type = DType::F32,
                          int n_recent_f32 = 0) const {
    KvCacheParams p;
    p.n_layer = cfg_.n_layer;
    p.n_kv_head = cfg_.n_head_kv;
    p.head_dim = cfg_.head_dim;
    p.block_size = block_size;
    p.max_tokens = n_ctx;
    p.max_bytes = max_bytes;
    p.type = type;
    p.n_recent_f32 = n_recent_f32;
    return p;
  }

  // "Sinks + window" eviction of one sequence (see PagedKvCache::evict_sink_window); the keys
  // after the dropped blocks are rotated back by the number of dropped positions, so the kept
  // positions stay contiguous and new tokens continue at n_tokens.
  KvEviction evict(PagedKvCache& kv, int seq, int n_sink, int window) const {
    const KvEviction e = kv.evict_sink_window(seq, n_sink, window);
    if (e.count == 0) return e;
    std::vector<float> cs(static_cast<size_t>(cfg_.n_rot));
    rope_delta_table(-e.count, cs.data());
    kv.rotate_keys(seq, e.begin, rope_fn(), cfg_.n_rot, cs.data());
    return e;
  }

  // Evaluates the batch; K/V of its tokens are appended to their sequences in `kv`, and the
  // logits of flagged tokens are left in ctx. On error the cache is left as it was.
  // n_layers > 0: early exit — only the first n_layers layers, then the final norm and the output
  // head (speculative decoding's self-draft, engine/speculative.hpp); kv needs that many layers.
  void forward(LlamaContext& ctx, PagedKvCache& kv, const Batch& b, int n_layers = 0) const {
    const int n = b.size();
    EDGELLM_CHECK(n > 0, "forward: empty batch");
    EDGELLM_CHECK(n_layers >= 0 && n_layers <= cfg_.n_layer, "forward: early exit after ", n_layers, " layers of ", cfg_.n_layer);
    if (n_layers == 0) n_layers = cfg_.n_layer;
    EDGELLM_CHECK(kv.params().n_layer >= n_layers, "forward: KV cache of ", kv.params().n_layer, " layers for ", n_layers);
    EDGELLM_CHECK(b.pos.size() == b.tokens.size() && b.seq.size() == b.tokens.size() && b.logits.size() == b.tokens.size(),
                  "forward: batch arrays differ in length");
    EDGELLM_CHECK(b.n_generated <= n, "forward: ", b.n_generated, " generated tokens in a batch of ", n);
    for (int i = 0; i < n; ++i)
      EDGELLM_CHECK(b.tokens[i] >= 0 && b.tokens[i] < cfg_.n_vocab, "forward: token id ", b.tokens[i],
                    " at batch index ", i, " is outside the vocabulary of ", cfg_.n_vocab);
    std::unique_lock<std::mutex> pass;
    if (w_.stream) pass = std::unique_lock<std::mutex>(w_.stream->pass_mutex());
    reserve_kv(kv, b);
    try {
      run(ctx, kv, b, n_layers);
    } catch (...) {
      rollback_kv(kv, b);
      throw;
    }
  }

 private:
  // Appends each sequence's new positions to the cache, after checking they continue it.
  void reserve_kv(PagedKvCache& kv, const Batch& b) const {
    std::map<int, int> next;  // sequence -> next expected position
    for (int i = 0; i < b.size(); ++i) {
      auto it = next.find(b.seq[i]);
      if (it == next.end()) it = next.emplace(b.seq[i], kv.n_tokens(b.seq[i])).first;
      EDGELLM_CHECK(b.pos[i] == it->second, "forward: token ", i, " of sequence ", b.seq[i], " has position ", b.pos[i],
                    ", expected ", it->second);
      ++it->second;
    }
    std::vector<std::pair<int, int>> done;
    try {
      for (const auto& [s, end] : next) {
        const int before = kv.n_tokens(s);
        kv.append(s, end - before);
        done.emplace_back(s, before);
      }
    } catch (...) {
      for (const auto& [s, before] : done) kv.truncate(s, before);
      throw;
    }
  }
  void rollback_kv(PagedKvCache& kv, const Batch& b) const {
    std::map<int, int> first;
    for (int i = 0; i < b.size(); ++i)
      if (!first.count(b.seq[i])) first[b.seq[i]] = b.pos[i];
    for (const auto& [s, p] : first) kv.truncate(s, p);
  }

  // The table's rotation for the architecture's RoPE form (model/arch.hpp).
  KvRopeFn rope_fn() const { return cfg_.rope_form() == RopeForm::Neox ? kt_->f.rope_neox : kt_->f.rope; }

  void mm(LlamaContext& ctx, const MatmulWeight& w, const float* x, int n_tok, float* y, int n_dec) const {
    matmul(*kt_, ctx.pool(), w, x, n_tok, y, ctx.mm_scratch_, n_dec);
  }

  // cos/sin of a rotation by `delta` positions, in double (delta can be thousands of positions).
  void rope_delta_table(int delta, float* cs) const {
    for (int i = 0; i < cfg_.n_rot / 2; ++i) {
      const double ff = w_.rope_freqs.empty() ? 1.0 : w_.rope_freqs[static_cast<size_t>(i)];
      const double t = static_cast<double>(cfg_.rope_freq_scale) * delta *
                       std::pow(static_cast<double>(cfg_.rope_freq_base), -2.0 * i / cfg_.n_rot) / ff;
      cs[2 * i] = static_cast<float>(std::cos(t));
      cs[2 * i + 1] = static_cast<float>(std::sin(t));
    }
  }

  // cos/sin of each rotated pair for position p, the way ggml computes them (float theta
  // multiplied by base^(-2/n_rot) pair after pair, optional frequency divisors, linear scale).
  void rope_table(int p, float* cs) const {
    const float theta_scale = std::pow(cfg_.rope_freq_base, -2.0f / static_cast<float>(cfg_.n_rot));
    float theta = static_cast<float>(p);
    for (int i = 0; i < cfg_.n_rot / 2; ++i) {
      const float ff = w_.rope_freqs.empty() ? 1.0f : w_.rope_freqs[static_cast<size_t>(i)];
      const float t = cfg_.rope_freq_scale * (theta / ff);
      cs[2 * i] = std::cos(t);
      cs[2 * i + 1] = std::sin(t);
      theta *= theta_scale;
    }
  }

  // The streamed matrices of unit `key` (model/weight_stream.hpp), or an empty lease that hands
  // back every matrix as loaded when the unit is resident.
  WeightStream::Lease lease(int key) const {
    WeightStream* st = w_.stream.get();
    return st && st->has(key) ? st->acquire(key) : WeightStream::Lease();
  }

  // Logits of the n_out rows of `in` through the output matrix, unit by unit when it is streamed
  // in row chunks (each chunk's rows computed exactly as unchunked).
  // n_dec: decode rows among the n_out (matmul's n_decode).
  void output_logits(LlamaContext& ctx, const float* in, int n_out, float* logits, int n_dec) const {
    if (!w_.stream || w_.residency.resident_matrix.back()) {
      mm(ctx, w_.output, in, n_out, logits, n_dec);
      return;
    }
    const int64_t nv = cfg_.n_vocab;
    for (int ch = 0; w_.stream->has(output_unit(cfg_.n_layer, ch)); ++ch) {
      const WeightStream::Lease ls = w_.stream->acquire(output_unit(cfg_.n_layer, ch));
      const MatmulWeight& v = ls.piece(0);
      const int64_t r0 = ls.unit()->pieces[0].row0;
      if (n_out == 1) {
        mm(ctx, v, in, 1, logits + r0, n_dec);
        continue;
      }
      ctx.out_tmp_.resize(size_t(n_out) * size_t(v.n_out));
      mm(ctx, v, in, n_out, ctx.out_tmp_.data(), n_dec);
      for (int t = 0; t < n_out; ++t)
        std::copy_n(ctx.out_tmp_.data() + size_t(t) * size_t(v.n_out), v.n_out, logits + size_t(t) * size_t(nv) + size_t(r0));
    }
  }

  void run(LlamaContext& ctx, PagedKvCache& kv, const Batch& b, int n_layers) const {
    const LlamaConfig& c = cfg_;
    const FloatKernels& f = kt_->f;
    const int n = b.size();
    const size_t N = static_cast<size_t>(n), D = static_cast<size_t>(c.n_embd), QD = static_cast<size_t>(c.q_dim()),
                 KVD = static_cast<size_t>(c.kv_dim()), FF = static_cast<size_t>(c.n_ff);
    ctx.x_.resize(N * D);
    ctx.xn_.resize(N * std::max(D, QD));
    ctx.tmp_.resize(N * D);
    ctx.q_.resize(N * QD);
    ctx.k_.resize(N * KVD);
    ctx.v_.resize(N * KVD);
    ctx.gate_.resize(N * FF);
    ctx.up_.resize(N * FF);
    ctx.cs_.resize(N * static_cast<size_t>(c.n_rot));
    float* x = ctx.x_.data();
    const KvRopeFn rope = rope_fn();
    auto add_bias = [](float* y, const std::vector<float>& bias) {
      for (size_t j = 0; j < bias.size(); ++j) y[j] += bias[j];
    };

    // 1. token embeddings; rope tables for each token's position
    for (int i = 0; i < n; ++i) {
      w_.embed(b.tokens[i], x + i * D);
      rope_table(b.pos[i], ctx.cs_.data() + static_cast<size_t>(i) * c.n_rot);
    }
    const int n_threads = ctx.pool() ? ctx.pool()->n_threads() : 1;
    if (static_cast<int>(ctx.attn_scratch_.size()) < n_threads) ctx.attn_scratch_.resize(static_cast<size_t>(n_threads));
    const std::vector<AttnTile> tiles = attention_tiles(b);  // the same for every layer
    // The matrices of layer l's matmul unit (the architecture's table), or the output matrix (l -1).
    auto observe = [&](int l, int unit, const float* in, int rows, size_t cols) {
      if (!ctx.observer_) return;
      if (l < 0) return ctx.observer_(w_.output_name(), in, rows, static_cast<int>(cols));
      for (const LayerTensor& r : c.arch_entry().layer)
        if (r.unit == unit && !r.field.extra()) ctx.observer_(layer_tensor_name(l, r.name), in, rows, static_cast<int>(cols));
    };

    for (int l = 0; l < n_layers; ++l) {
      const LlamaLayerWeights& L = w_.layers[static_cast<size_t>(l)];
      // 2. attention RMSNorm
      for (int i = 0; i < n; ++i) f.rmsnorm(ctx.xn_.data() + i * D, x + i * D, L.attn_norm.data(), c.n_embd, c.rms_eps);
      // 3. Q, K, V projections
      observe(l, kUnitQKV, ctx.xn_.data(), n, D);
      {
        const WeightStream::Lease w = lease(layer_unit(l, kUnitQKV));
        const MatmulTask qkv[] = {{&w(L.wq), ctx.q_.data()}, {&w(L.wk), ctx.k_.data()}, {&w(L.wv), ctx.v_.data()}};
        matmul_multi(*kt_, ctx.pool(), qkv, 3, ctx.xn_.data(), n, ctx.mm_scratch_, b.n_generated);  // one pass for Q, K, V
      }
      // 4. Q/K/V biases (qwen2), per-head RMSNorm of Q and K (qwen3), RoPE on Q and K; K and V
      //    appended to each token's sequence
      for (int i = 0; i < n; ++i) {
        float* q = ctx.q_.data() + i * QD;
        float* k = ctx.k_.data() + i * KVD;
        float* v = ctx.v_.data() + i * KVD;
        if (!L.bq.empty()) add_bias(q, L.bq);
        if (!L.bk.empty()) add_bias(k, L.bk);
        if (!L.bv.empty()) add_bias(v, L.bv);
        if (!L.q_norm.empty())
          for (int h = 0; h < c.n_head; ++h) f.rmsnorm(q + h * c.head_dim, q + h * c.head_dim, L.q_norm.data(), c.head_dim, c.rms_eps);
        if (!L.k_norm.empty())
          for (int h = 0; h < c.n_head_kv; ++h) f.rmsnorm(k + h * c.head_dim, k + h * c.head_dim, L.k_norm.data(), c.head_dim, c.rms_eps);
        const float* cs = ctx.cs_.data() + static_cast<size_t>(i) * c.n_rot;
        rope(q, c.n_head, c.head_dim, c.n_rot, cs);
        rope(k, c.n_head_kv, c.head_dim, c.n_rot, cs);
        kv.write(b.seq[i], l, b.pos[i], k, v);
      }
      // 5. causal attention of every (token, head) over its sequence's positions 0..pos
      float* att = ctx.xn_.data();  // [n_tok, q_dim]; the normed input is no longer needed
      attention(ctx, kv, b, tiles, l, att);
      // 6. output projection and residual
      observe(l, kUnitAttnOut, att, n, QD);
      mm(ctx, lease(layer_unit(l, kUnitAttnOut))(L.wo), att, n, ctx.tmp_.data(), b.n_generated);
      for (size_t i = 0; i < N * D; ++i) x[i] += ctx.tmp_[i];
      // 7. FFN: RMSNorm, SwiGLU, down projection, residual
      for (int i = 0; i < n; ++i) f.rmsnorm(ctx.xn_.data() + i * D, x + i * D, L.ffn_norm.data(), c.n_embd, c.rms_eps);
      observe(l, kUnitGateUp, ctx.xn_.data(), n, D);
      {
        const WeightStream::Lease w = lease(layer_unit(l, kUnitGateUp));
        const MatmulTask gate_up[] = {{&w(L.w_gate), ctx.gate_.data()}, {&w(L.w_up), ctx.up_.data()}};
        matmul_multi(*kt_, ctx.pool(), gate_up, 2, ctx.xn_.data(), n, ctx.mm_scratch_, b.n_generated);  // one pass for both
      }
      f.silu_mul(ctx.gate_.data(), ctx.up_.data(), static_cast<int>(N * FF));
      observe(l, kUnitDown, ctx.gate_.data(), n, FF);
      mm(ctx, lease(layer_unit(l, kUnitDown))(L.w_down), ctx.gate_.data(), n, ctx.tmp_.data(), b.n_generated);
      for (size_t i = 0; i < N * D; ++i) x[i] += ctx.tmp_[i];
    }

    // 8. final RMSNorm and output projection for the tokens that want logits
    int n_out = 0, n_out_dec = 0;  // rows wanting logits; of them, generated tokens (first n_generated rows)
    for (int i = 0; i < n; ++i) {
      n_out += b.logits[i] != 0;
      n_out_dec += b.logits[i] != 0 && i < b.n_generated;
    }
    ctx.out_in_.resize(static_cast<size_t>(n_out) * D);
    for (int i = 0, o = 0; i < n; ++i)
      if (b.logits[i]) f.rmsnorm(ctx.out_in_.data() + static_cast<size_t>(o++) * D, x + i * D, w_.output_norm.data(), c.n_embd, c.rms_eps);
    ctx.n_vocab_ = c.n_vocab;
    ctx.n_embd_ = c.n_embd;
    ctx.n_outputs_ = n_out;
    if (ctx.hidden_output_) return;
    ctx.logits_.resize(static_cast<size_t>(n_out) * c.n_vocab);
    if (n_out > 0) observe(-1, kUnitNone, ctx.out_in_.data(), n_out, D);
    if (n_out > 0) output_logits(ctx, ctx.out_in_.data(), n_out, ctx.logits_.data(), b.n_generated < 0 ? -1 : n_out_dec);
  }

  // Cache positions per attention step: whole blocks up to this many rows, so the score GEMMs run
  // on 64-wide slices rather than on one block (docs/PERF.md, "Attention over the paged cache").
  static constexpr int kAttnStepRows = 64;
  // Query rows of an attention tile (tokens x the n_gqa heads of a KV head): about this many ...
  static constexpr int kAttnTileRows = 64;
  // ... and at most this many floats of scores (query rows x positions) per tile.
  static constexpr int kAttnTileScoreFloats = 1 << 20;

  // A run of consecutive batch tokens of one sequence at consecutive positions, for one KV head:
  // the unit of attention work (all n_gqa query heads of that KV head, for every token of the run).
  struct AttnTile {
    int i0, n_tok, kvh;  // first batch token, tokens, KV head
  };

  // Splits the batch into runs of up to ~kAttnTileRows / n_gqa tokens (same sequence, positions +1 each;
  // fewer when score rows get long: S is M x positions floats), times the KV heads; the runs with
  // the most positions first, so threads that claim them in order finish together (causal
  // prefill: late tokens see more positions). Depends on the batch only: made once per forward.
  std::vector<AttnTile> attention_tiles(const Batch& b) const {
    const int n_gqa = cfg_.n_gqa();
    int max_pos = 0;
    for (int i = 0; i < b.size(); ++i) max_pos = std::max(max_pos, b.pos[i]);
    int max_tok = std::max(1, kAttnTileRows / n_gqa);
    max_tok = std::max(1, std::min(max_tok, kAttnTileScoreFloats / (n_gqa * (max_pos + 1))));
    std::vector<AttnTile> runs;
    for (int i = 0; i < b.size();) {
      int n = 1;
      while (i + n < b.size() && n < max_tok && b.seq[i + n] == b.seq[i] && b.pos[i + n] == b.pos[i + n - 1] + 1) ++n;
      runs.push_back({i, n, 0});
      i += n;
    }
    std::stable_sort(runs.begin(), runs.end(), [&](const AttnTile& x, const AttnTile& y) {
      return b.pos[x.i0 + x.n_tok - 1] > b.pos[y.i0 + y.n_tok - 1];
    });
    std::vector<AttnTile> tiles;
    tiles.reserve(runs.size() * static_cast<size_t>(cfg_.n_head_kv));
    for (const AttnTile& r : runs)
      for (int h = 0; h < cfg_.n_head_kv; ++h) tiles.push_back({r.i0, r.n_tok, h});
    return tiles;
  }

  // att[i, h*head_dim ..] = sum_j softmax_j(q_i,h . k_j / sqrt(head_dim)) v_j over positions j <= pos_i.
  // Per tile (a run of T tokens x the n_gqa query heads of one KV head: M = T * n_gqa query rows),
  // each K/V block of the sequence is converted to F32 once and multiplied with all M rows by the
  // table's small GEMM (S = Q K^T, then O = softmax(S) V), so a K/V row is read once per tile
  // rather than once per (token, head). Positions from shadow_begin on come from the F32 copy.
  // Tiles (attention_tiles) are claimed from an atomic counter by the pool's threads. Cache rows
  // are converted by the table's to_float of the cache's storage type (F32, F16, Q8_0).
  void attention(LlamaContext& ctx, const PagedKvCache& kv, const Batch& b, const std::vector<AttnTile>& tiles, int l,
                 float* att) const {
    const LlamaConfig& c = cfg_;
    const FloatKernels& f = kt_->f;
    const ToFloatFn to_float = kt_->of(kv.type()).to_float;
    const int hd = c.head_dim, n_gqa = c.n_gqa();
    const size_t QD = static_cast<size_t>(c.q_dim());
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    std::atomic<size_t> next{0};
    auto work = [&](int64_t, int64_t, int thread) {
      std::vector<float>& scratch = ctx.attn_scratch_[static_cast<size_t>(thread)];
      for (size_t ti = next.fetch_add(1, std::memory_order_relaxed); ti < tiles.size();
           ti = next.fetch_add(1, std::memory_order_relaxed)) {
        const AttnTile& tile = tiles[ti];
        const int M = tile.n_tok * n_gqa;                             // query rows: every head of the group, every token
        const int n_pos = b.pos[tile.i0 + tile.n_tok - 1] + 1;        // positions the last token sees
        const KvHeadReader cache(kv, b.seq[tile.i0], l, tile.kvh, n_pos, to_float, kAttnStepRows);
        const int step_max = cache.max_step();
        const size_t need = static_cast<size_t>(M) * (2 * hd + n_pos) + 2 * static_cast<size_t>(step_max) * hd;
        if (scratch.size() < need) scratch.resize(need);
        float* Q = scratch.data();                            // [M, hd] queries times 1/sqrt(hd)
        float* S = Q + static_cast<size_t>(M) * hd;           // [M, n_pos] scores, then probabilities
        float* O = S + static_cast<size_t>(M) * n_pos;        // [M, hd] output rows
        float* rows = O + static_cast<size_t>(M) * hd;        // [step, hd] one step's K or V rows
        float* k_t = rows + static_cast<size_t>(step_max) * hd;  // [hd, step] its K rows transposed
        for (int t = 0; t < tile.n_tok; ++t) {
          const float* q = ctx.q_.data() + static_cast<size_t>(tile.i0 + t) * QD + static_cast<size_t>(tile.kvh) * n_gqa * hd;
          for (int e = 0; e < n_gqa * hd; ++e) Q[static_cast<size_t>(t) * n_gqa * hd + e] = q[e] * scale;
        }
        // 1. S = Q K^T
        for (int j0 = 0; j0 < n_pos; j0 += cache.step(j0)) {
          const int cnt = cache.step(j0);
          cache.read(KvHeadReader::K, j0, rows);
          f.transpose_f32(rows, cnt, hd, hd, k_t, cnt);
          f.gemm_f32(M, cnt, hd, Q, hd, k_t, cnt, S + j0, n_pos, /*accumulate=*/false);
        }
        // 2. P = softmax(S) per query row, causal: positions a token does not see get probability 0
        for (int t = 0; t < tile.n_tok; ++t) {
          const int seen = b.pos[tile.i0 + t] + 1;
          for (int g = 0; g < n_gqa; ++g) {
            float* row = S + static_cast<size_t>(t * n_gqa + g) * n_pos;
            f.softmax(row, seen);
            std::fill(row + seen, row + n_pos, 0.0f);
          }
        }
        // 3. O = P V
        for (int j0 = 0; j0 < n_pos; j0 += cache.step(j0)) {
          const int cnt = cache.step(j0);
          cache.read(KvHeadReader::V, j0, rows);
          f.gemm_f32(M, hd, cnt, S + j0, n_pos, rows, hd, O, hd, /*accumulate=*/j0 > 0);
        }
        for (int t = 0; t < tile.n_tok; ++t)
          std::copy_n(O + static_cast<size_t>(t) * n_gqa * hd, n_gqa * hd,
                      att + static_cast<size_t>(tile.i0 + t) * QD + static_cast<size_t>(tile.kvh) * n_gqa * hd);
      }
    };
    const int n_threads = ctx.pool() ? ctx.pool()->n_threads() : 1;
    if (n_threads > 1 && tiles.size() > 1) ctx.pool()->parallel_for(n_threads, work);
    else work(0, 1, 0);
  }

  GgufFile file_;
  const KernelTable* kt_;
  LlamaConfig cfg_;
  LlamaWeights w_;
};

}  // namespace edgellm
